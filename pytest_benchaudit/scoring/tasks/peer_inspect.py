"""Inspect's reader as an extraction rule: ``inspect_choice`` (inspect_ai's multiple-choice scoring).

In inspect_ai 0.3.285 the ``multiple_choice()`` solver reads the reply with ``parse_answers``
(``inspect_ai/solver/_multiple_choice.py``) and marks the chosen option; the ``choice()`` scorer
(``inspect_ai/scorer/_choice.py``) then scores it correct when exactly the target is marked.  What
the reply must look like, in the order Inspect reads it:

1. wrappers are removed first: ``$A$`` and ``**A**`` (any run of letters, digits, spaces and
   commas between them) and a parenthesised single character ``(A)`` at the start of the text or
   after ``:`` or ``,`` when a comma, period, newline or the end follows;
2. the *strict* pattern: a line that starts with ``ANSWER`` (any case), optional spaces, a colon,
   then letters, digits, spaces and commas up to the end of the line or a period; the last such
   line wins;
3. only when no line matched, the *loose* pattern: ``ANSWER:`` anywhere, with the same run after it;
4. the run is stripped, its trailing periods removed and upper-cased; split on commas (empty pieces
   dropped), it must be exactly one piece and that piece one of the positional letters A, B, ...
   (one per choice): ``ANSWER: A`` and ``answer: b.`` read, ``ANSWER: A, B``, ``ANSWER: AB``,
   ``ANSWER: A because`` and ``Answer - A`` (no colon) do not.

Verdict beyond Inspect's (which only says "no answer"): when the same run, read the way Inspect's
multiple-answer mode reads it (``A, B``, ``A and B``, ``AB``), names two or more of the allowed
letters, the reply named several options: the detail starts with ``HEDGED_PREFIX`` so that
``extract`` counts it ``hedged``; any other miss is ``unparseable`` (or empty/truncated, as
``extract`` decides).  Checked against the real ``parse_answers`` on the probe strings of
``tests/scoring/test_peer_inspect_rule.py`` (verdicts stored under ``tests/fixtures/peers/``).
"""

from __future__ import annotations

import re

from pytest_benchaudit.pipeline.types import HEDGED_PREFIX, Generation, Question
from pytest_benchaudit.scoring import declarations

__all__ = ["RULES", "METRICS", "METRIC_INFO", "inspect_choice", "inspect_answer_run"]

# Step 1: the wrappers, each replaced by what it encloses (the order matters: $..$, then **..**, then (X)).
_DOLLAR = re.compile(r"\$\s*([A-Za-z\d][A-Za-z\d ,]*?)\s*\$")
_BOLD = re.compile(r"\*\*\s*([A-Za-z\d][A-Za-z\d ,]*?)\s*\*\*")
_PARENS = re.compile(r"(?i)(^|[:,])(\s*)\(([A-Za-z\d])\)(?=\s*(?:,|\.|\n|\Z))")
# Steps 2 and 3: the strict line pattern, then the loose one.  The run allows a plain space and a
# comma only (no tab), which is why "ANSWER: A because ..." is one run that is no letter.
_STRICT = re.compile(r"(?i)^ANSWER\s*:\s*([A-Za-z\d ,]+)\s*(?:$|\n|\.)", re.MULTILINE)
_LOOSE = re.compile(r"(?i)ANSWER\s*:\s*([A-Za-z\d ,]+)(?:[^\w]|\n|$|\.)")


def _unwrap(text: str) -> str:
    text = _DOLLAR.sub(r"\1", text)
    text = _BOLD.sub(r"\1", text)
    return _PARENS.sub(r"\1\2\3", text)


def inspect_answer_run(text: str) -> tuple[str | None, str]:
    """The answer run Inspect reads from ``text`` (stripped, trailing periods removed, upper-cased)
    and which pattern found it (``"strict"`` or ``"loose"``); ``(None, "")`` when neither matched."""
    unwrapped = _unwrap(text)
    for kind, pattern in (("strict", _STRICT), ("loose", _LOOSE)):
        runs = pattern.findall(unwrapped)
        if runs:
            return runs[-1].strip().rstrip(".").upper(), kind
    return None, ""


def _letters(question: Question) -> list[str]:
    # Inspect labels the choices by position (A, B, C, ...), whatever keys the dataset used.
    count = len(question.choices) or 4
    return [chr(ord("A") + i) for i in range(min(count, 26))]


def _several(run: str, allowed: set[str]) -> set[str]:
    """The options ``run`` names when read as Inspect's multiple-answer mode reads it (empty when it
    is not a set of allowed letters)."""
    compact = run.replace(" AND ", ",").replace(" ", "")
    pieces = {piece for piece in compact.split(",") if piece}
    if pieces and pieces <= allowed:
        return pieces
    chars = set(compact)
    return chars if chars and chars <= allowed else set()


@declarations.rule(name="inspect_choice")
def inspect_choice(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """inspect_ai 0.3.285 ``parse_answers(state, multiple_correct=False)``: one letter or nothing
    (see the module docstring for the patterns); several letters are ``hedged``."""
    run, kind = inspect_answer_run(text)
    if run is None:
        return None, "no 'ANSWER: X' (a colon is required)"
    allowed = _letters(question)
    pieces = [piece for piece in run.split(",") if piece]
    if len(pieces) == 1 and pieces[0] in allowed:
        return pieces[0], f"{kind} pattern read {run!r}"
    named = _several(run, set(allowed))
    if len(named) > 1:
        return None, f"{HEDGED_PREFIX}{kind} pattern read {run!r}: {len(named)} options, one expected"
    return None, f"{kind} pattern read {run!r}: not exactly one of {','.join(allowed)}"


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
