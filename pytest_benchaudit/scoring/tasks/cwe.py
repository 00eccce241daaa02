"""CWE ids: root-cause mapping tasks (CTI-RCM, CTI-RCM-2021, AthenaBench RCM).

Released rules:

* ``cwe_last_match`` — CTI-Bench ``format_rcm``: the last ``CWE-\\d+`` anywhere (case-sensitive).
* ``athena_cwe``     — AthenaBench ``extract_rcm_answer``: bottom-up line scan for
  ``(CWE-\\d+)`` (IGNORECASE), upper-cased.

Standardized rule:

* ``cwe_final_answer`` — the CWE id of the final answer line ("Answer: CWE-79" or a last line
  holding an id), else the last CWE id in the answer.

Scoring uses the generic ``exact_match`` (case-insensitive, as both released scorers do).
"""

from __future__ import annotations

import re

from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.attack import athena_lines

__all__ = ["RULES", "METRICS", "METRIC_INFO"]

_CTI_CWE = re.compile(r"CWE-\d+")
_CWE = re.compile(r"\bCWE-(\d+)\b", re.IGNORECASE)
_ANSWER_MARKER = re.compile(r"\b(?:final\s+)?answer\b", re.IGNORECASE)


@declarations.rule(name="cwe_last_match")
def cwe_last_match(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CTI-Bench ``format_rcm``: the last ``CWE-\\d+`` match (case-sensitive).

    No match: the notebook keeps the raw response, and ``compute_rcm_accuracy`` counts a
    row only when ``pred.upper().startswith('CWE-')``.  So a raw response that happens to
    start with "cwe-" stays in the denominator (and is wrong); anything else is excluded.
    """
    matches = _CTI_CWE.findall(text)
    if matches:
        return matches[-1], f"last of {len(matches)} CWE id(s)"
    if text.upper().startswith("CWE-"):
        return text, "no 'CWE-\\d+' match; raw text starts with 'cwe-' and is kept (counts as wrong)"
    return None, "no 'CWE-\\d+' match (format_rcm keeps the raw text; the scorer excludes it)"


@declarations.rule(name="athena_cwe")
def athena_cwe(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """AthenaBench RCM: bottom-up, the first line with ``CWE-\\d+`` (any case), upper-cased."""
    value, detail = athena_lines(text, r"(CWE-\d+)", str.upper)
    return (value or None), detail


def _norm(match: re.Match[str]) -> str:
    return f"CWE-{int(match.group(1))}"


@declarations.rule(name="cwe_final_answer")
def cwe_final_answer(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Standardized: the CWE id on the final answer line, else the last CWE id anywhere.

    Bottom-up, the first line with an answer marker ("Answer:", "Final answer") followed by an
    id gives the first id after its last marker; else the last id on the last non-empty line;
    else the last id in the text.  Ids are normalised to ``CWE-<n>``.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        marker = None
        for marker in _ANSWER_MARKER.finditer(line):  # noqa: B007 - the loop keeps the last marker of the line
            pass
        after = _CWE.search(line, marker.end()) if marker is not None else None
        if after:
            return _norm(after), f"answer line: {line.strip()[:60]!r}"
    ids = list(_CWE.finditer(lines[-1])) if lines else []
    if ids:
        return _norm(ids[-1]), f"final line: {lines[-1].strip()[:60]!r}"
    ids = list(_CWE.finditer(text))
    if ids:
        return _norm(ids[-1]), "no answer line: last CWE id in the answer"
    return None, "no CWE id"


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
