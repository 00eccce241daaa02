"""MITRE ATT&CK ids: technique extraction (CTI-ATE, AthenaBench ATE), mitigations (AthenaBench RMS).

Also home of ``athena_lines``, the bottom-up line scanner every AthenaBench extractor is
built on (its ``_extract_from_lines``), and of the AthenaBench MCQ rule that uses it: the
other AthenaBench rules (``cwe``, ``cvss``, ``actors``) import it from here.

Released rules (reproduce the benchmarks' code, quirks included):

* ``athena_mcq_letter``   — AthenaBench MCQ3k/CKT: ``\\b([A-E])\\b`` with IGNORECASE.
* ``athena_technique``    — AthenaBench ATE: one ``T####(.###)`` id, reduced to its parent.
* ``athena_mitigations``  — AthenaBench RMS: every ``M####`` on the last non-empty line.

Standardized rules:

* ``technique_ids_final_line`` — CTI-ATE: parent technique ids on the final line, else every
  id in the answer.
* ``technique_final_answer``   — single-technique tasks: the one parent id on the final line
  that has ids (several distinct ids on that line = no single answer).
* ``mitigation_ids_final_line`` — RMS: the ``M####`` ids on the final line that has any.

Metrics: ``technique_parent_exact`` (AthenaBench ATE), ``technique_set_f1`` (CTI-ATE,
standardized), ``mitigation_set_f1`` (AthenaBench RMS).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_benchaudit.pipeline.types import Generation, Question, Score
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["RULES", "METRICS", "METRIC_INFO", "athena_lines", "clean_freeform", "parent_technique"]

# --------------------------------------------------------------------------- AthenaBench scanner

# answer_extractors.py strips one leading label of these kinds (any case), with an optional
# ":" or dash, from every line before matching.
_ATHENA_PREFIX = re.compile(r"^\s*(?:final\s+answer|answer|prediction|output|result)\s*[:\-–—]?\s*", re.IGNORECASE)
_ATHENA_ANSWER_WORD = re.compile(r"\banswer\b", re.IGNORECASE)


def _athena_strip(line: str) -> str:
    return _ATHENA_PREFIX.sub("", line, count=1).strip()


def athena_lines(
    text: str, pattern: str | re.Pattern[str], transform: Callable[[str], str] = lambda s: s
) -> tuple[str, str]:
    """AthenaBench ``_extract_from_lines``: ``(match, detail)``; ``match`` is "" when none.

    Non-empty lines (stripped) are scanned from the last one up.  On each, the label prefix
    is removed and ``pattern`` searched with IGNORECASE; the first line with a hit decides
    (group 1, then ``transform``).  A line that has no hit but whose raw text contains the
    word "answer" also tries its next line, then its previous one (``Answer:`` on a line of
    its own followed by the value).  The pattern is always case-insensitive, as released.
    """
    regex = re.compile(pattern.pattern if isinstance(pattern, re.Pattern) else pattern, re.IGNORECASE)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        raw = lines[i]
        found = regex.search(_athena_strip(raw))
        if found:
            return transform(found.group(1)), f"line {i + 1}: {raw[:60]!r}"
        if _ATHENA_ANSWER_WORD.search(raw):
            for j in (i + 1, i - 1):
                if 0 <= j < len(lines):
                    found = regex.search(_athena_strip(lines[j]))
                    if found:
                        return transform(
                            found.group(1)
                        ), f"line {j + 1} (next to 'answer' line {i + 1}): {lines[j][:60]!r}"
    return "", "no line matched"


def clean_freeform(value: str) -> str:
    """AthenaBench ``_clean_freeform``: trim, strip surrounding quotes, collapse whitespace."""
    return re.sub(r"\s+", " ", value.strip().strip("\"'"))


def _athena_rule(pattern: str, transform: Callable[[str], str], what: str) -> Callable[..., tuple[str | None, str]]:
    def rule(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
        value, detail = athena_lines(text, pattern, transform)
        # An empty string is what the released extractor returns for "nothing found"; the
        # released scorers then score it 0 (wrong), which is the same as invalid under 'total'.
        return (value or None), (detail if value else f"no {what} found")

    return rule


# --------------------------------------------------------------------------- ids

_TECHNIQUE = re.compile(r"\bT(\d{4})(?:\.(\d{3}))?\b", re.IGNORECASE)
_MITIGATION = re.compile(r"\bM(\d{4})\b", re.IGNORECASE)


def parent_technique(tid: str) -> str:
    """``T1218.001`` -> ``T1218`` (upper-cased, surrounding whitespace removed)."""
    return tid.strip().split(".")[0].upper()


def _technique_parents(text: str) -> list[str]:
    """Parent technique ids in order of first appearance, de-duplicated."""
    return list(dict.fromkeys(f"T{m.group(1)}" for m in _TECHNIQUE.finditer(text)))


def _mitigations(text: str) -> list[str]:
    return list(dict.fromkeys(f"M{m.group(1)}" for m in _MITIGATION.finditer(text)))


def _last_line_with(text: str, finder: Callable[[str], list[str]]) -> tuple[list[str], str]:
    for line in reversed(text.splitlines()):
        ids = finder(line)
        if ids:
            return ids, line.strip()[:60]
    return [], ""


# --------------------------------------------------------------------------- released rules

athena_mcq_letter = declarations.rule(name="athena_mcq_letter")(
    _athena_rule(r"\b([A-E])\b", str.upper, "option letter A-E")
)
athena_mcq_letter.__doc__ = (
    "AthenaBench MCQ3k/CKT: bottom-up ``\\b([A-E])\\b`` with IGNORECASE, upper-cased "
    "(a trailing line with the article 'a' reads as A, even below 'Answer: C')."
)

athena_technique = declarations.rule(name="athena_technique")(
    _athena_rule(r"(T\d{4}(?:\.\d{3})?)", lambda s: parent_technique(s), "technique id")
)
athena_technique.__doc__ = "AthenaBench ATE: the bottom-up first ``T####(.###)`` id, reduced to its parent."


@declarations.rule(name="athena_mitigations")
def athena_mitigations(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """AthenaBench RMS: the last non-empty line (label prefix stripped), every ``M####`` on it.

    Ids elsewhere in the response never count; a last line without one gives nothing
    (the released scorer then gives F1 0).
    """
    line, detail = athena_lines(text, r"(.+)", clean_freeform)
    ids = re.findall(r"M\d{4}", line.upper())
    if not ids:
        return None, f"no M#### id on the last line ({detail})"
    return ", ".join(ids), detail


# --------------------------------------------------------------------------- standardized rules


@declarations.rule(name="technique_ids_final_line")
def technique_ids_final_line(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CTI-ATE standardized: parent technique ids on the final non-empty line (the prompt asks
    for them there); when that line has none, every id in the answer."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    ids = _technique_parents(lines[-1]) if lines else []
    if ids:
        return ", ".join(sorted(ids)), f"final line: {lines[-1].strip()[:60]!r}"
    ids = _technique_parents(text)
    if ids:
        return ", ".join(sorted(ids)), "no id on the final line: every id in the answer"
    return None, "no technique id"


@declarations.rule(name="technique_final_answer")
def technique_final_answer(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Single-technique answer: the parent id on the last line that has technique ids.

    Several distinct parents on that line is a hedge, not an answer: no prediction.
    """
    ids, line = _last_line_with(text, _technique_parents)
    if not ids:
        return None, "no technique id"
    if len(ids) > 1:
        return None, f"several techniques on the final id line: {', '.join(ids)}"
    return ids[0], f"final id line: {line!r}"


@declarations.rule(name="mitigation_ids_final_line")
def mitigation_ids_final_line(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """RMS standardized: the ``M####`` ids on the last line that has any, sorted."""
    ids, line = _last_line_with(text, _mitigations)
    if ids:
        return ", ".join(sorted(ids)), f"final id line: {line!r}"
    return None, "no mitigation id"


# --------------------------------------------------------------------------- metrics


def _set_f1(pred: set[str], gold: set[str]) -> float:
    """Set F1; 0 when precision and recall are both 0 (AthenaBench ``score_record``)."""
    tp = len(pred & gold)
    precision = tp / len(pred) if pred else 0.0
    recall = tp / len(gold) if gold else 0.0
    if precision == 0 and recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _f1_score(pred: set[str], gold: set[str]) -> Score:
    f1 = _set_f1(pred, gold)
    return Score(value=f1, correct=pred == gold and bool(gold))


@declarations.metric(
    name="technique_parent_exact",
    lower_is_better=False,
    kind="binary",
    description="parent ATT&CK technique of prediction equals that of gold (sub-technique suffix ignored on both)",
)
def technique_parent_exact(prediction: str, question: Question, resources: Resources) -> Score:
    """AthenaBench ATE: parent technique of prediction == parent of gold (the gold's
    ``.xxx`` is stripped too); an empty prediction never matches."""
    pred, gold = parent_technique(prediction), parent_technique(question.gold)
    ok = bool(pred) and pred == gold
    return Score(value=1.0 if ok else 0.0, correct=ok)


@declarations.metric(
    name="technique_set_f1",
    lower_is_better=False,
    kind="continuous",
    description="F1 of the parent-technique id sets of prediction and gold; correct = identical sets",
)
def technique_set_f1(prediction: str, question: Question, resources: Resources) -> Score:
    """F1 of the parent-technique sets of prediction and gold; correct when the sets are equal."""
    return _f1_score(set(_technique_parents(prediction)), set(_technique_parents(question.gold)))


@declarations.metric(
    name="mitigation_set_f1",
    lower_is_better=False,
    kind="continuous",
    description="F1 of the M#### mitigation id sets of prediction and gold (0 when P = R = 0); correct = identical sets",
)
def mitigation_set_f1(prediction: str, question: Question, resources: Resources) -> Score:
    """AthenaBench RMS: F1 of the ``M####`` sets; correct when the sets are equal."""
    return _f1_score(set(re.findall(r"M\d{4}", prediction.upper())), set(re.findall(r"M\d{4}", question.gold.upper())))


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
