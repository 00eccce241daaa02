"""Asking a log-likelihood request: one echoed completion per continuation, read back into one answer.

A request with ``continuations`` (``inference.request = "loglikelihood"``, see
:mod:`pytest_benchaudit.prompt.loglikelihood`) is sent the way lm-eval 0.4.13's
``local-completions`` model sends its ``loglikelihood`` requests
(``lm_eval/models/openai_completions.py``): for each continuation one completion with
``prompt`` = context + continuation and the request's parameters (``echo: true``, ``logprobs``,
``max_tokens``, ...).  The four answers become one :class:`Generation` whose ``continuations``
hold each continuation's echoed tokens and log-probabilities: the question is one item, one cache
entry, one record, asked again as a whole by ``--resume`` and ``--repeats``.

Which echoed tokens are the continuation's: those whose ``text_offset`` is at or past the length
of the context and before the end of context + continuation.  The token generated after the
prompt (``max_tokens`` >= 1) starts at that end and is left out, as lm-eval's
``token_logprobs[ctxlen:-1]`` leaves out the last token; lm-eval counts ``ctxlen`` in tokens of the
context tokenized alone, which is the same cut wherever the tokenizer does not merge the
context's last characters with the continuation's first.

The prompt counts as echoed when the answer's ``text`` starts with it and some token lies inside
it (OpenAI-style offsets of an answer that was not echoed start at the prompt's end).

What cannot be read is said per continuation (``ContinuationLogprobs.missing``): no
log-probabilities in the answer, the prompt not echoed, no token starting inside the continuation,
a null log-probability, one that is not a finite number (NaN, an infinity).  The extraction rule turns that into the invalid reason ``no_logprobs``.
"""

from __future__ import annotations

import asyncio
import math
from typing import Awaitable, Callable, Mapping, Sequence, cast

from pytest_benchaudit.pipeline.documents import TokenUsage
from pytest_benchaudit.pipeline.types import ContinuationLogprobs, EchoedTokens, Generation, Request

__all__ = ["ask_loglikelihood", "echoed_tokens", "read_continuation", "sub_requests"]


def sub_requests(request: Request) -> list[Request]:
    """The completions sent for ``request``: one per continuation, ``prompt`` = context + continuation."""
    context = request.prompt or ""
    return [Request(mode="completion", prompt=context + continuation, params=dict(request.params),
                    adjustments=request.adjustments, sample=request.sample, repeat=request.repeat)
            for continuation in request.continuations]


def echoed_tokens(choice: Mapping[str, object]) -> EchoedTokens | None:
    """The echoed tokens of a legacy completions ``choice`` (``logprobs.tokens``, ``token_logprobs``,
    ``text_offset``), or ``None`` when its ``logprobs`` does not carry all three."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    tokens, values, offsets = (logprobs.get(k) for k in ("tokens", "token_logprobs", "text_offset"))
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(offsets, list)):
        return None
    if not len(tokens) == len(values) == len(offsets):
        raise ValueError(f"logprobs lists of unequal length: {len(tokens)} tokens, {len(values)} token_logprobs, "
                         f"{len(offsets)} text_offset")
    text = choice.get("text")
    return EchoedTokens(text=text if isinstance(text, str) else "", tokens=tuple(str(t) for t in tokens),
                        logprobs=tuple(None if v is None else float(v) for v in values),
                        offsets=tuple(int(o) for o in offsets))


def read_continuation(echoed: EchoedTokens | None, context: str, continuation: str) -> ContinuationLogprobs:
    """The log-probabilities of ``continuation`` after ``context`` in one echoed answer (see the module)."""
    if echoed is None or not echoed.tokens:
        return ContinuationLogprobs(continuation=continuation, missing="the answer has no token log-probabilities "
                                    "(choices[0].logprobs without tokens, token_logprobs and text_offset)")
    start, end = len(context), len(context) + len(continuation)
    if not echoed.text.startswith(context + continuation) or not any(offset < end for offset in echoed.offsets):
        return ContinuationLogprobs(continuation=continuation, missing="the prompt was not echoed (the answer's text "
                                    "does not start with the prompt, or no token lies in it: the endpoint ignored "
                                    "echo=true)")
    inside = [i for i, offset in enumerate(echoed.offsets) if start <= offset < end]
    if not inside:
        return ContinuationLogprobs(continuation=continuation, missing=f"no echoed token starts inside the "
                                    f"continuation (characters {start}..{end} of the prompt)")
    values = [echoed.logprobs[i] for i in inside]
    if any(v is None for v in values):
        return ContinuationLogprobs(continuation=continuation, tokens=tuple(echoed.tokens[i] for i in inside),
                                    missing="a continuation token's log-probability is null")
    bad = next((v for v in values if v is not None and not math.isfinite(v)), None)
    if bad is not None:  # NaN or an infinity: no sum to compare (and no JSON number to record)
        return ContinuationLogprobs(continuation=continuation, tokens=tuple(echoed.tokens[i] for i in inside),
                                    missing=f"a continuation token's log-probability is not a finite number ({bad})")
    return ContinuationLogprobs(continuation=continuation, tokens=tuple(echoed.tokens[i] for i in inside),
                                logprobs=tuple(float(v) for v in values if v is not None))


def _summed_usage(usages: Sequence[Mapping[str, object]]) -> TokenUsage:
    """The requests' token usage added up (integer counts; anything else as the first answer says)."""
    total: dict[str, object] = dict(usages[0]) if usages else {}
    for usage in usages[1:]:
        for key, value in usage.items():
            so_far = total.get(key)
            if isinstance(value, int) and isinstance(so_far, int):
                total[key] = so_far + value
            else:
                total.setdefault(key, value)
    # The endpoints' usage objects (JSON as they sent them), summed key by key: one of the same shape.
    return cast(TokenUsage, total)


async def ask_loglikelihood(request: Request, generate: Callable[[Request], Awaitable[Generation]]) -> Generation:
    """Send one completion per continuation of ``request`` with ``generate`` (concurrently) and
    combine the answers: ``continuations`` read from each echo, usage added up, the attempts
    counted.  A request that failed makes the whole answer fail with its error (naming the
    continuation): a question is scored on all its continuations or not at all."""
    asked = sub_requests(request)
    answers = await asyncio.gather(*(generate(sub) for sub in asked))
    attempts = sum(a.attempts for a in answers)
    latency = max((a.latency_s for a in answers), default=0.0)
    usage = _summed_usage([a.usage for a in answers])
    for continuation, answer in zip(request.continuations, answers):
        if answer.error is not None:
            # Appended, not prefixed: what the error starts with ("endpoint_down: ", "not sent: ") is read.
            return Generation(error=f"{answer.error} (continuation {continuation!r})", attempts=attempts,
                              latency_s=latency, usage=usage, served_model=answer.served_model)
    context = request.prompt or ""
    return Generation(
        text="", finish_reason=answers[0].finish_reason if answers else None, usage=usage, latency_s=latency,
        attempts=attempts, served_model=next((a.served_model for a in answers if a.served_model), None),
        continuations=tuple(read_continuation(a.echoed, context, c) for c, a in zip(request.continuations, answers)),
    )
