"""Value objects that flow through the five stages.

``Question`` (dataset) -> ``Request`` (prompt) -> ``Generation`` (inference)
-> ``Extraction`` (extraction) -> ``Score`` (scoring).

They are plain frozen pydantic models so that they serialise to records and
travel between pytest-xdist workers unchanged.  Nothing here does I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

__all__ = [
    "Question",
    "Message",
    "Request",
    "Generation",
    "Extraction",
    "Score",
    "MetricInfo",
    "InvalidReason",
    "INVALID_REASONS",
    "InvalidStage",
    "INVALID_STAGE",
    "ENDPOINT_DOWN_PREFIX",
    "HEDGED_PREFIX",
    "UnscorablePrediction",
    "ContinuationLogprobs",
    "EchoedTokens",
    "NO_LOGPROBS_PREFIX",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _FrozenLater(_Frozen):
    # What only an answer makes (generation, extraction, score): its validator is built at the first
    # one, after the first requests are sent, not while pytest starts up (~2 ms a model).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Question(_Frozen):
    """One benchmark question as read from the data file.

    ``choices`` maps option labels ("A".."D") to option text, in order.
    ``prompt`` is a ready-made prompt shipped by the dataset (CTI-Bench), if any.
    ``gold`` is the label as stored in the file (not normalised: quirks such as a
    lower-case ``b`` or an empty SecEval answer are kept for the audit).
    """

    benchmark: str
    task: str
    id: str
    index: int = Field(description="0-based row position in the data file")
    text: str = ""
    choices: dict[str, str] = Field(default_factory=dict)
    gold: str
    prompt: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class Message(_Frozen):
    role: Literal["system", "user", "assistant"]
    content: str


class Request(_Frozen):
    """What is sent to a model: chat messages or a completion prompt, plus parameters.

    ``params`` holds only the inference parameters that the pipeline *specifies*;
    an unspecified field is absent, so the endpoint's own default applies and the
    record shows that nothing was sent.
    """

    mode: Literal["chat", "completion"]
    messages: tuple[Message, ...] = ()
    prompt: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    adjustments: tuple[str, ...] = Field(
        default=(), description="changes a provider limit forced on the pipeline's request"
    )
    sample: int = Field(
        default=0,
        description="0 for the first ask, n for the n-th re-ask; part of the generation's identity, never sent",
    )
    repeat: int = Field(
        default=0,
        ge=0,
        description="which of the K asks of inference.repeats this is "
        "(0-based); part of the generation's identity, never sent",
    )
    # inference.request = "loglikelihood": the texts scored after ``prompt`` (lm-eval's " A".." D"),
    # one completion request each with prompt = prompt + continuation (inference/loglikelihood.py).
    continuations: tuple[str, ...] = ()

    @model_serializer(mode="wrap")
    def _repeat_zero_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``repeat`` 0 and no ``continuations`` are left out of the dump: a request asked once, for a
        generation, keeps the identity, cache key and stored form it had before these fields existed
        (caches, records and replays stay valid)."""
        data: dict[str, Any] = handler(self)
        if not self.repeat:
            data.pop("repeat", None)
        if not self.continuations:
            data.pop("continuations", None)
        return data

    @cached_property
    def identity(self) -> str:
        """Canonical JSON of the whole request (cached: the engine looks a request up more than once).

        An in-memory key only (the generation cache builds its own): orjson with sorted keys, ~3x
        faster than ``json.dumps``; a value orjson cannot write (an integer past 64 bits) takes
        ``json.dumps``, marked so that no request's key equals another's."""
        data = self.model_dump(mode="json")
        try:
            return orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            return "\x00json:" + json.dumps(data, sort_keys=True, separators=(",", ":"))


class EchoedTokens(_FrozenLater):
    """The token log-probabilities of a completion sent with ``echo`` (prompt tokens included):
    ``choices[0].logprobs`` as the legacy completions API returns it.  ``offsets`` are the
    tokens' ``text_offset`` (characters into the echoed text); ``None`` log-probabilities are kept
    (an API gives none for the first prompt token)."""

    text: str = ""
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float | None, ...] = ()
    offsets: tuple[int, ...] = ()


class ContinuationLogprobs(_FrozenLater):
    """One continuation of a log-likelihood request and what the endpoint said about it.

    ``tokens`` / ``logprobs``: the echoed tokens lm-eval reads for it, ``token_logprobs[ctxlen:-1]``
    (the context's token count on, the last echoed token left out: the one generated after the
    prompt, or the continuation's own when the endpoint generated none).  ``missing``: why they
    could not be read (no log-probabilities, the prompt not echoed, a tokenizer that merges the
    context's end with the continuation where lm-eval's cut cannot be known), ``None`` when they
    were.  Set only where they tell something (left out of the dump otherwise): ``context_tokens``
    (``ctxlen``, counted by the endpoint's tokenizer as lm-eval's remote tokenizer counts it),
    ``prompt`` (what was sent, when it is not context + continuation: lm-eval sends the tokens it
    cut, decoded) and ``note`` (what lm-eval's cut did that a reader would not expect).
    """

    continuation: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()
    missing: str | None = None
    context_tokens: int | None = None
    prompt: str | None = None
    note: str | None = None

    @model_serializer(mode="wrap")
    def _unset_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The fields added after the first stored records are left out when unset: a record keeps the
        form it had (its line, a replay's key)."""
        data: dict[str, Any] = handler(self)
        for name in ("context_tokens", "prompt", "note"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def loglikelihood(self) -> float:
        """The continuation's log-likelihood: the sum of its tokens' log-probabilities (lm-eval's)."""
        return float(sum(self.logprobs))


class Generation(_FrozenLater):
    """A model's answer exactly as the endpoint returned it (nothing stripped).

    ``error`` is set when the request failed for good (after retries); ``text`` is
    then empty.  ``reasoning`` carries a separate ``reasoning_content`` field when the
    server returns one.  ``top_logprobs`` is the first generated token's top
    alternatives (token -> log-probability) when log-probabilities were requested.
    """

    text: str = ""
    reasoning: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 1
    top_logprobs: tuple[dict[str, float], ...] | None = None
    served_model: str | None = None
    # True when the generation cache answered (no request was sent this run).
    from_cache: bool = False
    # A log-likelihood request's answer: one entry per continuation, in the request's order.
    continuations: tuple[ContinuationLogprobs, ...] | None = None
    # A completion sent with ``echo``: its token log-probabilities, read into ``continuations``.
    echoed: EchoedTokens | None = None


# Why an answer could not be read: the only values a record's ``invalid_reason`` takes (a Literal, so
# mypy's strict equality flags a comparison with a misspelt reason; the JSON holds these strings).
InvalidReason = Literal[
    "inference_error",  # the request failed (HTTP error, timeout, garbage) after retries
    "empty",  # the model returned no answer text at all
    "truncated",  # stopped by the token budget before an answer could be read
    "unclosed_reasoning",  # a <think> span was opened and never closed
    "unparseable",  # text present, but the extraction rule found no answer in it (or the metric could not read it)
    "hedged",  # the answer names several options where one is asked for ("Answer: A or B")
    "judge_error",  # the judge failed (request error or an unreadable verdict)
    "endpoint_down",  # not asked: the model's endpoint was down or refused the key (circuit breaker)
    "no_logprobs",  # a log-likelihood request came back without echoed log-probabilities to read
]

INVALID_REASONS: frozenset[str] = frozenset(get_args(InvalidReason))

# The pipeline stage an invalid response is charged to (a record's ``invalid_stage``).
InvalidStage = Literal["inference", "extraction"]

# A Generation whose error starts with this was never sent (inference/breaker.py): extraction
# records it as ``endpoint_down``, and --resume asks the question again.
ENDPOINT_DOWN_PREFIX = "endpoint_down: "

# A rule that finds a hedge between options ("Answer: A or B") returns no prediction and a detail
# starting with this: extraction records it as ``hedged``, not as ``unparseable``.
HEDGED_PREFIX = "hedged: "

# A rule that needs log-probabilities the endpoint did not return (a log-likelihood request answered
# without ``logprobs`` or without ``echo``) returns no prediction and a detail starting with this.
NO_LOGPROBS_PREFIX = "no_logprobs: "

# Which pipeline stage an invalid response is charged to.
INVALID_STAGE: dict[InvalidReason, InvalidStage] = {
    "inference_error": "inference",
    "empty": "inference",
    "truncated": "inference",
    "unclosed_reasoning": "inference",
    "unparseable": "extraction",
    "hedged": "extraction",
    "judge_error": "extraction",
    "endpoint_down": "inference",
    "no_logprobs": "inference",
}


class Extraction(_FrozenLater):
    """The answer an extraction rule read from a generation, or why it could not."""

    prediction: str | None = None
    invalid_reason: InvalidReason | None = None
    answer_text: str = Field(default="", description="the text the rule looked at (reasoning removed)")
    detail: str = ""

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None


class Score(_FrozenLater):
    """Per-item result of a metric. ``value`` is the number aggregated; ``correct`` the pass/fail.

    ``extras`` are further per-item numbers a benchmark reports next to the headline
    (e.g. TAA "plausible"); the summary gives their means over the same denominator.
    """

    value: float
    correct: bool
    extras: dict[str, float] = Field(default_factory=dict)


class UnscorablePrediction(ValueError):
    """Raised by a metric for a prediction it cannot read (a CVSS vector the ``cvss`` library
    rejects, a score that is not a number): the item is then invalid (``unparseable``), never a
    valid answer with a made-up value."""


@dataclass(frozen=True)
class MetricInfo:
    """What an aggregator and a report need to know about a metric.

    ``invalid_value`` is what an item without a readable answer scores under no credit
    (``scoring.invalid_credit = 0``, the default) when the denominator is ``total``: 0 on a
    share (accuracy, F1, closeness), the named worst case on an error metric (a MAD has no
    neutral value; ``worst_case`` says what it is), so the choice is visible.  A credit ``c``
    moves it that share of the way to the best value (``best_value``): see
    :func:`pytest_benchaudit.scoring.metrics.invalid_score`.
    """

    lower_is_better: bool
    kind: Literal["binary", "continuous"]
    description: str
    invalid_value: float = 0.0
    # Per-task data files the metric reads (e.g. alias graphs), by resource name.
    resources: tuple[str, ...] = ()
    # Graded by an LLM judge: such items are collected but never scored without one.
    needs_judge: bool = False
    # Extras an invalid item gets (so extras share the headline's denominator under "total").
    invalid_extras: tuple[tuple[str, float], ...] = ()
    # What ``invalid_value`` is on an error metric, in words ("the largest possible difference of two
    # CVSS base scores"); empty on a share, where it is 0.
    worst_case: str = ""
    # The per-item range when a *valid* answer can score outside [invalid_value, best_value]
    # (AthenaBench closeness: 1 - |d|/7.7 reaches 1 - 10/7.7 below its no-credit 0); None otherwise.
    value_range: tuple[float, float] | None = None

    @property
    def best_value(self) -> float:
        """The best per-item value: 0 on an error metric, 1 on a share."""
        return 0.0 if self.lower_is_better else 1.0
