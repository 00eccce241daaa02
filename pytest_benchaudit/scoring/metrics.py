"""Scoring stage: turn one extraction into a per-item ``Score``.

A metric compares a *valid* prediction with the question's gold label.  Invalid
extractions never reach a metric: ``score`` gives them 0 on binary metrics, and the
aggregation stage decides whether they stay in the denominator ("total") or are left
out ("valid") — that choice is a pipeline field, not a metric property.

The released metrics follow each benchmark's released scorer exactly, quirks included,
because the audit measures what those quirks do to the reported number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_benchaudit.scoring.tasks import TASK_METRIC_INFO, TASK_METRICS
from pytest_benchaudit.pipeline.types import Extraction, MetricInfo, Question, Score

__all__ = ["METRICS", "METRIC_INFO", "Metric", "MetricInfo", "metric_names", "score"]

# A metric sees only valid predictions (possibly "" — see ``letter_set_exact``) and the
# task's resources (data files named in the suite config, e.g. alias graphs).
Metric = Callable[[str, Question, Mapping[str, Any]], Score]


def _binary(correct: bool) -> Score:
    return Score(value=1.0 if correct else 0.0, correct=correct)


def exact_match(prediction: str, question: Question, resources: Mapping[str, Any]) -> Score:
    """Case-insensitive exact match of prediction and gold, surrounding whitespace ignored.

    CTI-Bench ``compute_mcq_accuracy`` compares ``pred.upper() == gt.upper()``; its data
    holds one lower-case gold ``b`` that a prediction ``B`` must match.
    """
    return _binary(prediction.strip().upper() == question.gold.strip().upper())


def letter_set_exact(prediction: str, question: Question, resources: Mapping[str, Any]) -> Score:
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


def judge_graded(prediction: str, question: Question, resources: Mapping[str, Any]) -> Score:
    """Open-ended answers graded CORRECT/INCORRECT by an LLM judge against the reference.

    Items with this metric are collected and skipped until a judge is configured
    (``MetricInfo.needs_judge``); they are never scored without one.
    """
    raise RuntimeError("judge_graded items need a judge model; they are skipped without one")


METRICS: dict[str, Metric] = {
    "judge_graded": judge_graded,
    "exact_match": exact_match,
    "letter_set_exact": letter_set_exact,
    **TASK_METRICS,
}

METRIC_INFO: dict[str, MetricInfo] = {
    "judge_graded": MetricInfo(
        lower_is_better=False, kind="binary", needs_judge=True,
        description="CORRECT/INCORRECT verdict of an LLM judge against the reference answer",
    ),
    "exact_match": MetricInfo(
        lower_is_better=False,
        kind="binary",
        description="prediction equals gold, case-insensitive, surrounding whitespace ignored",
    ),
    "letter_set_exact": MetricInfo(
        lower_is_better=False,
        kind="binary",
        description="sorted answer-letter set equals the gold string as stored, case-insensitive "
        "(SecEval; empty gold matched by empty prediction, 'AA' never matched)",
    ),
    **TASK_METRIC_INFO,
}


def metric_names() -> list[str]:
    """Names of the known metrics, sorted."""
    return sorted(METRICS)


def score(metric: str, extraction: Extraction, question: Question,
          resources: Mapping[str, Any] | None = None) -> Score:
    """Score ``extraction`` against ``question.gold`` with ``metric``.

    An invalid extraction scores the metric's ``invalid_value`` (0 for accuracies, the
    worst case for error metrics) and is never correct; whether it stays in the
    denominator is the pipeline's ``scoring.denominator``.  ``resources`` are the task's
    data files the metric needs (see ``MetricInfo.resources``).
    Raises KeyError for an unknown metric or a missing resource.
    """
    if metric not in METRICS:
        raise KeyError(f"unknown metric {metric!r}; known metrics: {', '.join(metric_names())}")
    info = METRIC_INFO[metric]
    resources = resources or {}
    missing = [name for name in info.resources if name not in resources]
    if missing:
        raise KeyError(f"metric {metric!r} needs the task resource(s) {', '.join(missing)}; "
                       "declare them under [tasks.<task>.resources] in the suite config")
    if not extraction.valid or extraction.prediction is None:
        return Score(value=info.invalid_value, correct=False, extras=dict(info.invalid_extras))
    return METRICS[metric](extraction.prediction, question, resources)
