"""Reading a 200 answer's JSON body into the fields of its :class:`~pytest_benchaudit.pipeline.types.Generation`.

:func:`parse_openai` reads OpenAI's ``chat/completions`` and ``completions`` bodies,
:func:`parse_anthropic` Anthropic's ``messages``.  Every shape they do not take (no choices, an
answer that is not text, log-probabilities that are not numbers, ...) is a
:class:`MalformedResponse`, the one error they raise for a body: the client
(:mod:`.openai_compat`) retries it and then records it as the request's error, while any other
exception is a bug in this code, never read as the model's answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NotRequired, cast

from typing_extensions import TypedDict

from pytest_benchaudit.inference.loglikelihood import echoed_tokens
from pytest_benchaudit.pipeline.record_documents import TokenUsage
from pytest_benchaudit.pipeline.types import EchoedTokens

__all__ = ["MalformedResponse", "ParsedResponse", "parse_anthropic", "parse_openai"]


class ParsedResponse(TypedDict):
    """What a 200 answer's body says: the fields of its :class:`Generation` (the client adds the
    latency and the attempts).  ``echoed`` (a completion sent with ``echo``: every prompt token's
    log-probability) or ``top_logprobs`` (the generated tokens' alternatives) from an OpenAI body;
    an Anthropic body has neither."""

    text: str
    reasoning: str | None
    finish_reason: str | None
    usage: TokenUsage
    served_model: str | None
    echoed: NotRequired[EchoedTokens | None]
    top_logprobs: NotRequired[tuple[dict[str, float], ...] | None]


class MalformedResponse(ValueError):
    """A 200 answer whose JSON is not of a shape the readers take (no choices, a content that is not
    text, log-probabilities that are not numbers, ...): the endpoint's fault, retried, then an error."""


# The JSON boundary: an object of the body as json parsed it, its values read (and checked) below.
def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedResponse(f"{what} is not an object")
    return value


def parse_openai(data: Any, echo: bool = False) -> ParsedResponse:
    """Read a chat or completion response body: the fields of its :class:`Generation` (with
    ``echo``, a completion's token log-probabilities as ``echoed``, prompt tokens included).
    A body of another shape is a :class:`MalformedResponse`."""
    if not isinstance(data, dict) or not data.get("choices"):
        raise MalformedResponse("no 'choices' in the response")
    choices = data["choices"]
    if not isinstance(choices, list):
        raise MalformedResponse("'choices' is not a list")
    choice = _object(choices[0], "choices[0]")
    if "message" in choice:
        message = _object(choice["message"] or {}, "choices[0].message")
        text = message.get("content") or ""
        reasoning = message.get("reasoning_content") or message.get("reasoning")
    elif "text" in choice:
        text = choice["text"] or ""
        reasoning = None
    else:
        raise MalformedResponse("choices[0] has neither 'message' nor 'text'")
    if not isinstance(text, str):
        raise MalformedResponse("answer content is not a string")
    fields: ParsedResponse = {
        "text": text,
        "reasoning": reasoning if isinstance(reasoning, str) else None,
        "finish_reason": choice.get("finish_reason"),
        "usage": data.get("usage") or {},
        "served_model": data.get("model"),
    }
    if echo and "message" not in choice:
        try:  # every prompt token's: read by inference/loglikelihood.py
            fields["echoed"] = echoed_tokens(choice)
        except (TypeError, ValueError) as err:  # unequal lists, a log-probability that is not a number
            raise MalformedResponse(f"choices[0].logprobs: {err}") from None
    else:
        fields["top_logprobs"] = _top_logprobs(choice.get("logprobs"))
    return fields


_ANTHROPIC_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def parse_anthropic(data: Any) -> ParsedResponse:
    """Read a Messages API response (the fields of its :class:`Generation`): text blocks are the
    answer, thinking blocks the reasoning."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise MalformedResponse("no 'content' in the response")
    blocks = [_object(b, "a content block") for b in data["content"]]
    text = "".join(_text(b, "text") for b in blocks if b.get("type") == "text")
    thinking = "".join(_text(b, "thinking") for b in blocks if b.get("type") == "thinking")
    usage = dict(_object(data.get("usage") or {}, "usage"))
    if "input_tokens" in usage:
        usage.setdefault("prompt_tokens", usage["input_tokens"])
    if "output_tokens" in usage:
        usage.setdefault("completion_tokens", usage["output_tokens"])
    stop = data.get("stop_reason")
    finish = _ANTHROPIC_STOP.get(stop, stop) if isinstance(stop, str) else None
    # The endpoint's usage object (JSON), its counts under OpenAI's names too: a TokenUsage.
    return {
        "text": text,
        "reasoning": thinking or None,
        "finish_reason": finish,
        "usage": cast(TokenUsage, usage),
        "served_model": data.get("model"),
    }


def _text(block: Mapping[str, object], key: str) -> str:
    value = block.get(key) or ""
    if not isinstance(value, str):
        raise MalformedResponse(f"a {key} block's {key!r} is not a string")
    return value


def _top_logprobs(logprobs: Any) -> tuple[dict[str, float], ...] | None:
    """The generated tokens' top alternatives (token -> log-probability), chat or legacy completions
    format; ``None`` when the answer has none.  Entries that are not of that shape (a log-probability
    that is not a number, a token that is not a string) are a :class:`MalformedResponse`."""
    if not logprobs:
        return None
    if not isinstance(logprobs, dict):
        raise MalformedResponse("choices[0].logprobs is not an object")
    try:
        if isinstance(logprobs.get("content"), list):  # chat format
            return tuple(
                {
                    _token(alt["token"]): _logprob(alt["logprob"])
                    for alt in _object(tok, "a logprobs token").get("top_logprobs") or []
                }
                for tok in logprobs["content"]
            )
        if isinstance(logprobs.get("top_logprobs"), list):  # legacy completions format
            return tuple(
                {str(k): _logprob(v) for k, v in _object(d or {}, "a top_logprobs entry").items()}
                for d in logprobs["top_logprobs"]
            )
    except (KeyError, TypeError) as err:  # an alternative without "token"/"logprob", or not an object
        raise MalformedResponse(f"choices[0].logprobs: {type(err).__name__}: {err}") from None
    return None


def _token(value: Any) -> str:
    if not isinstance(value, str):
        raise MalformedResponse("a logprobs token is not a string")
    return value


def _logprob(value: Any) -> float:
    """A log-probability as a float; one that is not a finite number (NaN, an infinity: JSON
    itself has neither, and a record could not hold it) is a :class:`MalformedResponse`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise MalformedResponse(f"a log-probability is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise MalformedResponse(f"a log-probability is not a finite number: {value!r}")
    return number
