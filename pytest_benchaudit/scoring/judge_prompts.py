"""The LLM judge: pinned prompts, the requests it is sent, and how its verdicts are read.

Two uses, chosen in the pipeline:

- extraction (``extraction.rule = "judge"``): the judge reads a response to a
  multiple-choice question and returns the option(s) it committed to, or NONE;
- grading (a metric with ``MetricInfo.needs_judge``, e.g. ``judge_graded``): the judge
  compares an open-ended answer with the reference and returns CORRECT or INCORRECT.

The judge is a separate model (``--judge SPEC``), asked greedily with a fixed budget.
Its prompts are versioned: the version goes into the pipeline card and every record,
so a judged score always says which judge prompt produced it.  Verdicts are read as
strict JSON first; a tolerant regex is a *counted* fallback (``parse_status``), and an
unreadable verdict is an invalid response with its reason — never a silent zero.

Pure: no I/O (the runner sends the requests).
"""

from __future__ import annotations

import json
import re

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.pipeline.types import Message, Question, Request

__all__ = [
    "EXTRACTION_PROMPT_VERSION",
    "GRADING_PROMPT_VERSION",
    "JUDGE_PARAMS",
    "JudgeCard",
    "JudgeParams",
    "JudgePrompts",
    "extraction_request",
    "grading_request",
    "parse_extraction",
    "parse_grading",
    "judge_card",
]

EXTRACTION_PROMPT_VERSION = "benchaudit.judge.extraction/1"
GRADING_PROMPT_VERSION = "benchaudit.judge.grading/1"


# Greedy and short: a verdict is one small JSON object.
@with_config(ConfigDict(extra="forbid"))
class JudgeParams(TypedDict):
    """The judge's inference parameters (its requests' ``params``)."""

    temperature: float
    max_tokens: int


@with_config(ConfigDict(extra="forbid"))
class JudgePrompts(TypedDict):
    """The versions of the judge's two prompts."""

    extraction: str
    grading: str


@with_config(ConfigDict(extra="forbid"))
class JudgeCard(TypedDict):
    """What a pipeline card says about its judge (:func:`judge_card`; the card adds ``prompts_sha256``)."""

    model: str
    prompts: JudgePrompts
    params: JudgeParams


JUDGE_PARAMS: JudgeParams = {"temperature": 0.0, "max_tokens": 256}

_EXTRACTION_SYSTEM = (
    "You are an exact grader's assistant. You read another model's response to a multiple-choice question "
    "and report which option letter(s) the response commits to as its final answer. You never answer the "
    "question yourself. Reply with one JSON object and nothing else."
)
_EXTRACTION_USER = """Question:
{question}

Option letters: {labels}

Response to read:
<<<
{response}
>>>

Which option letter(s) does the response commit to as its final answer? If it commits to none, or to
several alternatives without choosing, the answer is NONE. Reply with exactly: {{"answer": "<letters or NONE>"}}"""

_GRADING_SYSTEM = (
    "You are a strict grader of short answers in cybersecurity. You compare a candidate answer with the "
    "reference answer and decide whether the candidate is correct: it states the same key facts as the "
    "reference and contradicts none of them. Reply with one JSON object and nothing else."
)
_GRADING_USER = """Question:
{question}

Reference answer:
{reference}

Candidate answer:
<<<
{response}
>>>

Is the candidate answer correct? Reply with exactly: {{"verdict": "CORRECT"}} or {{"verdict": "INCORRECT"}}"""

_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
_FALLBACK_ANSWER = re.compile(r"ANSWER\W{0,4}([A-Z]{1,8}|NONE)\b")  # matched on the upper-cased text
_FALLBACK_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b")


def extraction_request(question: Question, response: str, labels: tuple[str, ...]) -> Request:
    """The judge request that asks which option ``response`` committed to."""
    user = _EXTRACTION_USER.format(
        question=question.text or question.prompt or "", labels=", ".join(labels), response=response
    )
    return Request(
        mode="chat",
        messages=(Message(role="system", content=_EXTRACTION_SYSTEM), Message(role="user", content=user)),
        params={**JUDGE_PARAMS},
    )


def grading_request(question: Question, response: str) -> Request:
    """The judge request that grades an open-ended ``response`` against the reference (the gold)."""
    user = _GRADING_USER.format(
        question=question.text or question.prompt or "", reference=question.gold, response=response
    )
    return Request(
        mode="chat",
        messages=(Message(role="system", content=_GRADING_SYSTEM), Message(role="user", content=user)),
        params={**JUDGE_PARAMS},
    )


def _json_field(text: str, key: str) -> str | None:
    for match in _JSON_OBJECT.finditer(text):
        try:
            value = json.loads(match.group(0)).get(key)
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(value, str):
            return value.strip()
    return None


def parse_extraction(text: str, labels: tuple[str, ...]) -> tuple[str | None, str]:
    """(answer, parse_status): the committed letters (sorted) or "NONE"; status json/fallback/failed."""

    def normalise(value: str) -> str | None:
        value = value.strip().upper().replace(",", "").replace(" ", "")
        if value == "NONE":
            return "NONE"
        letters = "".join(sorted(set(value)))
        return letters if letters and set(letters) <= set(labels) else None

    raw = _json_field(text, "answer")
    if raw is not None and normalise(raw) is not None:
        return normalise(raw), "json"
    match = _FALLBACK_ANSWER.search(text.upper())
    if match and normalise(match.group(1)) is not None:
        return normalise(match.group(1)), "fallback"
    return None, "failed"


def parse_grading(text: str) -> tuple[str | None, str]:
    """(verdict, parse_status): "CORRECT" / "INCORRECT"; status json/fallback/failed."""
    raw = _json_field(text, "verdict")
    if raw is not None and raw.upper() in ("CORRECT", "INCORRECT"):
        return raw.upper(), "json"
    match = _FALLBACK_VERDICT.search(text.upper())
    if match:
        return match.group(1), "fallback"
    return None, "failed"


def judge_card(model_label: str) -> JudgeCard:
    """What a pipeline card says about the judge it was scored with."""
    return {
        "model": model_label,
        "prompts": {"extraction": EXTRACTION_PROMPT_VERSION, "grading": GRADING_PROMPT_VERSION},
        "params": JudgeParams(**JUDGE_PARAMS),
    }
