"""The report's paired-differences section: which models of a task are told apart on the same questions.

From the compare document's ``paired`` rows, ``rank_ties`` and ``mde80`` (per set, as
:mod:`pytest_benchaudit.compare.paired_rows` writes them; docs/statistics.md defines each field).
Per set and task:

* a line with how many of the task's pairs are significant (Holm-adjusted p < 0.05) and how many are
  not, the test used (exact McNemar on 0/1 per-question scores, else paired t; the clustered t when the
  task groups its questions), what the error bars treat as independent, and the task's mde80;
* the significant pairs, in compare.json's order (the better model of each pair by headline first),
  at most :data:`MAX_PAIRS_SHOWN` per task, with a line saying how many more compare.json holds;
* the neighbours of the task's ranking whose order is not significant (the pairs marked ``≈`` in
  the rank table, :func:`.sets.ranks_section`).

A share metric's differences (higher is better, scores in [0, 1]) are in percentage points with one
decimal, any other metric's (e.g. a MAD) in its own unit with three; p-values as :func:`.format.fmt_p`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pytest_benchaudit.compare.compare_documents import CompareDocument, PairedRow, RankTie, SetAnalysis
from pytest_benchaudit.compare.render import paired_unit
from pytest_benchaudit.report.html.format import esc, fmt_p, is_num, note, table
from pytest_benchaudit.report.html.sets import caption, section, set_views, share_task

__all__ = [
    "MAX_PAIRS_SHOWN",
    "PAIR_HEADERS",
    "TIE_HEADERS",
    "READING_GUIDE",
    "fmt_diff",
    "fmt_diff_ci",
    "paired_section",
    "tests_used",
]

#: Significant pairs listed per task; the rest are counted (the terminal lists 15 too, per set:
#: compare/render.py; compare.json keeps every pair).
MAX_PAIRS_SHOWN = 15

PAIR_HEADERS = ["model a", "model b", "questions", "diff a − b", "95% CI", "p", "p Holm", "favours"]
TIE_HEADERS = ["ranked above", "ranked below (≈)", "questions", "diff", "95% CI", "p Holm"]

READING_GUIDE = "A CI that contains 0: the same questions asked again could order these two models the other way."

_TESTS = {
    "mcnemar_exact": "exact McNemar",
    "paired_t": "paired t",
    "clustered_t": "clustered t",
    "None": "no test (under two common questions or groups)",
}


def fmt_diff(value: Any, share: bool) -> str:
    """A paired difference: signed percentage points (one decimal) on a share, else three decimals."""
    if not is_num(value):
        return "—"
    return f"{100 * float(value):+.1f}" if share else f"{float(value):+.3f}"


def fmt_diff_ci(ci: Any, share: bool) -> str:
    """A paired difference's 95% CI, in the unit of :func:`fmt_diff`."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not all(is_num(v) for v in ci):
        return "—"
    lo, hi = (100 * float(v) if share else float(v) for v in ci)
    return f"[{lo:.1f}, {hi:.1f}]" if share else f"[{lo:.3f}, {hi:.3f}]"


def _mde(value: Any, share: bool) -> str:
    if not is_num(value):
        return "not measured (no pair with two common questions)"
    return f"{100 * float(value):.1f} pp" if share else f"{float(value):.3f}"


def tests_used(rows: Sequence[PairedRow]) -> str:
    """The tests a task's pairs used, in words: ``exact McNemar``, or ``exact McNemar (40 pairs), paired t (26)``."""
    counts = Counter(str(r.get("test")) for r in rows)
    if len(counts) == 1:
        return _TESTS.get(next(iter(counts)), next(iter(counts)))
    return ", ".join(f"{_TESTS.get(t, t)} ({n} pairs)" for t, n in sorted(counts.items()))


def _task_block(an: SetAnalysis, task: str, rows: list[PairedRow], ties: list[RankTie]) -> str:
    share = share_task(an, task)
    unit = " (pp)" if share else ""
    lower = any(r.get("lower_is_better") for r in rows)
    significant = [r for r in rows if r.get("significant")]
    shown = significant[:MAX_PAIRS_SHOWN]
    mde = (an.get("mde80") or {}).get(task)
    mde_text = _mde(mde.get("mde80") if mde else None, share) + (
        f" at {mde['n']} common questions" if mde and is_num(mde.get("n")) else ""
    )
    line = (
        f"{len(significant)} of {len(rows)} pairs significant, {len(rows) - len(significant)} not. "
        f"Test: {tests_used(rows)}; Holm's correction over the task's {len(rows)} pairs. Error bars: "
        f"{paired_unit(rows)}. mde80: {mde_text}."
    )
    parts = [f"<h4>{esc(task)}{' ↓' if lower else ''}</h4>", note(line)]
    if shown:
        parts.append(
            table(
                [h + unit if h in ("diff a − b", "95% CI") else h for h in PAIR_HEADERS],
                [
                    [
                        r.get("model_a"),
                        r.get("model_b"),
                        r.get("n", "—"),
                        fmt_diff(r.get("diff"), share),
                        fmt_diff_ci(r.get("ci95"), share),
                        fmt_p(r.get("p_value")),
                        fmt_p(r.get("p_holm")),
                        r.get("favours") or "neither",
                    ]
                    for r in shown
                ],
            )
        )
    if len(significant) > len(shown):
        parts.append(
            note(
                f"{len(significant) - len(shown)} more significant pairs of this task are in compare.json "
                "'paired' (the first "
                f"{MAX_PAIRS_SHOWN} are listed)."
            )
        )
    if ties:
        parts.append(
            note("Neighbours in the ranking whose order is not significant (≈ under Ranks per task):")
            + table(
                [h + unit if h in ("diff", "95% CI") else h for h in TIE_HEADERS],
                [
                    [
                        t.get("better"),
                        t.get("worse"),
                        t.get("n", "—"),
                        fmt_diff(t.get("diff"), share),
                        fmt_diff_ci(t.get("ci95"), share),
                        fmt_p(t.get("p_holm")) if is_num(t.get("p_holm")) else "untestable",
                    ]
                    for t in ties
                ],
            )
        )
    return "".join(parts)


def paired_section(doc: CompareDocument) -> str:
    """The section (``id="paired"``), or "" when no set has a paired row."""
    parts = []
    for side, label, an in set_views(doc):
        rows = [r for r in an.get("paired") or [] if isinstance(r, dict)]
        if not rows:
            continue
        by_task: dict[str, list[PairedRow]] = {}
        for r in rows:
            by_task.setdefault(str(r.get("task")), []).append(r)
        ties: dict[str, list[RankTie]] = {}
        for t in an.get("rank_ties") or []:
            if isinstance(t, dict):
                ties.setdefault(str(t.get("task")), []).append(t)
        parts.append(caption(side, label, an))
        parts += [_task_block(an, task, task_rows, ties.get(task, [])) for task, task_rows in by_task.items()]
    if not parts:
        return ""
    return section(
        "paired",
        "Paired differences between models",
        note(
            "Every pair of models of a task, compared question by question on the questions both answered: diff = "
            "model a's mean per-question score minus model b's (model a = the better by headline; per question the "
            "reducer over its repeats), with its 95% CI: diff ± 1.96 SE of the per-question differences when the "
            "questions are treated as independent, where p is exact McNemar when every per-question score is 0 or 1, "
            "else the paired t test; when the task groups its questions (aggregation.by), diff ± t(G−1) × the "
            "clustered SE over the G groups, and p the clustered t test (each task's line says which). p Holm: "
            "Holm's step-down correction over all the pairs of the task, so that the chance of any pair reading significant by chance "
            "stays under 5%; a pair is significant when p Holm < 0.05. mde80: the smallest true difference a pair of "
            "the task detects with 80% power at that level. Differences on share metrics in percentage points, "
            "others in the metric's unit (↓ = lower is better: a negative diff favours model a). docs/statistics.md "
            "defines each."
        )
        + note(READING_GUIDE),
        *parts,
    )
