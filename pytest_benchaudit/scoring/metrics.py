"""Scoring stage: turn one extraction into a per-item ``Score``.

A metric compares a *valid* prediction with the question's gold label.  Invalid
extractions never reach a metric: ``score`` gives them the credit the pipeline states
(``scoring.invalid_credit``, default 0: no credit, i.e. 0 on a share and the metric's named
worst case on an error metric), and the aggregation stage decides whether they stay in the
denominator ("total") or are left out ("valid") — both are pipeline fields, shown in the card.
A prediction the metric cannot read (a CVSS vector that does not parse) makes the item
invalid (``unparseable``, see :func:`score_item`), never a valid answer at a made-up value.

The released metrics follow each benchmark's released scorer exactly, quirks included,
because the audit measures what those quirks do to the reported number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired

from typing_extensions import TypedDict

from pytest_benchaudit.pipeline.types import Extraction, MetricInfo, Question, Score, UnscorablePrediction
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks import TASK_METRIC_INFO, TASK_METRICS
from pytest_benchaudit.scoring.tasks.inputs import Metric, Resources

__all__ = [
    "BUILTIN_METRICS",
    "CreditRow",
    "METRICS",
    "METRIC_INFO",
    "Metric",
    "MetricInfo",
    "Resources",
    "invalid_score",
    "invalid_credit_note",
    "invalid_credit_line",
    "metric_names",
    "score",
    "score_item",
]

# A metric (tasks.inputs.Metric) sees only valid predictions (possibly "" — see ``letter_set_exact``)
# and the task's resources (data files named in the suite config, e.g. alias graphs).


def _binary(correct: bool) -> Score:
    return Score(value=1.0 if correct else 0.0, correct=correct)


@declarations.metric(
    name="exact_match",
    lower_is_better=False,
    kind="binary",
    description="prediction equals gold, case-insensitive, surrounding whitespace ignored",
)
def exact_match(prediction: str, question: Question, resources: Resources) -> Score:
    """Case-insensitive exact match of prediction and gold, surrounding whitespace ignored.

    CTI-Bench ``compute_mcq_accuracy`` compares ``pred.upper() == gt.upper()``; its data
    holds one lower-case gold ``b`` that a prediction ``B`` must match.
    """
    return _binary(prediction.strip().upper() == question.gold.strip().upper())


@declarations.metric(
    name="letter_set_exact",
    answers="labels",
    lower_is_better=False,
    kind="binary",
    description="sorted answer-letter set equals the gold string as stored, case-insensitive "
    "(SecEval; empty gold matched by empty prediction, 'AA' never matched)",
)
def letter_set_exact(prediction: str, question: Question, resources: Resources) -> Score:
    """SecEval: ``prediction.lower() == gold.lower()``, gold compared *as stored*.

    The prediction is already a sorted, de-duplicated letter string (``all_capital_letters``
    or ``final_answer_letters``).  The gold is neither sorted nor de-duplicated, exactly as
    the released ``eval.py`` compares it, which has two deliberate consequences:

    * an empty gold (7 SecEval rows) is matched by an empty prediction — a response with
      no capital A–D anywhere scores 1 on those rows;
    * a gold ``"AA"`` (2 rows) can never be matched, since no prediction repeats a letter.

    A gold stored out of order (e.g. "CA") could not be matched either; SecEval has none.
    """
    return _binary(prediction.lower() == question.gold.lower())


@declarations.metric(
    name="judge_graded",
    lower_is_better=False,
    kind="binary",
    needs_judge=True,
    description="CORRECT/INCORRECT verdict of an LLM judge against the reference answer",
)
def judge_graded(prediction: str, question: Question, resources: Resources) -> Score:
    """Open-ended answers graded CORRECT/INCORRECT by an LLM judge against the reference.

    Items with this metric are collected and skipped until a judge is configured
    (``MetricInfo.needs_judge``); they are never scored without one.
    """
    raise RuntimeError("judge_graded items need a judge model; they are skipped without one")


_, _METRICS, _METRIC_INFO = declarations.declared(globals())
#: Every metric by name, and what aggregation needs of it: this module's and the task families' (each
#: registered by its decorator, :func:`.declarations.declared`), then the plugins' (plugins/plugin_manager.py).
METRICS: dict[str, Metric] = {**_METRICS, **TASK_METRICS}
METRIC_INFO: dict[str, MetricInfo] = {**_METRIC_INFO, **TASK_METRIC_INFO}
#: The package's own metrics, as the plugin hook ``benchaudit_metrics`` registers them
#: (plugins/builtin_plugin.py); METRICS and METRIC_INFO also hold the plugins' (plugins/plugin_manager.py).
BUILTIN_METRICS: dict[str, Metric] = dict(METRICS)


def metric_names() -> list[str]:
    """Names of the known metrics, sorted."""
    return sorted(METRICS)


def invalid_score(info: MetricInfo, credit: float = 0.0) -> float:
    """What an invalid item scores under ``scoring.invalid_credit = credit`` (a share of full
    credit, 0..1): ``credit`` of the way from the metric's no-credit value (``invalid_value``:
    0 on a share, the named worst case on an error metric) to its best value."""
    return info.invalid_value + credit * (info.best_value - info.invalid_value)


class CreditRow(TypedDict):
    """What :func:`invalid_credit_line` reads of a task result (a ``summary.json`` ``results`` row,
    :class:`~pytest_benchaudit.aggregate.summary_documents.TaskResult`, which has these keys and more)."""

    metric: str
    n: int
    n_valid: int
    score_total: float | None
    score_valid: float | None
    # Old summaries lack both.
    invalid_credit: NotRequired[float]
    invalid_score: NotRequired[float | None]


def invalid_credit_note(metric: str, credit: float = 0.0) -> str:
    """One phrase saying what an invalid answer scores: ``0 (no credit)``, ``10 (no credit: the worst
    case, the largest possible difference of two CVSS base scores)``, ``0.25 (credit 0.25)``."""
    info = METRIC_INFO.get(metric)
    if info is None:
        return f"credit {credit:g}"
    value = invalid_score(info, credit)
    if credit:
        return f"{value:g} (credit {credit:g})"
    if info.lower_is_better:
        return f"{value:g} (no credit: the worst case{', ' + info.worst_case if info.worst_case else ''})"
    return f"{value:g} (no credit)"


def invalid_credit_line(results: Sequence[CreditRow]) -> str:
    """The summary's sentence on what an invalid answer scored in each of ``results`` (task result
    rows) where it is counted: ``invalid answers score (score/all): 0 (no credit) on cvss_closeness_athena,
    exact_match; 10 (no credit: the worst case, …) on cvss_abs_diff_cti``.  Empty without results."""
    by_note: dict[str, list[str]] = {}
    for r in results:
        metric, credit = str(r.get("metric", "")), float(r.get("invalid_credit") or 0.0)
        note = invalid_credit_note(metric, credit)
        value = r.get("invalid_score", _read_back(r))
        info = METRIC_INFO.get(metric)
        if value is not None and info is not None and abs(float(value) - invalid_score(info, credit)) > 1e-9:
            note = f"{float(value):.4g} (as stored: a run scored before scoring.invalid_credit)"
        by_note.setdefault(note, [])
        if metric not in by_note[note]:
            by_note[note].append(metric)
    if not by_note:
        return ""
    parts = [f"{note} on {', '.join(metrics)}" for note, metrics in by_note.items()]
    return "invalid answers, where counted (score/all; scoring.invalid_credit): " + "; ".join(parts)


def _read_back(r: CreditRow) -> float | None:
    """What the invalid items of an old summary row (no ``invalid_score``) scored, from its two means."""
    n, n_valid, total, valid = r.get("n") or 0, r.get("n_valid") or 0, r.get("score_total"), r.get("score_valid")
    if n <= n_valid or total is None:
        return None
    return float((total * n - (valid or 0.0) * n_valid) / (n - n_valid))


def _check(metric: str, resources: Resources | None) -> tuple[MetricInfo, Resources]:
    if metric not in METRICS:
        raise KeyError(f"unknown metric {metric!r}; known metrics: {', '.join(metric_names())}")
    info = METRIC_INFO[metric]
    resources = resources or {}
    missing = [name for name in info.resources if name not in resources]
    if missing:
        raise KeyError(
            f"metric {metric!r} needs the task resource(s) {', '.join(missing)}; "
            "declare them under [tasks.<task>.resources] in the suite config"
        )
    return info, resources


def _invalid(info: MetricInfo, credit: float) -> Score:
    extras = {name: value + credit * (1.0 - value) for name, value in info.invalid_extras}  # extras are shares
    return Score(value=invalid_score(info, credit), correct=False, extras=extras)


def score_item(
    metric: str,
    extraction: Extraction,
    question: Question,
    resources: Resources | None = None,
    invalid_credit: float = 0.0,
) -> tuple[Extraction, Score]:
    """Score ``extraction`` against ``question.gold`` with ``metric``; return the extraction as it
    stands after scoring, and the score.

    An invalid extraction scores :func:`invalid_score` (``invalid_credit`` of full credit; 0 by
    default) and is never correct.  A valid prediction the metric cannot read (it raises
    :class:`UnscorablePrediction`, e.g. a ``CVSS:3.1/`` vector that another prefix would break)
    turns the extraction invalid (``unparseable``, the metric's reason appended to the detail) and
    scores the same.  ``resources`` are the task's data files the metric needs (see
    ``MetricInfo.resources``).  Raises KeyError for an unknown metric or a missing resource.
    """
    info, resources = _check(metric, resources)
    if not extraction.valid or extraction.prediction is None:
        return extraction, _invalid(info, invalid_credit)
    try:
        return extraction, METRICS[metric](extraction.prediction, question, resources)
    except UnscorablePrediction as why:
        detail = f"{extraction.detail}; the metric cannot read it: {why}" if extraction.detail else str(why)
        unread = Extraction(invalid_reason="unparseable", answer_text=extraction.answer_text, detail=detail)
        return unread, _invalid(info, invalid_credit)


def score(
    metric: str,
    extraction: Extraction,
    question: Question,
    resources: Resources | None = None,
    invalid_credit: float = 0.0,
) -> Score:
    """The score part of :func:`score_item` (a prediction the metric cannot read scores as invalid)."""
    return score_item(metric, extraction, question, resources, invalid_credit)[1]
