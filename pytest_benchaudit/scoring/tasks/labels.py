"""Label-set answers: a final answer read from a task-given label set, and label metrics.

Family module (see ``tasks/__init__.py``): imports only ``..types``.

Why a family of its own: the generic MCQ rules read A–D (the question's choice keys).
SECURE asks for A–D *or X* ("if you do not know the answer, return X", MAET/CWET) and
for T/F/X (KCV/VOOD, no options at all), and SecBench's multi-answer golds may arrive
as a stringified list.  A rule only gets ``(text, question, generation)``, so the
allowed labels must be readable from the question or fixed by the rule:

* ``final_answer_label`` reads them from ``question.meta["labels"]`` (a string such as
  ``"TFX"`` or a list); without it, the question's choice keys (A–D by default).  The
  loader cannot put constants into ``meta`` yet, so the two fixed rules below are what
  the suites use; the generic rule is ready for a data-mapping key ``labels``.
* ``final_answer_or_x``: the question's choice keys (A–D from the option columns) plus
  the don't-know label ``X``.
* ``final_answer_tfx``: ``T``/``F``/``X``; the words ``True``/``False`` are read as T/F.

The rule name fixes the label set, so the pipeline card shows which answers were
accepted.  Reading is the project's standardized one: bottom-up, an explicit answer
marker ("Answer: X", "The answer is T") first, else a line that is only the label
(``C``, ``C)``, ``**X**``, ``C) option text``); labels are upper-case and standalone, so
prose ("A firewall…", "Xen", "The") never becomes an answer.  A ``C) option text`` line
commits only when it is the response's one option line (or repeats one listed earlier):
a response that echoes several options ("A) …", "B) …", "C) …") without a marker or a
label-only line is unparseable, not an answer for the last option listed.

A hedge between options after the marker is no answer either (``hedged``): ``Answer: A or B``,
``Answer: A, B``, ``Answer: B and C``, ``Answer: A/B``, ``Answer: **A** or **B**`` and
``Answer: AB`` name two options where one is asked for, so the reader does not credit the first of
them (Inspect's ``choice`` scorer counts them as no answer too).  The conformance table of
docs/scoring.md lists what each reading gives.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from pytest_benchaudit.pipeline.types import HEDGED_PREFIX, Generation, Question, Score
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks.inputs import Resources, Rule

__all__ = ["ABSTAIN", "METRICS", "METRIC_INFO", "RULES", "gold_label_set", "label_rule", "read_label"]

ABSTAIN = "X"  # SECURE's "if you do not know the answer, return X"
_DEFAULT_LABELS = ("A", "B", "C", "D")


# "Answer:", "Final answer is", "My answer: " … case-insensitive; the label itself is
# matched case-sensitively (or as a whole alias word such as "True").
# "**Answer**: C" and "**Answer:** C": the marker's own bold closes before or after the colon.
_MARKER = (
    r"(?i:\b(?:final\s+)?answers?\b(?:\*\*)?\s*(?:is|are|would\s+be|:)?\s*[:：]?\s*(?:\*\*\s*)?"
    r"(?:option|choice)?\s*)"
)
# LaTeX answers come as \boxed{C} or, inside math mode, $\boxed{C}$.
_OPEN = r"(?:\*\*|\(|\[|\$?\\boxed\{|[\"'`])?\s*"
_NOT_WORD = r"(?![A-Za-z0-9])"
# Between two options of a hedge: "A or B", "A, B", "A and B", "A/B", "A & B", "A and/or B", after
# any closing decoration of the first ("(A) or (B)", "**A** or **B**").
_CLOSE = r"\s*(?:[)\]}\"'`]|\*\*)*\s*"
_HEDGE_SEP = (
    r"(?:[,;]?\s*(?:\bor\b|\band/or\b|\band\b)|,|;|/|&|\+)"
    r"(?:\s*(?i:possibly|maybe|perhaps|probably)\b)?"
)


def _alternatives(labels: Sequence[str], aliases: Mapping[str, str]) -> str:
    # Longest first so that an alias word wins over its initial ("True" before "T").
    names = sorted({*labels, *aliases}, key=len, reverse=True)
    return "(?:" + "|".join(re.escape(n) if n in labels else f"(?i:{re.escape(n)})" for n in names) + ")"


def _compile(labels: Sequence[str], aliases: Mapping[str, str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Built once per label set: rules run for every item of a suite.
    return _compile_cached(tuple(labels), tuple(sorted(aliases.items())))


@lru_cache(maxsize=64)
def _hedges(
    labels: tuple[str, ...], aliases: tuple[tuple[str, str], ...]
) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]:
    """(what after a marker's label makes it a hedge; a marker, "either"/"both" and a label; a marker
    before a run of two or more labels, "Answer: AB")."""
    alt = _alternatives(labels, dict(aliases))
    label = _OPEN + rf"(?<![A-Za-z0-9])({alt}){_NOT_WORD}"
    # A separator and another option, or only more options to the end of the line ("A C D").
    more = re.compile(
        _CLOSE
        + "(?:"
        + _HEDGE_SEP
        + r"\s*(?:\*\*)?\s*"
        + label
        + rf"|\s+(?<![A-Za-z0-9])({alt})(?:\s+{alt})*\s*[.!]?\s*$)"
    )
    either = re.compile(_MARKER + r"(?i:either|both)\s+" + label)
    single = [lbl for lbl in labels if len(lbl) == 1]
    run = None
    if len(single) > 1:
        letters = "[" + "".join(re.escape(lbl) for lbl in single) + "]"
        run = re.compile(_MARKER + _OPEN + rf"(?<![A-Za-z0-9])({letters}{{2,}}){_NOT_WORD}")
    return more, either, run


@lru_cache(maxsize=64)
def _compile_cached(
    labels: tuple[str, ...], aliases: tuple[tuple[str, str], ...]
) -> tuple[re.Pattern[str], re.Pattern[str]]:
    alt = _alternatives(labels, dict(aliases))
    marker = re.compile(_MARKER + _OPEN + rf"(?<![A-Za-z0-9])({alt}){_NOT_WORD}")
    # A line that *is* the answer: X / X. / (X) / **X** / \boxed{X}, or "C) text", "C: text".
    alone = re.compile(
        r"^\s*(?:\*\*)?\s*(?:\(|\[|\$?\\boxed\{|[\"'`])?\s*"
        rf"({alt})"
        r"(?:\s*[)\]}.:\"'`]?\$?\s*(?:\*\*)?\s*\.?\s*$|(?P<text>\s*[).:]\s*(?:\*\*)?\s*\S.*$))"
    )
    return marker, alone


def read_label(text: str, labels: Sequence[str], aliases: Mapping[str, str]) -> tuple[str | None, str]:
    """The final answer label, bottom-up: an explicit answer marker first, else a label-only line."""
    marker, alone = _compile(labels, aliases)
    fold = {k.lower(): v for k, v in aliases.items()}

    def norm(found: str) -> str:
        return found if found in labels else fold[found.lower()]

    more, either, run = _hedges(tuple(labels), tuple(sorted(aliases.items())))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        hits = list(marker.finditer(line))
        # "Answer: AB" and "Answer: either A or B" are no marker hit; they hedge when they come last.
        runs = [m for m in run.finditer(line) if len(set(m.group(1))) > 1] if run else []
        runs += [m for m in either.finditer(line) if more.match(line, m.end())]
        last = max(runs, key=lambda m: m.start(), default=None)
        if last is not None and (not hits or last.start() > hits[-1].start()):
            return None, f"{HEDGED_PREFIX}several options after the marker: {line.strip()[:60]!r}"
        if hits:
            found = norm(hits[-1].group(1))
            other = more.match(line, hits[-1].end())
            second = other and norm(other.group(1) or other.group(2))
            if second and second != found:
                return None, f"{HEDGED_PREFIX}{found} and {second} after the marker: {line.strip()[:60]!r}"
            return found, f"answer marker: {line.strip()[:60]!r}"
        match = alone.match(line)
        if match:
            found = norm(match.group(1))
            if match.group("text") is not None and _only_labels(match.group("text"), labels, aliases) - {found}:
                # "(A) (C)", "A) or C)": the "option text" is more options, not the option's wording.
                return None, f"{HEDGED_PREFIX}several options on a label line: {line.strip()[:60]!r}"
            if match.group("text") is not None:
                listed = _option_lines(lines, alone, norm)
                # "A) …\nB) …\nC) …" echoes the options; the last one listed is not a choice.
                # The label counts only when it is the one option line, or is stated again.
                if len(set(listed)) > 1 and listed.count(found) < 2:
                    return None, f"lists options {', '.join(dict.fromkeys(listed))} without committing to one"
            return found, f"label line: {line.strip()[:60]!r}"
    return None, f"no answer marker or label line (labels {'/'.join(labels)})"


def _only_labels(text: str, labels: Sequence[str], aliases: Mapping[str, str]) -> set[str]:
    """The labels ``text`` names when it holds nothing but labels, brackets, bold and separators
    (``") (C)"``, ``") or C)"``); an empty set for any other text."""
    alt = _alternatives(labels, aliases)
    rest = re.sub(rf"(?<![A-Za-z0-9]){alt}{_NOT_WORD}|\b(?:or|and)\b|[\s()\[\],;/&*.:]", "", text)
    if rest:
        return set()
    fold = {k.lower(): v for k, v in aliases.items()}
    return {m if m in labels else fold[m.lower()] for m in re.findall(rf"(?<![A-Za-z0-9]){alt}{_NOT_WORD}", text)}


def _option_lines(lines: Sequence[str], alone: re.Pattern[str], norm: Callable[[str], str]) -> list[str]:
    """Labels of the lines written as an option ("C) text", "C. text"), in order."""
    out = []
    for line in lines:
        m = alone.match(line)
        if m and m.group("text") is not None:
            out.append(norm(m.group(1)))
    return out


def label_rule(
    labels: Sequence[str] | None = None,
    *,
    extra: Sequence[str] = (),
    aliases: Mapping[str, str] | None = None,
    doc: str = "",
) -> Rule:
    """A rule reading one final label.

    ``labels`` fixes the label set; ``None`` takes it from ``question.meta["labels"]``,
    else from the question's choice keys (A–D by default).  ``extra`` labels are added
    (e.g. the don't-know ``X``); ``aliases`` map whole words to labels (``True`` -> ``T``),
    matched case-insensitively.
    """
    alias_map = dict(aliases or {})

    def rule(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
        if labels is not None:
            allowed: tuple[str, ...] = tuple(labels)
        else:
            meta = question.meta.get("labels")
            if isinstance(meta, str) and meta.strip():
                allowed = tuple(meta.replace(",", " ").split()) if (" " in meta or "," in meta) else tuple(meta.strip())
            elif isinstance(meta, (list, tuple)) and meta:
                allowed = tuple(str(m) for m in meta)
            else:
                allowed = tuple(question.choices) or _DEFAULT_LABELS
        allowed = tuple(dict.fromkeys((*allowed, *extra)))
        return read_label(text, allowed, alias_map)

    rule.__doc__ = doc or label_rule.__doc__
    return rule


final_answer_label = declarations.rule(name="final_answer_label")(
    label_rule(doc="Single final label from question.meta['labels'] (else the choice keys, A–D by default).")
)
final_answer_or_x = declarations.rule(name="final_answer_or_x")(
    label_rule(
        extra=(ABSTAIN,),
        doc="Single final label among the question's choice keys plus X (SECURE MAET/CWET: 'if you do not know, return X').",
    )
)
final_answer_tfx = declarations.rule(name="final_answer_tfx")(
    label_rule(
        ("T", "F", ABSTAIN),
        aliases={"True": "T", "False": "F"},
        doc="Single final T/F/X (SECURE KCV/VOOD); the words True/False read as T/F.",
    )
)


@declarations.rule(name="whole_answer")
def whole_answer(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Free-text answers for a judge (SecBench SAQ): the answer text, stripped; None when blank.

    Unlike ``final_line`` it keeps a multi-paragraph answer whole, so a grader sees it all.
    """
    value = text.strip()
    if not value:
        return None, "blank answer text"
    return value, f"{len(value)} characters"


# --------------------------------------------------------------------------- metrics

_LETTERS = re.compile(r"[A-Za-z]")


def gold_label_set(gold: str) -> frozenset[str]:
    """The set of labels in a gold answer, upper-cased.

    Accepts a letter string (``"ACD"``, ``"A, C"``) or a stringified Python/JSON list
    (``"['A', 'C']"``) — parsed with ``ast.literal_eval``, which only reads literals and
    never runs code; anything it cannot read as a list of strings falls back to the
    letters in the text.
    """
    text = gold.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            value: Any = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return frozenset(ch.upper() for v in value for ch in v.strip())
    return frozenset(ch.upper() for ch in _LETTERS.findall(text))


@declarations.metric(
    name="label_set_match",
    answers="labels",
    lower_is_better=False,
    kind="binary",
    description="set of answer labels equals the gold set (gold as letters or a stringified list, "
    "read without eval); empty gold never matched",
)
def label_set_match(prediction: str, question: Question, resources: Resources) -> Score:
    """Multi-answer MCQ: the predicted label set equals the gold label set.

    Unlike ``letter_set_exact`` (SecEval, gold compared as stored) the gold is read as a
    set: ``"ACD"``, ``"A, C, D"`` and ``"['A', 'C', 'D']"`` are the same answer.  An empty
    gold is never matched (the collector skips such rows under ``empty_gold = "skip"``).
    """
    gold = gold_label_set(question.gold)
    pred = gold_label_set(prediction)
    correct = bool(gold) and pred == gold
    return Score(value=1.0 if correct else 0.0, correct=correct)


@declarations.metric(
    name="label_match_x",
    lower_is_better=False,
    kind="binary",
    description="answer label equals gold, case-insensitive; X (don't know) is a valid answer, "
    "correct only where the gold is X; extras.abstained = share of X answers",
)
def label_match_x(prediction: str, question: Question, resources: Resources) -> Score:
    """SECURE: prediction equals the gold label (case-insensitive); ``X`` is a valid answer.

    ``X`` ("I don't know") is correct only where the gold is X (all of VOOD, one KCV row);
    elsewhere it is wrong, not invalid.  ``extras["abstained"]`` is 1 for an X answer, so
    the summary reports the abstention rate next to the score.
    """
    pred, gold = prediction.strip().upper(), question.gold.strip().upper()
    correct = bool(gold) and pred == gold
    return Score(value=1.0 if correct else 0.0, correct=correct, extras={"abstained": 1.0 if pred == ABSTAIN else 0.0})


# This module's rules and metrics by name, from their decorators (declarations.declared).
RULES, METRICS, METRIC_INFO = declarations.declared(globals())
