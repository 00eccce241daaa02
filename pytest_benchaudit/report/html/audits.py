"""Sections on what moved the scores: diagnose findings, per-field score deltas, invalid rates, the ledger and
the document's notes.  (Peer gaps, task similarity and sensitivity are registered analyses: their sections
live with them, :mod:`pytest_benchaudit.compare.analysis_registry`.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_benchaudit.diagnose.finding_documents import FindingRow
from pytest_benchaudit.report.html.format import esc, fmt, fmt_pp, fmt_share, is_num, note, table
from pytest_benchaudit.report.html.plots import invalid_plot, sweep_plots
from pytest_benchaudit.report.html.sets import section
from pytest_benchaudit.report.html.sweeps import SweepRow, value_of

__all__ = [
    "by_effect",
    "findings_section",
    "sweeps_section",
    "ledger_section",
    "invalid_section",
    "notes_section",
    "FINDING_COLUMNS",
]

#: The fields of a diagnose finding the report shows, in order.
FINDING_COLUMNS = ["benchmark", "task", "model", "failure_mode", "field", "evidence", "effect_pp"]


def _evidence(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_evidence(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_evidence(v) for v in list(value)[:8])
        return shown + (f", … ({len(value)} in all)" if len(value) > 8 else "")
    return fmt(value, 2)


def by_effect(findings: Sequence[FindingRow]) -> list[FindingRow]:
    """Findings largest effect first: those with an effect in pp by |effect_pp|, then the rest (an effect in a
    metric's own unit, or none: it needs new generations) in their given order."""

    def key(f: FindingRow) -> tuple[int, float]:
        pp = f.get("effect_pp")
        return (0, -abs(float(pp))) if pp is not None and is_num(pp) else (1, 0.0)

    return sorted(findings, key=key)


def findings_section(findings: Sequence[FindingRow] | None) -> str:
    if findings is None:
        return ""
    findings = by_effect([f for f in findings if isinstance(f, dict)])
    said = any(f.get("hypothesis") for f in findings)  # diagnose's sentence, when the finding carries one
    rows = []
    for f in findings:
        mode = str(f.get("failure_mode") or "—") + (f": {f['title']}" if f.get("title") else "")
        effect = fmt_pp(f["effect_pp"]) if is_num(f.get("effect_pp")) else str(f.get("effect") or "—")
        rows.append(
            [
                f.get("benchmark"),
                f.get("task"),
                f.get("model"),
                mode,
                f.get("field"),
                *([f.get("hypothesis") or ""] if said else []),
                _evidence(f.get("evidence")),
                effect,
            ]
        )
    heads = [
        "benchmark",
        "task",
        "model",
        "failure mode",
        "field that fixes it",
        *(["hypothesis"] if said else []),
        "evidence",
        "effect (pp)",
    ]
    return section(
        "findings",
        "Diagnose findings",
        note(
            f"{len(rows)} findings, largest |effect| first. Each is a hypothesis with its evidence, not a "
            "verdict: check the questions named."
        ),
        table(heads, rows) if rows else note("No finding."),
        note(
            "Effect: how far fixing the field moves the headline score, in percentage points, re-scored "
            "offline for downstream fields or recomputed without the questions concerned; on an error "
            "metric (e.g. a MAD) it is in the metric's own unit and sorts after the pp effects; upstream "
            "fields need new generations (no number)."
        )
        if rows
        else "",
    )


def _delta(row: SweepRow) -> str:
    """A variant's change: signed pp on a share metric, signed in the metric's unit otherwise."""
    if is_num(row.get("delta_pp")):
        return fmt_pp(row["delta_pp"]) + " pp"
    delta = row.get("delta")
    if delta is not None and is_num(delta):
        return f"{float(delta):+.3g} {row.get('unit') or row.get('metric') or ''}".rstrip()
    return "—"


def _setting(row: SweepRow) -> str:
    """The variant as ``field=value`` (the field's full name), else the variant's own name."""
    value = value_of(row)
    if row.get("field") and value is not None:
        return f"{row['field']}={value}"
    return str(row.get("variant") or row.get("field") or "—")


def sweeps_section(sweeps: Sequence[SweepRow]) -> str:
    if not sweeps:
        return ""
    rows = [
        [
            ".".join(str(p) for p in (r.get("benchmark"), r.get("task")) if p),
            r.get("model"),
            _setting(r),
            fmt_share(r.get("base_score")) if is_num(r.get("delta_pp")) else fmt(r.get("base_score"), 2),
            fmt_share(r.get("score")) if is_num(r.get("delta_pp")) else fmt(r.get("score"), 2),
            _delta(r),
            fmt_share(r.get("invalid_rate")),
            r.get("moved_by"),
            r.get("moved_by_detail"),
        ]
        for r in sweeps
    ]
    return section(
        "sweeps",
        "Per-field score deltas",
        *sweep_plots(sweeps),
        table(["task", "model", "field = value", "base score", "score", "Δ", "invalid", "moved by", "detail"], rows),
        note(
            "One row per single-field variant: the run re-scored with only that field changed. Δ = score "
            "− base score, in percentage points on share metrics, in the metric's own unit otherwise "
            "(never on one axis: one plot per unit). Invalid: share of items without a scorable answer "
            "under the variant. Moved by: the stage whose rate changed (inference, extraction, scoring)."
        ),
    )


def invalid_section(runs: Sequence[Mapping[str, Any]]) -> str:
    if not runs:
        return ""
    rows = [
        [
            r.get("benchmark"),
            r.get("task"),
            r.get("model"),
            r.get("pipeline"),
            r.get("n"),
            r.get("n_valid"),
            fmt_share(r.get("invalid_rate")),
            ", ".join(
                [f"{k}: {v}" for k, v in (r.get("invalid_reasons") or {}).items()]
                # an import whose log holds no finish reason: its truncation is unknown, not 0
                + ([f"truncated: {r['truncation']}"] if r.get("truncation") else [])
            ),
        ]
        for r in runs
    ]
    return section(
        "invalid",
        "Invalid rates",
        invalid_plot(runs),
        table(["benchmark", "task", "model", "pipeline", "n", "valid", "invalid", "reasons"], rows),
        note(
            "n: items scored; valid: items with a scorable answer; invalid: 1 − valid / n; reasons: "
            "the invalid items counted by the reason recorded for each."
        ),
    )


def notes_section(doc: Mapping[str, Any]) -> str:
    notes = [str(n) for n in doc.get("notes") or []]
    notes += [
        f"{m.get('benchmark')}: {m.get('model')}: {m.get('reason')}"
        for m in doc.get("missing") or []
        if isinstance(m, dict)
    ]
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return section("notes", "Notes", f'<ul class="notes">{items}</ul>')


def ledger_section(ledger: Sequence[Mapping[str, Any]] | None, upstream: Sequence[Mapping[str, Any]] | None) -> str:
    """The ledger rows of the audited benchmarks (documented vs released, per field) and the upstream fields
    in which the target layer differs from the stored runs (they need new generations)."""
    parts = []
    rows = [r for r in ledger or [] if isinstance(r, dict) and isinstance(r.get("cells"), dict)]
    if rows:
        fields = list(dict.fromkeys(f for r in rows for f in r["cells"]))
        # One row per field, one column per benchmark: a dozen fields stay within the page.
        body = [[f, *[(r["cells"].get(f) or {}).get("status", "—") for r in rows]] for f in fields]
        body.append(["reproducible from the documentation?", *[r.get("summary", "") for r in rows]])
        parts.append(
            "<h3>Ledger: documented against released</h3>"
            + table(["field", *[r["benchmark"] for r in rows]], body)
            + note(
                "Per pipeline field: matched = the documentation states the value and the released code "
                "uses it; contradicted = the code does something else; undefined = the documentation "
                "does not state it; unread = a document that may state it could not be read "
                "(docs/ledger.md)."
            )
        )
    peer_rows = [
        [
            r.get("benchmark"),
            layer.get("layer"),
            f.get("field"),
            fmt(f.get("released")),
            fmt(f.get("peer")),
            ", ".join(f.get("tasks") or []),
            f.get("why") or "no why given",
        ]
        for r in rows
        for layer in r.get("peers") or []
        for f in layer.get("fields") or []
    ]
    if peer_rows:
        parts.append(
            "<h3>Peer harness layers against released</h3>"
            + table(
                ["benchmark", "layer", "field", "released", "peer layer", "tasks", "why (the peer's code)"], peer_rows
            )
            + note(
                "Per layer that says what a general harness does with the benchmark (inspect_evals, "
                "lm_eval and their variants): every pipeline field where it differs from the benchmark's "
                "released pipeline, with the peer's file and version that sets it (docs/harnesses.md)."
            )
        )
    up = [r for r in upstream or [] if isinstance(r, dict) and r.get("fields")]
    if up:
        body = [
            [
                r["task"],
                d["field"],
                fmt(d.get("stored")),
                fmt(next((v for k, v in d.items() if k not in ("field", "stored")), None)),
            ]
            for r in up
            for d in r["fields"]
        ]
        regenerated = all(r.get("regenerated") for r in up)  # a --pipelines run: both layers were asked
        parts.append(
            (
                "<h3>Upstream fields that differ (regenerated in this run: their joint effect is the "
                "'upstream (regenerated)' rows of the field deltas)</h3>"
                if regenerated
                else "<h3>Upstream fields that differ (need new generations, not estimated)</h3>"
            )
            + table(["task", "field", "base layer" if regenerated else "stored runs", "target layer"], body)
            + note(
                "One row per field of the dataset, prompt or inference stage whose value differs between "
                "the layers: re-scoring cannot change it, so its effect is measured only by new "
                "generations."
            )
        )
    if not parts:
        return ""
    return section("ledger", "Ledger and upstream fields", *parts)
