"""The report's repeats section: error bars of the runs whose questions were asked more than once.

One row per task x model (x pipeline / variant) of a run made with ``--repeats K`` (``inference.repeats``,
K > 1), from the run's ``summary.json`` rows (:class:`pytest_benchaudit.aggregate.summary_documents.TaskResult`):
the repeats, the reducer, the headline, ``se`` (CLT over questions), ``se_clustered`` (by
``aggregation.by``; none without), the 95% CI (the clustered one when the task groups its questions, as
the terminal shows it and the gates read it) and what kind it is, ``sampling_sd`` (the headline's SD
across repeats), ``retest_agreement`` (the share of questions whose K verdicts all agree) and the
questions.  docs/statistics.md defines each and says when to read it.

A share metric's numbers are in percent (the headline, the CI) and percentage points (the standard
errors and the SD), two decimals for the latter; an error metric's (a MAD) in its own unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_benchaudit.aggregate.intervals import METHOD_TEXT
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.report.html.format import esc, fmt_share, is_num, note, table
from pytest_benchaudit.report.terminal import shown_interval

__all__ = ["repeats_section", "repeats_rows", "HEADERS"]

HEADERS = [
    "benchmark",
    "task",
    "model",
    "pipeline",
    "repeats",
    "reducer",
    "questions",
    "headline",
    "se",
    "se clustered",
    "95% CI",
    "CI kind",
    "sampling sd",
    "retest agreement",
]


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
        ci, clustered = shown_interval(r)
        interval = f"{_level(ci[0], share)} – {_level(ci[1], share)}" if isinstance(ci, list) and len(ci) == 2 else "—"
        method = r.get("ci95_clustered_method" if clustered else "ci95_method")
        kind = "—" if not ci else METHOD_TEXT.get(str(method), "over questions") if method else "over questions"
        if clustered:
            kind = f"clustered by {r.get('clustered_by')}, {r.get('n_groups')} groups: " + (
                kind if ci else "none under 2 groups"
            )
        # An audit's rows name their layer as both (one cell per layer): say it once.
        variant = r.get("variant") if r.get("variant") != r.get("pipeline") else None
        pipeline = str(r.get("pipeline") or "") + (f" | {variant}" if variant else "")
        rows.append(
            [
                r.get("benchmark"),
                r.get("task"),
                r.get("model"),
                pipeline or "—",
                int(r["repeats"]),
                r.get("reducer", "mean"),
                r.get("n_questions") if r.get("n_questions") is not None else "—",
                _level(r.get("score"), share),
                _spread(r.get("se"), share),
                _spread(r.get("se_clustered"), share),
                interval,
                kind,
                _spread(r.get("sampling_sd"), share),
                fmt_share(r.get("retest_agreement")),
            ]
        )
    return rows


def repeats_section(runs: Sequence[TaskResult] | None) -> str:
    """The section (``id="repeats"``), or "" when no run asked a question more than once."""
    rows = repeats_rows(runs or [])
    if not rows:
        return ""
    return (
        f'<section id="repeats"><h2>{esc("Repeats and error bars")}</h2>'
        + note(
            "Runs whose questions were asked K > 1 times (--repeats K). headline: each question's K scores "
            "reduced by the reducer, then the mean over questions. se: the headline's standard error over "
            "questions (CLT); se clustered: the CR1 clustered standard error by aggregation.by when set (— "
            "without). 95% CI: clustered by aggregation.by when the task groups its questions (t with G−1 "
            "degrees of freedom; it contains the plain interval), else over the questions as independent; "
            "CI kind says which and how it was made (Wilson on 0/1 scores; Wilson on the design-effect n for "
            "shares; mean ± t·se otherwise). sampling sd: one standard deviation of the headline between "
            "repeats of the same questions (about 2 runs in 3 land within ±1 sd); retest agreement: the "
            "share of questions whose K verdicts all agree (sd 0 and 100% when the model answers "
            "deterministically). Share metrics in percent, se and sd in percentage points. "
            "docs/statistics.md defines each."
        )
        + table(HEADERS, rows)
        + "</section>"
    )
