"""Extraction stage: read an answer out of a model's generation.

A *rule* turns answer text into a prediction.  The released rules reproduce each
benchmark's own released code exactly, quirks included, because the audit measures
what those quirks do to a score; the ``final_answer_*`` and ``final_line`` rules are
the project's standardized alternatives.

Contract of a rule: ``rule(text, question, generation) -> (prediction, detail)`` where
``prediction`` is ``None`` when no answer was found and ``detail`` is a short human
readable note on what was read.  A rule never raises for odd text and does no I/O.

``extract`` wraps a rule: it removes reasoning when asked, runs the rule and, when the
rule finds nothing, says *why* with an ``InvalidReason`` so that the failure can be
charged to the right pipeline stage (see ``types.INVALID_STAGE``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from pytest_benchaudit.pipeline.types import (
    ENDPOINT_DOWN_PREFIX,
    HEDGED_PREFIX,
    NO_LOGPROBS_PREFIX,
    Extraction,
    Generation,
    InvalidReason,
    Question,
)
from pytest_benchaudit.scoring import declarations
from pytest_benchaudit.scoring.tasks import TASK_RULES
from pytest_benchaudit.scoring.tasks.labels import read_label

__all__ = [
    "BUILTIN_RULES",
    "REASONING_MODES",
    "RULES",
    "Rule",
    "answer_text_of",
    "rule_names",
    "strip_first_reasoning",
    "strip_reasoning",
    "extract",
]

Rule = Callable[[str, Question, Generation], tuple[str | None, str]]

_DEFAULT_LABELS = ("A", "B", "C", "D")


def _labels(question: Question) -> tuple[str, ...]:
    # A question without choices (e.g. a prompt-only row) is still a 4-option MCQ.
    return tuple(question.choices) or _DEFAULT_LABELS


# --------------------------------------------------------------------------- reasoning

_THINK_SPAN = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def strip_reasoning(text: str) -> tuple[str, bool]:
    """Remove ``<think>`` reasoning from ``text``; return ``(answer_text, unclosed_think)``.

    1. every ``<think>…</think>`` span is removed (case-insensitive, across lines);
    2. a ``</think>`` left without an opening tag (chat templates that put the opening
       tag in the prompt) means everything up to and including the last one is reasoning;
    3. an unclosed ``<think>`` left over: the answer is only what precedes it and
       ``unclosed_think`` is True.

    Nothing else is touched (whitespace included), so a text without tags reaches the
    rule byte for byte — the released last-line rules are sensitive to trailing newlines.
    """
    answer = _THINK_SPAN.sub("", text)
    closes = list(_THINK_CLOSE.finditer(answer))
    if closes:
        answer = answer[closes[-1].end() :]
    opened = _THINK_OPEN.search(answer)
    if opened:
        return answer[: opened.start()], True
    return answer, False


# inspect_ai's tags: case-sensitive, and ``<think`` may carry attributes (``<think signature="...">``).
_INSPECT_TAG = re.compile(r"<think[^>]*>|</think>")
_INSPECT_BLOCK = re.compile(r"<think[^>]*>.*?</think>", re.DOTALL)


def _first_think_block(text: str) -> tuple[int, int] | None:
    """Where the block inspect_ai removes lies: the first opening tag up to the closing tag that
    balances it (nested blocks counted), else the first opening tag up to the next closing one."""
    start, depth = None, 0
    for tag in _INSPECT_TAG.finditer(text):
        if tag.group(0) != "</think>":
            start, depth = (tag.start(), 1) if start is None else (start, depth + 1)
        elif start is not None:
            depth -= 1
            if depth == 0:
                return start, tag.end()
    block = _INSPECT_BLOCK.search(text)
    return block.span() if block else None


def strip_first_reasoning(text: str, reasoning_field: str | None = None) -> str:
    """The completion inspect_ai's ``openai-api`` model reads from a chat answer (``reasoning = "strip_first"``).

    inspect_ai 0.3.285 (``inspect_ai/model/_openai.py`` ``chat_message_assistant_from_openai`` ->
    ``parse_reasoning_content`` -> ``_reasoning.py`` ``parse_content_with_reasoning``): when the answer
    carries its reasoning in a field of its own (``reasoning_content``), the text is read as it
    came; otherwise the *first* ``<think>...</think>`` block is removed (case-sensitive, nested
    blocks balanced, later blocks kept) and what remains is stripped of surrounding whitespace --
    unless nothing remains, when the raw text is read (``<think>Answer: C</think>`` reads C).
    """
    if reasoning_field:
        return text
    span = _first_think_block(text)
    if span is None:
        return text
    rest = (text[: span[0]] + text[span[1] :]).strip()
    return rest or text


REASONING_MODES = ("strip", "keep", "strip_first")


def answer_text_of(text: str, reasoning: str, reasoning_field: str | None = None) -> str:
    """What a rule reads from ``text`` under ``extraction.reasoning`` (see :func:`extract`)."""
    if reasoning == "keep":
        return text
    if reasoning == "strip_first":
        return strip_first_reasoning(text, reasoning_field)
    return strip_reasoning(text)[0]


# --------------------------------------------------------------------------- released rules

# CTI-Bench `compute_mcq_accuracy` accepts these; X marks a refusal/error row.
_CTI_VALID = frozenset("ABCDX")


def _letter_on_line(line: str) -> str | None:
    """What CTI-Bench's heuristic reads on one line (already right-stripped), or None.

    In order: a leading "A)".."D)"; else a final A-D (any word: "...DNA" reads A);
    else, for a line ending in "**", its third-last character (IndexError on "**").
    """
    if line[:2] in ("A)", "B)", "C)", "D)"):
        return line[0]
    if line[-1:] in ("A", "B", "C", "D"):
        return line[-1]
    if line.endswith("**"):
        return line[-3]
    return None


def _cti_format_mcq(text: str) -> str:
    """Behaviour of ``format_mcq`` in CTI-Bench ``evaluation/model-prediction.ipynb``.

    The last line is read; only when it is empty is the second-to-last one read.
    Nothing found: the whole response flattened to one line (which the scorer then
    excludes).  May raise IndexError (a last line ``**``, a one-line empty text),
    which the notebook's try/except turned into the answer ``'Error'``.
    """
    lines = text.split("\n")
    last = lines[-1].rstrip()
    found = _letter_on_line(last)
    if found is None and not last:
        found = _letter_on_line(lines[-2].rstrip())
    return found if found is not None else " ".join(lines)


@declarations.rule(name="last_line_letter", answers="label")
def last_line_letter(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CTI-Bench MCQ: the released last-line heuristic (any line ending in "…DNA" reads A)."""
    try:
        raw = _cti_format_mcq(text)
    except IndexError:
        return None, "format_mcq raised IndexError (released answer: 'Error')"
    # The released scorer upper-cases and keeps only {A,B,C,D,X}; anything else (the
    # flattened response) is printed as invalid and left out of the denominator.
    pred = raw.upper()
    if pred in _CTI_VALID:
        return pred, f"format_mcq read {raw!r}"
    return None, f"format_mcq returned {raw[:60]!r}, not in A/B/C/D/X"


_SECEVAL_LETTER = re.compile(r"[A-D]")


@declarations.rule(name="all_capital_letters", answers="labels")
def all_capital_letters(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """SecEval: every capital A–D anywhere, de-duplicated and sorted (never invalid).

    Capitals inside words count ("DEP and ASLR" -> "AD"); the released code has no
    invalid category, so a text without any of them yields the valid prediction "".
    """
    cleaned = text.replace("Answer:", "")
    letters = "".join(sorted(set(_SECEVAL_LETTER.findall(cleaned))))
    return letters, f"capitals found: {letters or 'none'}"


_CYBERMETRIC = re.compile(r"ANSWER:?\s*([A-D])", re.IGNORECASE)


@declarations.rule(name="answer_regex")
def answer_regex(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CyberMetric ``extract_answer``: ``ANSWER:?\\s*([A-D])`` with IGNORECASE, upper-cased.

    IGNORECASE makes "Answer: because…" read B (the "b" of "because").
    """
    if not text.strip():
        return None, "blank response"
    match = _CYBERMETRIC.search(text)
    if match is None:
        return None, "no 'ANSWER: X' found"
    return match.group(1).upper(), f"matched {match.group(0)!r}"


_MISSING_LOGPROB = -100.0  # what MMLU's evaluate.py substitutes for a label outside the top-100


@declarations.rule(name="logprob_argmax", reads="logprobs", answers="label")
def logprob_argmax(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """MMLU ``evaluate.py``: argmax of the first token's log-probs of " A".." D".

    A label missing from the returned alternatives gets -100; ``np.argmax`` keeps the
    first maximum, so when all four are missing the prediction is "A".  ``text`` is
    ignored: this rule reads ``generation.top_logprobs``.
    """
    if not generation.top_logprobs:
        return None, "no log-probabilities returned"
    first = generation.top_logprobs[0]
    labels = _labels(question)
    lprobs = [first.get(" " + label, _MISSING_LOGPROB) for label in labels]
    best = max(range(len(labels)), key=lambda i: (lprobs[i], -i))  # first max wins
    detail = " ".join(f"{label}={lp:g}" for label, lp in zip(labels, lprobs))
    return labels[best], detail


_XML_ANSWER = re.compile(r"<xml>\s*([A-Z])\s*</xml>", re.IGNORECASE)


@declarations.rule(name="xml_answer")
def xml_answer(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """CyberMetric's documented answer format (README 'Prompt': ``<xml>answer</xml>``): the
    letter inside the last ``<xml>…</xml>`` pair, when it is one of the question's labels."""
    labels = _labels(question)
    hits = [m for m in _XML_ANSWER.finditer(text) if m.group(1).upper() in labels]
    if not hits:
        return None, "no <xml>X</xml> with an option letter"
    return hits[-1].group(1).upper(), f"matched {hits[-1].group(0)!r}"


MMLU_FALLBACK = "released fallback 'A'"


@declarations.rule(name="mmlu_logprob_argmax", reads="logprobs", answers="label")
def mmlu_logprob_argmax(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """MMLU ``evaluate.py`` as released, quirk included: a response without log-probabilities
    reads "A".  Each letter's lookup sits in a bare ``try/except`` that substitutes -100, so
    when ``logprobs`` is missing all four get -100 and ``np.argmax`` picks the first.  The
    detail starts with ``MMLU_FALLBACK`` so that runs can count how often it happened."""
    if not generation.top_logprobs:
        return _labels(question)[0], f"{MMLU_FALLBACK}: no log-probabilities returned, -100 for every letter"
    return logprob_argmax(text, question, generation)


_LIGHTEVAL_LEADING = re.compile(r"^([ABCD])[).:]")
_LIGHTEVAL_STANDALONE = re.compile(r"\b([ABCD])\b")
_LIGHTEVAL_BOLD_END = re.compile(r"\*\*([ABCD])\*\*$")
_LIGHTEVAL_ANY = re.compile(r"[ABCD]")


def _lighteval_line(line: str) -> str | None:
    cleaned = line.replace("**", " ")
    # The mutation check's equivalent entries (tools/mutants_equivalent.toml) quote these lines as written.
    # fmt: off
    for pattern, how in ((_LIGHTEVAL_LEADING, "match"), (_LIGHTEVAL_STANDALONE, "search"),
                         (_LIGHTEVAL_BOLD_END, "search")):
    # fmt: on
        m = pattern.match(cleaned) if how == "match" else pattern.search(cleaned)
        if m:
            return m.group(1)
    # "ending with a letter" whose previous character is not alphanumeric (or absent)
    if cleaned and cleaned[-1] in "ABCD" and not cleaned[-2:-1].isalnum():
        return cleaned[-1]
    return None


@declarations.rule(name="redsage_mcq_acc")
def redsage_mcq_acc(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """RedSage ``MCQAcc.compute`` (eval/cybersecurity_benchmarks.py): the last five non-empty
    lines, bottom-up: a leading ``A)``/``A.``/``A:``, else any standalone capital A-D (a
    sentence-initial article "A" counts), else a trailing letter; fallback: the one distinct
    A-D capital of the whole text.  Quirk kept: ``**`` is replaced before the ``**X**`` test,
    which therefore never matches."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines[::-1][:5]:
        found = _lighteval_line(line)
        if found:
            return found, f"line {line[:60]!r}"
    letters = _LIGHTEVAL_ANY.findall(text)
    if len(set(letters)) == 1:
        return letters[0], "the only capital A-D in the text"
    return None, "no letter on the last 5 lines and not exactly one distinct A-D in the text"


# --------------------------------------------------------------------------- standardized rules

# "Answer:", "Final answer is", "The correct answers are" … (case-insensitive marker;
# the letter itself stays case-sensitive so that prose never turns into an answer).
_MARKER = r"(?i:\b(?:final\s+)?answers?\b(?:\*\*)?\s*(?:is|are)?\s*[:：]?\s*(?:option|choice)?\s*)"
_NOT_WORD = r"(?![A-Za-z0-9])"


def _label_alt(labels: tuple[str, ...]) -> str:
    return "(?:" + "|".join(re.escape(lbl) for lbl in sorted(labels, key=len, reverse=True)) + ")"


@declarations.rule(name="final_answer_letter", answers="label", strict=True)
def final_answer_letter(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Standardized single answer: bottom-up, an explicit marker first, else a letter-only line.

    Labels are the question's choice keys (A–D by default), upper-case and standalone only.  A final
    answer naming several options (``Answer: A or B``, ``A, B``, ``AB``) is no answer: ``hedged``.
    """
    # One reader for every label set (SECURE's A-D+X and T/F/X use it too): tasks.labels.
    return read_label(text, _labels(question), {})


def _list_pattern(labels: tuple[str, ...]) -> str:
    lab = _label_alt(labels)
    # "(A)", "[A]" or a bare "A": a bracket is part of an item only when it closes ("A (B is close)" is "A").
    item = rf"(?:\*\*)?(?:\((?:{lab})+\)|\[(?:{lab})+\]|(?<![A-Za-z0-9])(?:{lab})+{_NOT_WORD}[)\]]?)(?:\*\*)?"
    # ", " / " and " / ", and " / " " between items (an Oxford comma must not end the list)
    sep = r"(?:\s*[,;/&]\s*(?:and\s+)?|\s+and\s+|\s+)"
    # The whole list may sit in bold, \boxed{}, or brackets: "[A, C]", "(A, C)".
    return rf"(?:\*\*|\$?\\boxed\{{|[(\[](?=[^)\]]*[)\]]))?\s*{item}(?:{sep}{item})*\s*(?:\*\*|\}}\$?|[)\]])?"


@lru_cache(maxsize=64)
def _letters_patterns(
    labels: tuple[str, ...],
) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(marker, letter-list line, single label, "or" after a list, marker + "either") patterns for a
    label set; built once per set."""
    letters_list = _list_pattern(labels)
    marker = re.compile(_MARKER + f"({letters_list})")
    alone = re.compile(rf"^\s*({letters_list})\s*\.?\s*$")
    item = rf"(?:\*\*)?(?:\$?\\boxed\{{)?[(\[]?(?<![A-Za-z0-9]){_label_alt(labels)}{_NOT_WORD}"
    # "A or C", "A, B or C", "A and/or C", "A, or possibly C": a choice between sets, not a set.
    alternative = re.compile(
        r"\s*[,;]?\s*(?:\bor\b|\band/or\b)(?:\s*(?i:possibly|maybe|perhaps|probably)\b)?\s*" + item
    )
    either = re.compile(_MARKER + r"(?i:either)\s+" + f"({letters_list})")
    # Inside a matched list only labels, decoration and separators remain ("and" is
    # lower case), so every label occurrence is an answer letter.
    return marker, alone, re.compile(_label_alt(labels)), alternative, either


@declarations.rule(name="final_answer_letters", answers="labels", strict=True)
def final_answer_letters(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """Standardized multi-answer ("choose all that apply"): sorted unique letters, e.g. "ACD".

    Same bottom-up scan as ``final_answer_letter``; after a marker, or alone on a line,
    accepts ``ACD``, ``A, C, D``, ``A C D``, ``A and C``, ``(A), (C)``, ``**A, C**``.
    A choice between options (``A or C``, ``A, B or C``, ``either A or C``) is no answer: hedged.
    """
    marker, alone, label_re, alternative, either = _letters_patterns(_labels(question))
    for line in reversed([ln for ln in text.splitlines() if ln.strip()]):
        hits = list(marker.finditer(line))
        kind = "answer marker"
        match = hits[-1] if hits else None
        eithers = list(either.finditer(line))
        if eithers and (match is None or eithers[-1].start() > match.start()):
            return None, f"{HEDGED_PREFIX}'either' between options: {line.strip()[:60]!r}"
        if match is None:
            match, kind = alone.match(line), "letter line"
        if match:
            if alternative.match(line, match.end(1)):
                return None, f"{HEDGED_PREFIX}'or' between options: {line.strip()[:60]!r}"
            found = label_re.findall(match.group(1))
            return "".join(sorted(set(found))), f"{kind}: {line.strip()[:60]!r}"
    return None, "no answer marker or letter-list line"


_FINAL_LINE_PREFIX = re.compile(r"^(?:final\s+answer|answer)\s*:", re.IGNORECASE)
_FINAL_LINE_STRIP = " \t\r\n*\"'`“”‘’"


@declarations.rule(name="final_line")
def final_line(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """The last line that still has content once whitespace, ``*``, quotes and an
    ``answer:``/``final answer:`` prefix are stripped (free-text answers such as actor names)."""
    for line in reversed(text.splitlines()):
        value = line.strip(_FINAL_LINE_STRIP)
        value = _FINAL_LINE_PREFIX.sub("", value).strip(_FINAL_LINE_STRIP)
        if value:
            return value, f"last line: {line.strip()[:60]!r}"
    return None, "no line with content"


@declarations.rule(name="judge", reads="judge", answers="label")
def judge_rule(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """``extraction.rule = "judge"``: an LLM judge reads the answer (see ``judge.py``).

    The runner asks the judge; this placeholder only names the rule, so a pipeline can
    choose it, and fails loudly if something tries to run it without a judge.
    """
    raise RuntimeError("extraction.rule 'judge' needs --judge; the runner asks the judge model")


#: Every rule by name: this module's and the task families' (each registered by its decorator's ``name``,
#: :func:`.declarations.declared`), then the plugins' (merged in by plugins/plugin_manager.py).
RULES: dict[str, Rule] = {**declarations.declared(globals())[0], **TASK_RULES}
#: The package's own rules, as the plugin hook ``benchaudit_rules`` registers them (plugins/builtin_plugin.py);
#: RULES also holds the plugins' (merged in by plugins/plugin_manager.py).
BUILTIN_RULES: dict[str, Rule] = dict(RULES)


def rule_names() -> list[str]:
    """Names of the known extraction rules, sorted."""
    return sorted(RULES)


# --------------------------------------------------------------------------- driver


def extract(rule: str, generation: Generation, question: Question, reasoning: str) -> Extraction:
    """Apply extraction ``rule`` to ``generation`` for ``question``.

    ``reasoning`` is "strip" (remove ``<think>`` spans, see ``strip_reasoning``),
    "keep" (the rule reads the raw text, as most released code did) or "strip_first"
    (inspect_ai's reading: the first block only, see ``strip_first_reasoning``).  A separate
    ``generation.reasoning`` field is never part of the answer text in any mode.

    Returns a valid ``Extraction`` when the rule found an answer (an empty string from
    ``all_capital_letters`` counts as an answer), otherwise an invalid one whose reason is,
    in order: ``no_logprobs`` (a log-likelihood rule found no log-probabilities to read), ``hedged`` (the rule read a final answer naming several options), ``inference_error`` (request failed; ``endpoint_down`` when it was never sent), ``empty`` / ``truncated`` (no text;
    truncated when the token budget ran out), ``unclosed_reasoning``, ``truncated``,
    ``empty`` (nothing left after reasoning was removed), ``unparseable``.
    Raises KeyError for an unknown rule and ValueError for a bad ``reasoning`` mode.
    """
    if rule not in RULES:
        raise KeyError(f"unknown extraction rule {rule!r}; known rules: {', '.join(rule_names())}")
    if reasoning not in REASONING_MODES:
        raise ValueError(f"reasoning must be one of {', '.join(REASONING_MODES)}, not {reasoning!r}")
    if generation.error:
        # A question the circuit breaker did not send (its endpoint was down) is no inference error.
        down = generation.error.startswith(ENDPOINT_DOWN_PREFIX)
        return Extraction(invalid_reason="endpoint_down" if down else "inference_error", detail=generation.error)

    stripped, unclosed = strip_reasoning(generation.text)
    # Even when the text is kept, an unclosed <think> still explains a failure better
    # than "unparseable": the model never reached its answer.
    if reasoning == "strip_first":
        answer_text = strip_first_reasoning(generation.text, generation.reasoning)
    else:
        answer_text = generation.text if reasoning == "keep" else stripped

    prediction, detail = RULES[rule](answer_text, question, generation)
    if prediction is not None:
        return Extraction(prediction=prediction, answer_text=answer_text, detail=detail)
    if detail.startswith(NO_LOGPROBS_PREFIX):
        # A log-likelihood read without the log-probabilities it reads: the endpoint's failure, not the rule's.
        return Extraction(
            invalid_reason="no_logprobs", answer_text=answer_text, detail=detail[len(NO_LOGPROBS_PREFIX) :]
        )
    if detail.startswith(HEDGED_PREFIX):
        # The rule read a final answer that names several options: it is there, and it is no answer.
        return Extraction(invalid_reason="hedged", answer_text=answer_text, detail=detail[len(HEDGED_PREFIX) :])

    truncated = generation.finish_reason == "length"
    reason: InvalidReason
    if not generation.text.strip():
        reason = "truncated" if truncated else "empty"
    elif unclosed:
        reason = "unclosed_reasoning"
    elif truncated:
        reason = "truncated"
    elif not answer_text.strip():
        # Only "<think>…</think>" came back: no answer was produced at all, which is an
        # inference-stage failure, not a failure of the rule.
        reason = "empty"
    else:
        reason = "unparseable"
    return Extraction(invalid_reason=reason, answer_text=answer_text, detail=detail)
