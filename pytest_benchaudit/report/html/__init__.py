"""A self-contained HTML report of a ``benchaudit compare`` document.

:func:`write_html` writes one file a reviewer opens offline: inline CSS, no script, no external
reference; plots are matplotlib PNGs embedded as base64 ``data:`` URIs.  Model names, task keys,
variants and every other string come from model outputs and user configuration, so they are
untrusted: each one is escaped before it reaches the page (:mod:`.format`), and matplotlib draws
them with mathtext off.  A Content-Security-Policy meta tag forbids scripts and any load other
than inline styles and ``data:`` images, as a second line of defence.

Sections, each present only when its data is (in this order):

* summary (the compared sets, their pipelines and runs);
* the cross-harness table (``harnesses``: ``benchaudit audit --pipelines A,B,C``) (:mod:`.harnesses`);
* scores per task and ranks per task, for each compared set, labelled (:mod:`.sets`);
* rank shifts between the two sets (bump chart, table) and Spearman rho with its CI;
* Kendall tau-b between tasks (heatmap and table, per set);
* PCA (scree plot with the parallel-analysis threshold, biplot, table), per benchmark when no
  model scores on every task;
* the section of each analysis registered on :mod:`pytest_benchaudit.compare.analysis_registry` whose part the
  document has, in the order registered: peer gaps, task similarity against tau-b (scatter, r, p-values,
  pairs), generation against extraction sensitivity (rho_gen, rho_ext), then any analysis registered since;
  each is written with :class:`.kit.ReportKit` (the report's escaping, tables and plots);
* what the caller renders itself: ``first`` at the top of the verdict block (``benchaudit audit``: the
  multiverse's verdict, which model orderings survive every defensible pipeline) and ``extra_sections`` before the ledger (the
  multiverse's section, :mod:`pytest_benchaudit.multiverse.mv_html`);
* diagnose findings (``findings``: dicts with benchmark, task, model, failure_mode, field, evidence,
  effect_pp) (:mod:`.audits`);
* per-field score deltas (``sweeps``), invalid rates (``runs``), the repeats' error bars (``runs`` asked
  K > 1 times, :mod:`.repeats`), the paired differences between models (``paired``, ``rank_ties``,
  ``mde80``: :mod:`.paired`; the rank table marks a tie ``≈``), the ledger and the upstream fields that
  differ (``benchaudit audit``), and the document's notes.

Numbers are rounded to what they mean (see :mod:`.format`); the raw numbers are in compare.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.compare.analysis_registry import analyses
from pytest_benchaudit.compare.compare_documents import CompareDocument
from pytest_benchaudit.diagnose.finding_documents import FindingRow
from pytest_benchaudit.report.html.audits import (
    findings_section,
    invalid_section,
    ledger_section,
    notes_section,
    sweeps_section,
)
from pytest_benchaudit.report.html.format import CSP, CSS, esc, note, table
from pytest_benchaudit.report.html.harnesses import harnesses_section
from pytest_benchaudit.report.html.kit import ReportKit
from pytest_benchaudit.report.html.paired import paired_section
from pytest_benchaudit.report.html.repeats import repeats_section
from pytest_benchaudit.report.html.sets import (
    pca_section,
    ranks_section,
    scores_section,
    set_views,
    shift_section,
    tau_section,
)
from pytest_benchaudit.report.html.sweeps import SweepRow
from pytest_benchaudit.report.html.verdict import causes_section, verdict_section

__all__ = ["write_html", "render_html"]


def _summary(doc: CompareDocument) -> str:
    views = set_views(doc)
    if not views:
        return ""
    rows = []
    for side, label, an in views:
        meta = (doc.get("sets") or {}).get(side)
        scores = an.get("scores") or {}
        tasks = [t for t, v in scores.items() if isinstance(v, dict)]
        models = {m for t in tasks for m in scores[t]}
        pipelines = (meta.get("pipelines") if meta else None) or an.get("pipelines") or []
        runs = (meta.get("runs") if meta else None) or an.get("runs") or []
        rows.append([side, label, ", ".join(map(str, pipelines)) or "—", len(runs), len(models), len(tasks)])
    cmp = doc.get("comparison")
    text = (
        f"Set a ({cmp.get('a')}) against set b ({cmp.get('b')}), by {cmp.get('by')}."
        if cmp
        else "One run set: agreement between its tasks."
    )
    created = f" Written {doc['created']}." if doc.get("created") else ""
    return (
        '<section id="summary"><h2>Summary</h2>'
        + note(text + created)
        + table(["set", "label", "pipelines", "runs", "models", "tasks"], rows)
        + "</section>"
    )


# The report's own sections, in order; the registered analyses' sections go after the PCA (_ANALYSES_AFTER).
_NAV = [
    ("verdict", "Verdict"),
    ("summary", "Summary"),
    ("harnesses", "Harnesses"),
    ("causes", "Causes"),
    ("scores", "Scores"),
    ("ranks", "Ranks"),
    ("shift", "Rank shifts"),
    ("bump", "Ranks across tasks"),
    ("tau", "τ-b"),
    ("pca", "PCA"),
    ("findings", "Findings"),
    ("sweeps", "Field deltas"),
    ("invalid", "Invalid rates"),
    ("repeats", "Repeats"),
    ("paired", "Paired differences"),
    ("ledger", "Ledger"),
    ("notes", "Notes"),
]
_ANALYSES_AFTER = "pca"


def _analysis_sections(doc: CompareDocument) -> tuple[list[str], list[tuple[str, str]]]:
    """(the sections, their nav entries) of the registered analyses whose part ``doc`` has, in order."""
    kit = ReportKit()
    sections, nav = [], []
    # Each registered analysis's part sits under its name: keys the document type declares only for the built-ins.
    parts: Mapping[str, object] = doc
    for analysis in analyses():
        view = analysis.html
        part = parts.get(analysis.name)
        if view is None or part is None:
            continue
        body = view.body(part, doc, kit)
        if body:
            sections.append(f'<section id="{esc(view.anchor)}"><h2>{esc(view.title)}</h2>{body}</section>')
            nav.append((view.anchor, view.nav or view.title))
    return sections, nav


def _nav(extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    at = [a for a, _t in _NAV].index(_ANALYSES_AFTER) + 1
    return _NAV[:at] + extra + _NAV[at:]


def render_html(
    compare_doc: CompareDocument,
    *,
    sweeps: Sequence[SweepRow] | None = None,
    runs: Sequence[Mapping[str, Any]] | None = None,
    findings: Sequence[FindingRow] | None = None,
    ledger: Sequence[Mapping[str, Any]] | None = None,
    upstream: Sequence[Mapping[str, Any]] | None = None,
    title: str = "benchaudit compare report",
    harnesses: Sequence[Mapping[str, Any]] | None = None,
    first: str = "",
    extra_sections: Sequence[tuple[str, str, str]] = (),
) -> str:
    """The report as an HTML string (see :func:`write_html`)."""
    doc = compare_doc or {}
    sweep_rows = [r for r in (sweeps or []) if isinstance(r, dict)]
    # A run's summary rows, or the audit's score rows (one per layer, the layer as pipeline and
    # variant): both carry every TaskResult key the invalid-rate and repeats sections read.
    run_rows = [cast(TaskResult, r) for r in (runs or []) if isinstance(r, Mapping)]
    verdict = verdict_section(doc, sweep_rows, findings, lead=first)
    registered, registered_nav = _analysis_sections(doc)
    sections = [
        _summary(doc),
        harnesses_section(harnesses),
        causes_section(doc, sweep_rows, findings),
        scores_section(doc),
        ranks_section(doc),
        shift_section(doc),
        tau_section(doc),
        pca_section(doc),
        *registered,
        findings_section(findings),
        sweeps_section(sweep_rows),
        invalid_section(run_rows),
        repeats_section(run_rows),
        paired_section(doc),
        *(html for _a, _t, html in extra_sections),
        ledger_section(ledger, upstream),
        notes_section(doc),
    ]
    body = "\n".join(s for s in sections if s)
    nav = _nav(registered_nav)
    at = [a for a, _t in nav].index("ledger")
    nav = nav[:at] + [(a, t) for a, t, _h in extra_sections] + nav[at:]
    links = " ".join(
        f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in nav if f'<section id="{esc(a)}">' in verdict + body
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n"
        + verdict
        + "\n"
        + note(
            "Offline, self-contained report: no script, no external resource. Every name and string is shown "
            "as text; numbers are rounded for reading, compare.json holds them in full."
        )
        + (f"<nav>{links}</nav>\n" if links else "")
        + body
        + "\n</body></html>\n"
    )


def write_html(
    compare_doc: CompareDocument,
    path: Path,
    *,
    sweeps: Sequence[SweepRow] | None = None,
    runs: Sequence[Mapping[str, Any]] | None = None,
    findings: Sequence[FindingRow] | None = None,
    ledger: Sequence[Mapping[str, Any]] | None = None,
    upstream: Sequence[Mapping[str, Any]] | None = None,
    title: str = "benchaudit compare report",
    harnesses: Sequence[Mapping[str, Any]] | None = None,
    first: str = "",
    extra_sections: Sequence[tuple[str, str, str]] = (),
) -> Path:
    """Write the compare document (plus optional sweep deltas, run summary rows and diagnose findings)
    as one self-contained HTML file at ``path``; returns the path.

    ``sweeps``: rows of :func:`pytest_benchaudit.aggregate.results.variant_deltas` (task, model,
    variant, ``delta_pp`` or ``delta``, ``moved_by``).  ``runs``: summary result rows (task, model,
    ``invalid_rate``).  ``findings``: diagnose findings (benchmark, task, model, failure_mode,
    field, evidence, effect_pp); ``None`` leaves the section out, ``[]`` says there is none.
    ``ledger``/``upstream``: ledger rows and upstream differences of ``benchaudit audit``; ``harnesses``:
    its cross-harness rows (:mod:`pytest_benchaudit.audit.cross_harness`).  ``first``: HTML shown first in the
    verdict block (``benchaudit audit``: the multiverse's verdict, :mod:`pytest_benchaudit.multiverse.mv_html`);
    ``extra_sections``: (anchor, nav title, ``<section id=anchor>`` HTML) placed before the ledger, escaped
    by whoever made them (the multiverse's section).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        render_html(
            compare_doc,
            sweeps=sweeps,
            runs=runs,
            findings=findings,
            ledger=ledger,
            upstream=upstream,
            title=title,
            harnesses=harnesses,
            first=first,
            extra_sections=extra_sections,
        ),
        encoding="utf-8",
    )
    return path
