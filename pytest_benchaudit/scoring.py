"""Scoring stage: turn one extraction into a per-item ``Score``.

A metric compares a *valid* prediction with the question's gold label.  Invalid
extractions never reach a metric: ``score`` gives them 0 on binary metrics, and the
aggregation stage decides whether they stay in the denominator ("total") or are left
out ("valid") — that choice is a pipeline field, not a metric property.

The released metrics follow each benchmark's released scorer exactly, quirks included,
because the audit measures what those quirks do to the reported number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .types import Extraction, Question, Score

__all__ = ["METRICS", "METRIC_INFO", "Metric", "MetricInfo", "metric_names", "score"]

# A metric sees only valid predictions (possibly "" — see ``letter_set_exact``).
Metric = Callable[[str, Question], Score]


@dataclass(frozen=True)
class MetricInfo:
    """What an aggregator and a report need to know about a metric."""

    lower_is_better: bool
    kind: Literal["binary", "continuous"]
    description: str


def _binary(correct: bool) -> Score:
    return Score(value=1.0 if correct else 0.0, correct=correct)


def exact_match(prediction: str, question: Question) -> Score:
    """Case-insensitive exact match of prediction and gold, surrounding whitespace ignored.

    CTI-Bench ``compute_mcq_accuracy`` compares ``pred.upper() == gt.upper()``; its data
    holds one lower-case gold ``b`` that a prediction ``B`` must match.
    """
    return _binary(prediction.strip().upper() == question.gold.strip().upper())


def letter_set_exact(prediction: str, question: Question) -> Score:
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


METRICS: dict[str, Metric] = {
    "exact_match": exact_match,
    "letter_set_exact": letter_set_exact,
}

METRIC_INFO: dict[str, MetricInfo] = {
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
}


def metric_names() -> list[str]:
    """Names of the known metrics, sorted."""
    return sorted(METRICS)


def score(metric: str, extraction: Extraction, question: Question) -> Score:
    """Score ``extraction`` against ``question.gold`` with ``metric``.

    An invalid extraction scores ``Score(value=0.0, correct=False)`` on a binary metric.
    A continuous metric has no neutral value for a missing answer (0 would be a perfect
    error for a MAD), so there the caller must decide: ValueError.
    Raises KeyError for an unknown metric.
    """
    if metric not in METRICS:
        raise KeyError(f"unknown metric {metric!r}; known metrics: {', '.join(metric_names())}")
    if not extraction.valid or extraction.prediction is None:
        if METRIC_INFO[metric].kind == "binary":
            return Score(value=0.0, correct=False)
        raise ValueError(
            f"metric {metric!r} is continuous: an invalid extraction has no score; "
            "exclude it or assign a worst case in aggregation"
        )
    return METRICS[metric](extraction.prediction, question)
