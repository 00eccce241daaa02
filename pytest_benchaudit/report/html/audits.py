"""Sections on what moved the scores: task similarity, generation against extraction sensitivity,
peer gaps, diagnose findings, per-field score deltas, invalid rates, and the document's notes."""

from __future__ import annotations

from typing import Any

from pytest_benchaudit.report.html.analysis_plots import similarity_scatter
from pytest_benchaudit.report.html.format import (esc, fmt, fmt_ci, fmt_corr, fmt_p, fmt_pp, fmt_share, is_num, note,
                                                  table)
from pytest_benchaudit.report.html.plots import invalid_plot, sweep_plots
from pytest_benchaudit.report.html.sets import section
from pytest_benchaudit.report.html.verdict import small_sample_note

__all__ = ["similarity_section", "sensitivity_section", "peers_section", "by_effect", "findings_section",
           "sweeps_section",
           "ledger_section", "invalid_section", "notes_section", "FINDING_COLUMNS"]

#: The fields of a diagnose finding the report shows, in order.
FINDING_COLUMNS = ["benchmark", "task", "model", "failure_mode", "field", "evidence", "effect_pp"]
#: Peer-gap rows shown (largest change first).
PEER_ROWS = 30


def similarity_section(doc: dict[str, Any]) -> str:
    sim = doc.get("similarity")
    if not isinstance(sim, dict) or not sim.get("pairs"):
        return ""
    perm = sim.get("permutation") or {}
    if is_num(sim.get("pearson_r")):
        head = (f"Pearson r = {fmt_corr(sim['pearson_r'])} over {sim.get('n_pairs')} task pairs (scipy p = "
                f"{fmt_p(sim.get('p_value'))}; Mantel permutation p = {fmt_p(perm.get('p_value'))}, "
                f"{perm.get('n_permutations', '—')} permutations).")
    else:
        head = f"No correlation: {sim.get('skipped', 'too few pairs')}."
    rows = [[p["task_a"], p["task_b"], f"{p['similarity']:.3f}", fmt_corr(p.get("tau_b")), p.get("n_models", "—")]
            for p in sorted(sim["pairs"], key=lambda p: -p["similarity"])]
    return section("similarity", "Task similarity and ranking agreement",
                   note(f"Embedder: {sim.get('embedder')}. Each task's description and "
                        f"{sim.get('n_prompts', 'some')} sampled prompts, embedded; cosine similarity per pair."),
                   f"<p><strong>{esc(head)}</strong></p>",
                   note("Each τ-b comes from the few models two tasks share, so r² is not a share of variance; pairs "
                        "sharing a task are dependent, which the Mantel test respects."),
                   similarity_scatter(sim),
                   table(["task a", "task b", "cosine similarity", "τ-b", "models"], rows))


def sensitivity_section(doc: dict[str, Any]) -> str:
    """One ρ column (with CI and models) per run set the document has: ρ_gen (regenerated), ρ_ext
    (re-scored, extraction fields only) and, where the document has it, ρ_downstream (every downstream
    field); ``columns`` names them (older documents: gen and ext)."""
    sens = doc.get("sensitivity")
    if not isinstance(sens, dict) or not sens.get("benchmarks"):
        return ""
    columns = [k[len("rho_"):] for k in (sens.get("columns") or {"rho_gen": "", "rho_ext": ""})]
    rows = []
    for r in sens["benchmarks"]:
        why = "; ".join(str(r[f"why_no_{c}"]) for c in columns if r.get(f"why_no_{c}"))
        more = r.get("generation_moves_more")
        cells = [x for c in columns
                 for x in (fmt_corr(r.get(f"rho_{c}")), fmt_ci(r.get(f"ci95_{c}")), r.get(f"n_models_{c}", 0))]
        rows.append([r["benchmark"], *cells, "—" if more is None else ("generation" if more else "extraction"), why])
    runs = sens.get("runs") or []
    n_gen = sum(r.get("kind") == "upstream" for r in runs)
    warns = [f"{r['benchmark']}: " + small_sample_note(r.get(f"n_models_{c}"), f"ρ_{c}") for r in sens["benchmarks"]
             for c in columns if r.get(f"n_models_{c}") and small_sample_note(r.get(f"n_models_{c}"), f"ρ_{c}")]
    what = "; ".join(f"ρ_{k[len('rho_'):]}: {v}" for k, v in (sens.get("columns") or {}).items() if v)
    return section("sensitivity", "Generation against extraction sensitivity",
                   note(f"Spearman ρ between the base ranking and the ranking under regenerated runs (ρ_gen, {n_gen} "
                        f"runs) and re-scored runs ({len(runs) - n_gen} runs); 95% CI from the paired bootstrap "
                        f"over questions ({sens.get('n_resamples', '—')} resamples). 1 = the change kept the order."
                        + (f" {what}." if what else "") + " Moves more: generation when ρ_gen < ρ_ext."),
                   table(["benchmark", *[h for c in columns for h in (f"ρ_{c}", "95% CI", "models")], "moves more",
                          "missing"], rows),
                   *[f'<p class="warn">{esc(w)}</p>' for w in warns])


def peers_section(doc: dict[str, Any]) -> str:
    gaps = [r for r in doc.get("peer_gaps") or [] if isinstance(r, dict)]
    if not gaps:
        return ""

    def v(r: dict[str, Any], k: str) -> str:
        """A gap in pp on a share metric, else in the metric's own unit, named."""
        if is_num(r.get(k + "_pp")):
            return fmt_pp(r.get(k + "_pp")) + " pp"
        unit = r.get("metric_b" if k == "gap_b" else "metric_a") or ""
        return (f"{float(r[k]):+.3g} {unit}".rstrip() if is_num(r.get(k)) else "—")

    ordered = sorted(gaps, key=lambda r: (not r.get("comparable"), -abs(r.get("delta") or 0), r["task"], r["model"]))
    rows = [[r["task"], r["model"], v(r, "gap_a"), v(r, "gap_b"), v(r, "delta") if r.get("comparable") else
             "— (metrics differ)", r.get("n_peers")] for r in ordered[:PEER_ROWS]]
    more = note(f"The {PEER_ROWS} largest of {len(gaps)}; compare.json has them all.") if len(gaps) > PEER_ROWS else ""
    return section("peers", "Peer gaps",
                   note(f"Gap = the model's score minus the mean of the other models on the task (higher = better), "
                        f"under {doc.get('label_a', 'a')} and {doc.get('label_b', 'b')}; delta = gap b − gap a, the "
                        "move relative to its peers that a change common to all models cannot explain. Largest first."),
                   table(["task", "model", f"gap ({doc.get('label_a', 'a')})", f"gap ({doc.get('label_b', 'b')})",
                          "delta", "peers"], rows), more)


def _evidence(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_evidence(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_evidence(v) for v in list(value)[:8])
        return shown + (f", … ({len(value)} in all)" if len(value) > 8 else "")
    return fmt(value, 2)


def by_effect(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings largest effect first: those with an effect in pp by |effect_pp|, then the rest (an effect in a
    metric's own unit, or none: it needs new generations) in their given order."""
    return sorted(findings, key=lambda f: (0, -abs(float(f["effect_pp"]))) if is_num(f.get("effect_pp")) else (1, 0.0))


def findings_section(findings: list[dict[str, Any]] | None) -> str:
    if findings is None:
        return ""
    findings = by_effect([f for f in findings if isinstance(f, dict)])
    said = any(f.get("hypothesis") for f in findings)  # diagnose's sentence, when the finding carries one
    rows = []
    for f in findings:
        mode = str(f.get("failure_mode") or "—") + (f": {f['title']}" if f.get("title") else "")
        effect = fmt_pp(f["effect_pp"]) if is_num(f.get("effect_pp")) else str(f.get("effect") or "—")
        rows.append([f.get("benchmark"), f.get("task"), f.get("model"), mode, f.get("field"),
                     *([f.get("hypothesis") or ""] if said else []), _evidence(f.get("evidence")), effect])
    heads = ["benchmark", "task", "model", "failure mode", "field that fixes it", *(["hypothesis"] if said else []),
             "evidence", "effect (pp)"]
    return section("findings", "Diagnose findings",
                   note(f"{len(rows)} findings, largest |effect| first. Each is a hypothesis with its evidence, not a "
                        "verdict: check the questions named."),
                   table(heads, rows) if rows else note("No finding."),
                   note("Effect: how far fixing the field moves the headline score, in percentage points, re-scored "
                        "offline for downstream fields or recomputed without the questions concerned; on an error "
                        "metric (e.g. a MAD) it is in the metric's own unit and sorts after the pp effects; upstream "
                        "fields need new generations (no number).") if rows else "")


def _delta(row: dict[str, Any]) -> str:
    """A variant's change: signed pp on a share metric, signed in the metric's unit otherwise."""
    if is_num(row.get("delta_pp")):
        return fmt_pp(row["delta_pp"]) + " pp"
    if is_num(row.get("delta")):
        return f"{float(row['delta']):+.3g} {row.get('unit') or row.get('metric') or ''}".rstrip()
    return "—"


def _setting(row: dict[str, Any]) -> str:
    """The variant as ``field=value`` (the field's full name), else the variant's own name."""
    if row.get("field") and row.get("value") is not None:
        return f"{row['field']}={row['value']}"
    return str(row.get("variant") or row.get("field") or "—")


def sweeps_section(sweeps: list[dict[str, Any]]) -> str:
    if not sweeps:
        return ""
    rows = [[".".join(str(p) for p in (r.get("benchmark"), r.get("task")) if p), r.get("model"), _setting(r),
             fmt_share(r.get("base_score")) if is_num(r.get("delta_pp")) else fmt(r.get("base_score"), 2),
             fmt_share(r.get("score")) if is_num(r.get("delta_pp")) else fmt(r.get("score"), 2),
             _delta(r),
             fmt_share(r.get("invalid_rate")), r.get("moved_by"), r.get("moved_by_detail")] for r in sweeps]
    return section("sweeps", "Per-field score deltas", *sweep_plots(sweeps),
                   table(["task", "model", "field = value", "base score", "score", "Δ", "invalid", "moved by",
                          "detail"], rows),
                   note("One row per single-field variant: the run re-scored with only that field changed. Δ = score "
                        "− base score, in percentage points on share metrics, in the metric's own unit otherwise "
                        "(never on one axis: one plot per unit). Invalid: share of items without a scorable answer "
                        "under the variant. Moved by: the stage whose rate changed (inference, extraction, scoring)."))


def invalid_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    rows = [[r.get("benchmark"), r.get("task"), r.get("model"), r.get("pipeline"), r.get("n"), r.get("n_valid"),
             fmt_share(r.get("invalid_rate")),
             ", ".join(f"{k}: {v}" for k, v in (r.get("invalid_reasons") or {}).items())] for r in runs]
    return section("invalid", "Invalid rates", invalid_plot(runs),
                   table(["benchmark", "task", "model", "pipeline", "n", "valid", "invalid", "reasons"], rows),
                   note("n: items scored; valid: items with a scorable answer; invalid: 1 − valid / n; reasons: "
                        "the invalid items counted by the reason recorded for each."))


def notes_section(doc: dict[str, Any]) -> str:
    notes = [str(n) for n in doc.get("notes") or []]
    notes += [f"{m.get('benchmark')}: {m.get('model')}: {m.get('reason')}" for m in doc.get("missing") or []
              if isinstance(m, dict)]
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return section("notes", "Notes", f'<ul class="notes">{items}</ul>')


def ledger_section(ledger: list[dict[str, Any]] | None, upstream: list[dict[str, Any]] | None) -> str:
    """The ledger rows of the audited benchmarks (documented vs released, per field) and the upstream fields
    in which the target layer differs from the stored runs (they need new generations)."""
    parts = []
    rows = [r for r in ledger or [] if isinstance(r, dict) and isinstance(r.get("cells"), dict)]
    if rows:
        fields = list(dict.fromkeys(f for r in rows for f in r["cells"]))
        # One row per field, one column per benchmark: a dozen fields stay within the page.
        body = [[f, *[(r["cells"].get(f) or {}).get("status", "—") for r in rows]] for f in fields]
        body.append(["reproducible from the documentation?", *[r.get("summary", "") for r in rows]])
        parts.append("<h3>Ledger: documented against released</h3>"
                     + table(["field", *[r["benchmark"] for r in rows]], body)
                     + note("Per pipeline field: matched = the documentation states the value and the released code "
                            "uses it; contradicted = the code does something else; undefined = the documentation "
                            "does not state it; unread = a document that may state it could not be read "
                            "(docs/ledger.md)."))
    peer_rows = [[r.get("benchmark"), layer.get("layer"), f.get("field"), fmt(f.get("released")), fmt(f.get("peer")),
                  ", ".join(f.get("tasks") or []), f.get("why") or "no why given"]
                 for r in rows for layer in r.get("peers") or [] for f in layer.get("fields") or []]
    if peer_rows:
        parts.append("<h3>Peer harness layers against released</h3>"
                     + table(["benchmark", "layer", "field", "released", "peer layer", "tasks", "why (the peer's code)"],
                             peer_rows)
                     + note("Per layer that says what a general harness does with the benchmark (inspect_evals, "
                            "lm_eval and their variants): every pipeline field where it differs from the benchmark's "
                            "released pipeline, with the peer's file and version that sets it (docs/harnesses.md)."))
    up = [r for r in upstream or [] if isinstance(r, dict) and r.get("fields")]
    if up:
        body = [[r["task"], d["field"], fmt(d.get("stored")), fmt(next((v for k, v in d.items()
                                                                        if k not in ("field", "stored")), None))]
                for r in up for d in r["fields"]]
        regenerated = all(r.get("regenerated") for r in up)  # a --pipelines run: both layers were asked
        parts.append(("<h3>Upstream fields that differ (regenerated in this run: their joint effect is the "
                      "'upstream (regenerated)' rows of the field deltas)</h3>" if regenerated else
                      "<h3>Upstream fields that differ (need new generations, not estimated)</h3>")
                     + table(["task", "field", "base layer" if regenerated else "stored runs", "target layer"], body)
                     + note("One row per field of the dataset, prompt or inference stage whose value differs between "
                            "the layers: re-scoring cannot change it, so its effect is measured only by new "
                            "generations."))
    if not parts:
        return ""
    return section("ledger", "Ledger and upstream fields", *parts)
