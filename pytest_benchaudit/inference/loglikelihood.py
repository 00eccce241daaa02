"""Asking a log-likelihood request: one echoed completion per continuation, read back into one answer.

A request with ``continuations`` (``inference.request = "loglikelihood"``, see
:mod:`pytest_benchaudit.prompt.loglikelihood_request`) is sent and read the way lm-eval 0.4.13's
``local-completions`` model sends and reads its ``loglikelihood`` requests
(``lm_eval/api/model.py`` ``TemplateLM.loglikelihood`` / ``_encode_pair``,
``lm_eval/models/api_models.py`` ``_loglikelihood_tokens``, ``lm_eval/models/openai_completions.py``):
for each continuation one completion with the request's parameters (``echo: true``, ``logprobs``,
``max_tokens``, ...), read as ``sum(token_logprobs[ctxlen:-1])``.  The answers become one
:class:`Generation` whose ``continuations`` hold each continuation's tokens and log-probabilities:
the question is one item, one cache entry, one record, asked again as a whole by ``--resume`` and
``--repeats``.

What is sent and where the context ends (``ctxlen``) depend on lm-eval's tokenizer:

* **The endpoint's own** (lm-eval's ``remote`` tokenizer, used when the endpoint serves
  ``/tokenizer_info`` and ``/tokenize``: :class:`Tokenizer`): trailing spaces of the context move to
  the continuation; context + continuation and the context alone are tokenized; the
  continuation's tokens are those of the whole past the context's count; the prompt sent is the
  context's tokens then those, decoded by ``/detokenize`` (left-truncated to lm-eval's 2,047
  tokens), and ``ctxlen`` is the context's count.  A tokenizer that merges the context's end with
  the continuation (``": A"`` one token) leaves the continuation no token of its own: lm-eval then
  sends the context alone and reads nothing (log-likelihood 0 for each option), and so does this.
* **None served** (lm-eval would load the Hugging Face tokenizer the model name names): the prompt
  is context + continuation and ``ctxlen`` is counted on the echo (the tokens that start inside
  the context; a token that holds no character, a BOS the server prepends, is not counted, as
  lm-eval's tokenizer does not count it).  Exactly lm-eval's request and cut when its tokenizer
  is the endpoint's and does not merge; an echoed token that starts in the context and runs into
  the continuation shows that it merges, and the continuation is not read (``missing``, the reason
  named): what lm-eval would send then depends on a tokenizer the endpoint does not serve.

The last echoed token is left out, as lm-eval's ``[ctxlen:-1]`` leaves it out: the token generated
after the prompt, or, from an endpoint that echoes and generates nothing, the continuation's own
last token (its ``note`` says so; lm-eval sums what is left, 0 when nothing is).

The prompt counts as echoed when the answer's ``text`` starts with it and some token lies inside
it (OpenAI-style offsets of an answer that was not echoed start at the prompt's end).

What cannot be read is said per continuation (``ContinuationLogprobs.missing``): no
log-probabilities in the answer, the prompt not echoed, a null log-probability, one that is not a
finite number (NaN, an infinity), a context that merges into the continuation on an endpoint that
does not serve its tokenizer.  The extraction rule turns that into the invalid reason ``no_logprobs``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from pytest_benchaudit.pipeline.record_documents import TokenUsage
from pytest_benchaudit.pipeline.types import ContinuationLogprobs, EchoedTokens, Generation, Request

__all__ = [
    "MAX_LENGTH",
    "MERGED",
    "NO_GENERATED",
    "Planned",
    "Tokenizer",
    "TokenizerError",
    "ask_loglikelihood",
    "echoed_tokens",
    "plan",
    "read_continuation",
    "sub_requests",
]

# lm-eval's TemplateAPI max_length 2048, less one token for the generated one.
MAX_LENGTH = 2047
# How a continuation's ``missing`` / ``note`` begins for the two edges (inference/context.py counts them).
MERGED = "the endpoint's tokenizer merges the context's end with the continuation"
NO_GENERATED = "the endpoint echoed no generated token"


class TokenizerError(Exception):
    """The endpoint's tokenizer did not answer (the question is then not asked: ``Generation.error``)."""


class Tokenizer(Protocol):
    """The endpoint's tokenizer as lm-eval's remote tokenizer asks it (``POST /tokenize`` without
    special tokens, ``POST /detokenize``); raises :class:`TokenizerError`."""

    async def encode(self, text: str) -> list[int]: ...

    async def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class Planned:
    """What is sent for one continuation: the prompt, and lm-eval's ``ctxlen`` when the endpoint's
    tokenizer counted it (``None``: counted on the echo)."""

    prompt: str
    context_tokens: int | None = None


async def plan(context: str, continuation: str, tokenizer: Tokenizer | None) -> Planned:
    """lm-eval's request for ``continuation`` after ``context`` (see the module)."""
    if tokenizer is None:
        return Planned(context + continuation)
    spaces = len(context) - len(context.rstrip())
    if spaces:  # _encode_pair: trailing spaces belong to the continuation
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = await tokenizer.encode(context + continuation)
    context_ids = await tokenizer.encode(context)
    continuation_ids = whole[len(context_ids) :]
    sent = (context_ids + continuation_ids)[-MAX_LENGTH:]
    ctxlen = len(context_ids) - max(0, len(context_ids) + len(continuation_ids) - MAX_LENGTH)
    return Planned(await tokenizer.decode(sent), ctxlen)


def sub_requests(request: Request, prompts: Sequence[str] | None = None) -> list[Request]:
    """The completions sent for ``request``: one per continuation, ``prompt`` = ``prompts[i]`` (by
    default context + continuation)."""
    context = request.prompt or ""
    texts = list(prompts) if prompts is not None else [context + c for c in request.continuations]
    return [
        Request(
            mode="completion",
            prompt=text,
            params=dict(request.params),
            adjustments=request.adjustments,
            sample=request.sample,
            repeat=request.repeat,
        )
        for text in texts
    ]


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
        raise ValueError(
            f"logprobs lists of unequal length: {len(tokens)} tokens, {len(values)} token_logprobs, "
            f"{len(offsets)} text_offset"
        )
    text = choice.get("text")
    return EchoedTokens(
        text=text if isinstance(text, str) else "",
        tokens=tuple(str(t) for t in tokens),
        logprobs=tuple(None if v is None else float(v) for v in values),
        offsets=tuple(int(o) for o in offsets),
    )


def _ends(echoed: EchoedTokens) -> list[int]:
    """Where each echoed token ends (the next one's offset; the text's end for the last)."""
    return [*echoed.offsets[1:], len(echoed.text)]


def _counted_context(echoed: EchoedTokens, context: str) -> tuple[int, str | None]:
    """lm-eval's ``ctxlen`` counted on the echo (tokens that start inside the context, those holding no
    character left out), or why it cannot be: a token that runs from the context into the continuation."""
    cut = len(context.rstrip())  # _encode_pair moves trailing spaces to the continuation
    ends = _ends(echoed)
    count = 0
    for token, start, end in zip(echoed.tokens, echoed.offsets, ends):
        if start >= cut:
            break
        if end > cut:
            return 0, (
                f"{MERGED} (token {token!r} runs "
                f"from character {start} past the context's end at {cut}): lm-eval cuts context and "
                "continuation with its own tokenizer, which this endpoint does not serve (no /tokenizer_info "
                "and /tokenize: lm-eval loads the Hugging Face tokenizer the model name names), so what it "
                "would send and read cannot be known here; an endpoint serving its tokenizer (vLLM "
                "--enable-tokenizer-info-endpoint) is read exactly"
            )
        count += end > start
    return count, None


def read_continuation(
    echoed: EchoedTokens | None, context: str, continuation: str, planned: Planned | None = None
) -> ContinuationLogprobs:
    """lm-eval's reading of ``continuation`` after ``context`` from one echoed answer to ``planned``
    (by default context + continuation, ``ctxlen`` counted on the echo; see the module)."""
    planned = planned or Planned(context + continuation)
    sent = planned.prompt if planned.prompt != context + continuation else None
    kept = {"context_tokens": planned.context_tokens, "prompt": sent}
    if echoed is None or not echoed.tokens:
        return ContinuationLogprobs(
            continuation=continuation,
            missing="the answer has no token log-probabilities "
            "(choices[0].logprobs without tokens, token_logprobs and text_offset)",
            **kept,
        )
    if not echoed.text.startswith(planned.prompt) or not any(o < len(planned.prompt) for o in echoed.offsets):
        return ContinuationLogprobs(
            continuation=continuation,
            missing="the prompt was not echoed (the answer's text "
            "does not start with the prompt, or no token lies in it: the endpoint ignored "
            "echo=true)",
            **kept,
        )
    if planned.context_tokens is None:
        ctxlen, merged = _counted_context(echoed, context)
        if merged:
            return ContinuationLogprobs(continuation=continuation, missing=merged, **kept)
    else:
        ctxlen = planned.context_tokens
    chosen = range(ctxlen, len(echoed.tokens) - 1)  # token_logprobs[ctxlen:-1]
    tokens = tuple(echoed.tokens[i] for i in chosen)
    values = [echoed.logprobs[i] for i in chosen]
    if any(v is None for v in values):
        return ContinuationLogprobs(
            continuation=continuation,
            tokens=tokens,
            missing="a continuation token's log-probability is null (lm-eval's token_logprobs[ctxlen:-1])",
            **kept,
        )
    bad = next((v for v in values if v is not None and not math.isfinite(v)), None)
    if bad is not None:  # NaN or an infinity: no sum to compare (and no JSON number to record)
        return ContinuationLogprobs(
            continuation=continuation,
            tokens=tokens,
            missing=f"a continuation token's log-probability is not a finite number ({bad})",
            **kept,
        )
    notes = []
    if sent is not None:
        notes.append(f"lm-eval's tokenizer cut sends {sent[-24:]!r} at the prompt's end, not context + continuation")
    if echoed.offsets[-1] < len(planned.prompt):  # no token starts at the prompt's end: none was generated
        notes.append(
            f"{NO_GENERATED}: lm-eval's token_logprobs[ctxlen:-1] leaves out the "
            f"prompt's last token {echoed.tokens[-1]!r}"
        )
    if not tokens:
        notes.append("no token is read: log-likelihood 0, as lm-eval sums nothing")
    return ContinuationLogprobs(
        continuation=continuation,
        tokens=tokens,
        logprobs=tuple(float(v) for v in values if v is not None),
        note="; ".join(notes) or None,
        **kept,
    )


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


async def ask_loglikelihood(
    request: Request, generate: Callable[[Request], Awaitable[Generation]], tokenizer: Tokenizer | None = None
) -> Generation:
    """Send one completion per continuation of ``request`` with ``generate`` (concurrently) and
    combine the answers: ``continuations`` read from each echo, usage added up, the attempts
    counted.  ``tokenizer``: the endpoint's, when it serves one lm-eval would use (see the module).
    A request that failed (or the tokenizer, for one continuation) makes the whole answer fail with
    its error, naming the continuation: a question is scored on all its continuations or not at all."""
    context = request.prompt or ""
    try:
        planned = [await plan(context, c, tokenizer) for c in request.continuations]
    except TokenizerError as err:
        return Generation(error=f"not sent: the endpoint's tokenizer failed: {err}", attempts=0)
    answers = await asyncio.gather(*(generate(sub) for sub in sub_requests(request, [p.prompt for p in planned])))
    attempts = sum(a.attempts for a in answers)
    latency = max((a.latency_s for a in answers), default=0.0)
    usage = _summed_usage([a.usage for a in answers])
    for continuation, answer in zip(request.continuations, answers):
        if answer.error is not None:
            # Appended, not prefixed: what the error starts with ("endpoint_down: ", "not sent: ") is read.
            return Generation(
                error=f"{answer.error} (continuation {continuation!r})",
                attempts=attempts,
                latency_s=latency,
                usage=usage,
                served_model=answer.served_model,
            )
    return Generation(
        text="",
        finish_reason=answers[0].finish_reason if answers else None,
        usage=usage,
        latency_s=latency,
        attempts=attempts,
        served_model=next((a.served_model for a in answers if a.served_model), None),
        continuations=tuple(
            read_continuation(a.echoed, context, c, p) for c, a, p in zip(request.continuations, answers, planned)
        ),
    )
