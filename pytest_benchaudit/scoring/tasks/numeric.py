"""Numeric answers: a final number read from the answer, and an absolute-error metric.

Family module (see ``tasks/__init__.py``): imports only ``..types``.

SECURE CPST asks for the CVSS v3 base score of a given vector ("a single number between
0.0 and 10.0").  The rule ``final_cvss_score`` reads that number bottom-up: after an
explicit marker ("Answer: 7.8", "base score is 7.8", "Score = 7.8"), else from a line
that is only the number (``7.8``, ``**7.8**``, ``7.8/10``, ``7.8 (High)``).  Numbers
outside 0–10 are not scores and are not read; a bare number inside a sentence is not
read either, so "CVSS v3.1" or "AV:N" never supply an answer.

The metric ``cvss_abs_error`` is an error metric (kind ``continuous``, lower is better):
the headline is the mean absolute error on the 0–10 scale, as CTI-Bench scores CVSS
(CTI-VSP, MAD).  ``correct`` (and ``extras["within_tolerance"]``) holds when the error is
at most ``CVSS_TOLERANCE`` = 0.05, i.e. the answer equals the gold at the score's own
one-decimal precision: all 100 CPST golds equal the CVSS v3.0 *and* v3.1 base score of
their vector exactly (the vector has no ``CVSS:3.x/`` prefix, but the two versions'
rounding agrees on every row), so a 0.1 difference is a calculation error, not a version
ambiguity.  An invalid answer with no credit (``scoring.invalid_credit = 0``) scores
``invalid_value`` = 10.0, the largest error the scale allows; a prediction that is not a number
(another rule's) is invalid (``unparseable``), never a valid answer at that value.
"""

from __future__ import annotations

import math
import re

from pytest_benchaudit.pipeline.types import Generation, Question, Score, UnscorablePrediction
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["CVSS_TOLERANCE", "CVSS_WORST_ERROR", "METRICS", "METRIC_INFO", "RULES"]

CVSS_TOLERANCE = 0.05  # half of the 0.1 step CVSS scores are rounded to
CVSS_WORST_ERROR = 10.0  # the whole 0-10 scale: what an unreadable answer costs
_SCALE = (0.0, 10.0)

_NUMBER = r"(\d{1,2}(?:\.\d+)?)"
_MARKER = re.compile(
    r"(?i:\b(?:final\s+answer|answer|(?:cvss\s*(?:v?3(?:\.[01x])?\s*)?)?(?:base\s+)?score)\b"
    r"\s*(?:is|would\s+be|of|=|:|：)?\s*[:=]?\s*)"
    r"(?:\*\*|\(|\[|\\boxed\{|[\"'`])?\s*" + _NUMBER + r"(?![\d.]*\d)(?!\s*%)"
)
_ALONE = re.compile(
    r"^\s*(?:\*\*|\\boxed\{|[\"'`(\[])?\s*"
    + _NUMBER
    + r"\s*(?:/\s*10(?:\.0)?)?\s*(?:\*\*|\}|[\"'`)\]])?\s*(?:\((?:none|low|medium|high|critical)\))?\s*\.?\s*$",
    re.IGNORECASE,
)


def _in_scale(value: str) -> bool:
    number = float(value)
    return _SCALE[0] <= number <= _SCALE[1]


@declarations.rule(name="final_cvss_score")
def final_cvss_score(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CVSS base score: bottom-up, a marker ("Answer:", "base score is") then a number, else a
    line that is only the number; values outside 0–10 are not read."""
    for line in reversed([ln for ln in text.splitlines() if ln.strip()]):
        hits = [m for m in _MARKER.finditer(line) if _in_scale(m.group(1))]
        if hits:
            return hits[-1].group(1), f"answer marker: {line.strip()[:60]!r}"
        match = _ALONE.match(line)
        if match and _in_scale(match.group(1)):
            return match.group(1), f"number line: {line.strip()[:60]!r}"
    return None, "no score after an answer marker and no number-only line in 0-10"


def _number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


@declarations.metric(
    name="cvss_abs_error",
    lower_is_better=True,
    kind="continuous",
    invalid_value=CVSS_WORST_ERROR,
    worst_case="the whole 0-10 scale",
    description=f"absolute error of the CVSS base score (mean = MAE, 0-10, lower is better); correct and "
    f"extras.within_tolerance when |error| <= {CVSS_TOLERANCE} (equal at one decimal); invalid with no "
    f"credit = {CVSS_WORST_ERROR:g}",
)
def cvss_abs_error(prediction: str, question: Question, resources: Resources) -> Score:
    """|prediction - gold| on the 0-10 CVSS scale; correct when within ``CVSS_TOLERANCE``.

    A prediction that is not a finite number (a rule other than ``final_cvss_score`` may
    pass one through) raises UnscorablePrediction: the item is invalid.  Raises ValueError
    for a gold that is not a number: that is a data problem, not a model's.
    """
    gold = _number(question.gold)
    if gold is None:
        raise ValueError(f"{question.benchmark}.{question.task} {question.id}: gold {question.gold!r} is not a number")
    pred = _number(prediction)
    if pred is None:
        raise UnscorablePrediction(f"{prediction[:80]!r} is not a number")
    error = min(abs(pred - gold), CVSS_WORST_ERROR)
    within = error <= CVSS_TOLERANCE + 1e-9
    return Score(value=error, correct=within, extras={"within_tolerance": 1.0 if within else 0.0})


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
