"""CVSS v3 vectors: severity prediction tasks (CTI-VSP, AthenaBench VSP).

Base scores come from the ``cvss`` library (``CVSS3(vector).scores()[0]``), as both
released scorers do.  A vector the library cannot parse is no answer: the rules check it, so
that such rows are invalid (the released scorers skip them: denominator ``valid``).

Released rules:

* ``cvss_last_vector``  — CTI-Bench ``format_vsp``: last match of the letters-only
  ``AV:…/AC:…/PR:…/UI:…/S:…/C:…/I:…/A:…`` pattern, no prefix kept.
* ``athena_cvss31``     — AthenaBench ``extract_vsp_answer``: bottom-up line scan for
  ``(CVSS:3\\.1/[^\\s]+)``; a bare ``AV:…`` vector is not read.

Standardized rule:

* ``cvss_final_vector`` — the last line holding a full base vector, with or without a
  ``CVSS:3.0/`` / ``CVSS:3.1/`` prefix, normalised to ``CVSS:3.1/…``.

Metrics:

* ``cvss_abs_diff_cti``  — CTI-Bench ``compute_vsp_mad``: |base(``CVSS:3.0/`` + pred) −
  base(gold)|; the mean is the MAD, lower is better.  A prediction that already carries a
  ``CVSS:3.x/`` prefix (a non-released rule such as ``cvss_final_vector``) is not prefixed again,
  as the released code comment asks ("should be empty string if the model responds with the
  prefix"); the released rule never yields one, so released scores are unchanged.
* ``cvss_abs_diff``      — standardized: |base₃.₁(pred) − base₃.₁(gold)|.
* ``cvss_closeness_athena`` — AthenaBench: 1 − |d| / 7.7 per item; its mean over the valid
  rows is AthenaBench's VSP "accuracy" 1 − MAD/7.7.

A prediction whose vector does not parse is never scored as a valid answer: each metric raises
``UnscorablePrediction`` and the item is invalid (``unparseable``), as the released scorers skip
such rows.  Where invalid items are counted (denominator ``total``), they score the pipeline's
``scoring.invalid_credit``: by default no credit, i.e. 10.0 on the MADs (the worst case, the largest
possible difference of two base scores) and 0 on AthenaBench's closeness, a share (not 1 − 10/7.7 =
−0.30, which put Qwen3-4B's VSP "over all items" at 29.6% instead of 43.0%).
"""

from __future__ import annotations

import re
from functools import lru_cache

from pytest_benchaudit.pipeline.types import Generation, Question, Score, UnscorablePrediction
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.attack import athena_lines
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["RULES", "METRICS", "METRIC_INFO", "base_score"]

# config.yaml: vsp_mad_denominator
ATHENA_VSP_DENOMINATOR = 7.7
# The largest possible |difference| of two base scores: the worst case for an unreadable answer.
WORST_DIFF = 10.0

_CTI_VECTOR = re.compile(
    r"AV:[A-Za-z]+/AC:[A-Za-z]+/PR:[A-Za-z]+/UI:[A-Za-z]+/S:[A-Za-z]+/C:[A-Za-z]+/I:[A-Za-z]+/A:[A-Za-z]+"
)
_CTI_PREFIX = "CVSS:3.0/"  # compute_vsp_mad: "should be empty string if the model responds with the prefix"
_ANY_PREFIX = re.compile(r"^CVSS:\d+(?:\.\d+)?/", re.IGNORECASE)
_WORST_CASE = "the largest possible difference of two CVSS base scores"
_STD_VECTOR = re.compile(
    r"(?<![A-Za-z])(?:CVSS:3\.[01]/)?"
    r"(AV:[NALP]/AC:[LH]/PR:[NLH]/UI:[NR]/S:[UC]/C:[NLH]/I:[NLH]/A:[NLH])(?![A-Za-z:])",
    re.IGNORECASE,
)


@lru_cache(maxsize=4096)
def base_score(vector: str) -> float | None:
    """Base score of ``vector`` by the ``cvss`` library, or None when it does not parse."""
    from cvss import CVSS3  # the library is a dependency; imported on first use only

    try:
        return float(CVSS3(vector).scores()[0])
    except Exception:  # the library raises its own errors and ValueError/KeyError alike
        return None


# --------------------------------------------------------------------------- released rules


@declarations.rule(name="cvss_last_vector")
def cvss_last_vector(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CTI-Bench ``format_vsp``: last letters-only ``AV:…/A:…`` match, without any prefix.

    The scorer upper-cases it and prepends ``CVSS:3.0/``; a vector the ``cvss`` library then
    rejects (e.g. ``AV:X``, a missing metric value) is skipped by the released scorer, so it
    is no answer here either.  No match at all: the raw text is kept by the notebook and
    always fails to parse, so it is skipped too.
    """
    matches = _CTI_VECTOR.findall(text)
    if not matches:
        return None, "no AV:…/A:… vector (format_vsp keeps the raw text; the scorer skips it)"
    vector = matches[-1]
    if base_score(_CTI_PREFIX + vector.upper()) is None:
        return None, f"vector {vector!r} does not parse with the 'CVSS:3.0/' prefix (skipped by the scorer)"
    return vector, f"last of {len(matches)} vector(s)"


@declarations.rule(name="athena_cvss31")
def athena_cvss31(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """AthenaBench VSP: bottom-up first ``CVSS:3.1/…`` token (any case), as it stands.

    A vector without the prefix is not read at all; a token the ``cvss`` library cannot
    parse (trailing ``**`` or a backtick, lower case) is the released ``success = False``.
    """
    value, detail = athena_lines(text, r"(CVSS:3\.1/[^\s]+)", str.strip)
    if not value:
        return None, "no 'CVSS:3.1/' vector (a bare AV:… vector is not read)"
    if base_score(value) is None:
        return None, f"{value[:60]!r} does not parse (released success = False)"
    return value, detail


# --------------------------------------------------------------------------- standardized rule


@declarations.rule(name="cvss_final_vector")
def cvss_final_vector(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Standardized: the last vector on the last line that has one, prefix optional.

    Only well-formed base vectors (valid letters, the 8 metrics in order) are read; the
    result is ``CVSS:3.1/`` + the vector upper-cased.
    """
    for line in reversed(text.splitlines()):
        found = list(_STD_VECTOR.finditer(line))
        if found:
            vector = "CVSS:3.1/" + found[-1].group(1).upper()
            if base_score(vector) is None:  # cannot happen with the strict pattern; kept as a guard
                return None, f"{vector!r} does not parse"
            return vector, f"vector line: {line.strip()[:60]!r}"
    return None, "no CVSS base vector"


# --------------------------------------------------------------------------- metrics


def _diff(pred_vector: str, gold_vector: str, question: Question) -> float:
    """|base(pred) − base(gold)|; raises UnscorablePrediction when either does not parse."""
    pred, gold = base_score(pred_vector), base_score(gold_vector)
    if pred is None:
        raise UnscorablePrediction(f"vector {pred_vector[:80]!r} does not parse")
    if gold is None:  # a data problem; still no valid answer to score
        raise UnscorablePrediction(f"{question.id}: gold vector {gold_vector[:80]!r} does not parse")
    return abs(pred - gold)


def _abs_score(diff: float) -> Score:
    return Score(value=diff, correct=diff == 0)


@declarations.metric(
    name="cvss_abs_diff_cti",
    lower_is_better=True,
    kind="continuous",
    invalid_value=WORST_DIFF,
    worst_case=_WORST_CASE,
    description="CTI-Bench: |base score of 'CVSS:3.0/'+prediction (unless it has its own prefix) - base score "
    "of the (v3.1) gold|; mean = MAD. A vector that does not parse is invalid; under 'total' an "
    "invalid answer with no credit scores 10.0, the worst case",
)
def cvss_abs_diff_cti(prediction: str, question: Question, resources: Resources) -> Score:
    """CTI-Bench: |base(``CVSS:3.0/`` + pred.upper()) − base(gold.upper())|; correct when 0.

    The gold vectors are ``CVSS:3.1/…``; the (prefix-less) predictions of the released rule are
    scored as v3.0 vectors.  A prediction with its own ``CVSS:x/`` prefix keeps it (the released
    code would prepend a second one and skip the row).  Raises UnscorablePrediction for a vector
    that does not parse.
    """
    pred = prediction.strip().upper()
    vector = pred if _ANY_PREFIX.match(pred) else _CTI_PREFIX + pred
    return _abs_score(_diff(vector, question.gold.strip().upper(), question))


@declarations.metric(
    name="cvss_abs_diff",
    lower_is_better=True,
    kind="continuous",
    invalid_value=WORST_DIFF,
    worst_case=_WORST_CASE,
    description="|CVSS v3.1 base score of prediction - that of gold|; mean = MAD; an invalid answer with no "
    "credit scores 10.0 (the largest possible difference: a MAD has no neutral value)",
)
def cvss_abs_diff(prediction: str, question: Question, resources: Resources) -> Score:
    """Standardized: |base(pred) − base(gold)|, both read as v3.1 whatever prefix they carry.

    Raises UnscorablePrediction when the prediction (or the gold) holds no well-formed base vector.
    """
    pred = _STD_VECTOR.search(prediction)
    gold = _STD_VECTOR.search(question.gold)
    if pred is None:
        raise UnscorablePrediction(f"no CVSS base vector in {prediction[:80]!r}")
    if gold is None:
        raise UnscorablePrediction(f"{question.id}: no CVSS base vector in the gold {question.gold[:80]!r}")
    return _abs_score(_diff("CVSS:3.1/" + pred.group(1).upper(), "CVSS:3.1/" + gold.group(1).upper(), question))


@declarations.metric(
    name="cvss_closeness_athena",
    lower_is_better=False,
    kind="continuous",
    invalid_value=0.0,
    value_range=(1 - WORST_DIFF / ATHENA_VSP_DENOMINATOR, 1.0),
    description="AthenaBench: 1 - |base(pred) - base(gold)| / 7.7; mean = 1 - MAD/7.7 (a share). A vector "
    "that does not parse is invalid (released: success = False, left out); under 'total' an "
    "invalid answer with no credit scores 0",
)
def cvss_closeness_athena(prediction: str, question: Question, resources: Resources) -> Score:
    """AthenaBench: 1 − |base(pred) − base(gold)| / 7.7 (vectors as they stand); correct when |d| = 0.

    Raises UnscorablePrediction for a vector that does not parse (released ``success = False``).
    """
    diff = _diff(prediction.strip(), question.gold.strip(), question)
    return Score(value=1 - diff / ATHENA_VSP_DENOMINATOR, correct=diff == 0)


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
