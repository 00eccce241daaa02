"""The report's repeats section: error bars of the runs whose questions were asked more than once.

One row per task x model (x pipeline / variant) of a run made with ``--repeats K`` (``inference.repeats``,
K > 1), from the run's ``summary.json`` rows (:class:`pytest_benchaudit.aggregate.summary_documents.TaskResult`):
the repeats, the reducer, the headline, ``se`` (CLT over questions), ``se_clustered`` (by
``aggregation.by``; none without), the 95% CI (the clustered one when there is one, as the gates read
it), ``sampling_sd`` (the headline's SD across repeats), ``retest_agreement`` (the share of questions
whose K verdicts all agree) and the questions.  docs/statistics.md defines each and says when to read it.

A share metric's numbers are in percent (the headline, the CI) and percentage points (the standard
errors and the SD), two decimals for the latter; an error metric's (a MAD) in its own unit.
"""

from __future__ import annotations

from typing import Any, Sequence

from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.report.html.format import esc, fmt_share, is_num, note, table

__all__ = ["repeats_section", "repeats_rows", "HEADERS"]

HEADERS = ["benchmark", "task", "model", "pipeline", "repeats", "reducer", "questions", "headline", "se",
           "se clustered", "95% CI", "CI kind", "sampling sd", "retest agreement"]


def _spread(value: Any, share: bool) -> str:
    """A standard error or SD: percentage points on a share (two decimals), else the metric's unit."""
    if not is_num(value):
        return "—"
    return f"{100 * float(value):.2f}" if share else f"{float(value):.3f}"


def _level(value: Any, share: bool) -> str:
    """A headline or a CI end: percent on a share (two decimals), else the metric's unit."""
    if not is_num(value):
        return "—"
    return f"{100 * float(value):.2f}%" if share else f"{float(value):.3f}"


def repeats_rows(runs: Sequence[TaskResult]) -> list[list[Any]]:
    """The table's rows (cells as text, in :data:`HEADERS` order) for the summary rows asked K > 1 times."""
    rows: list[list[Any]] = []
    for r in runs:
        if not isinstance(r, dict) or not is_num(r.get("repeats")) or int(r["repeats"]) <= 1:
            continue
        share = not r.get("lower_is_better", False)
        clustered = r.get("ci95_clustered")
        ci = clustered or r.get("ci95")
        interval = (f"{_level(ci[0], share)} – {_level(ci[1], share)}"
                    if isinstance(ci, list) and len(ci) == 2 else "—")
        # An audit's rows name their layer as both (one cell per layer): say it once.
        variant = r.get("variant") if r.get("variant") != r.get("pipeline") else None
        pipeline = str(r.get("pipeline") or "") + (f" | {variant}" if variant else "")
        rows.append([r.get("benchmark"), r.get("task"), r.get("model"), pipeline or "—", int(r["repeats"]),
                     r.get("reducer", "mean"), r.get("n_questions") if r.get("n_questions") is not None else "—",
                     _level(r.get("score"), share), _spread(r.get("se"), share),
                     _spread(r.get("se_clustered"), share), interval,
                     "clustered" if clustered else "over questions" if ci else "—",
                     _spread(r.get("sampling_sd"), share), fmt_share(r.get("retest_agreement"))])
    return rows


def repeats_section(runs: Sequence[TaskResult] | None) -> str:
    """The section (``id="repeats"``), or "" when no run asked a question more than once."""
    rows = repeats_rows(runs or [])
    if not rows:
        return ""
    return (f'<section id="repeats"><h2>{esc("Repeats and error bars")}</h2>'
            + note("Runs whose questions were asked K > 1 times (--repeats K). headline: each question's K scores "
                   "reduced by the reducer, then the mean over questions. se: the headline's standard error over "
                   "questions (CLT); se clustered: by aggregation.by when set (— without). 95% CI: the clustered "
                   "interval when there is one, else the interval over questions (Wilson on 0/1 scores). sampling "
                   "sd: how far the headline moves between repeats of the same questions; retest agreement: the "
                   "share of questions whose K verdicts all agree (sd 0 and 100% when the model answers "
                   "deterministically). Share metrics in percent, se and sd in percentage points. "
                   "docs/statistics.md defines each.")
            + table(HEADERS, rows) + "</section>")
