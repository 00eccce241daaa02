"""OpenAI-style response bodies of the scripted server: error bodies and log-probabilities."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "chat_logprobs",
    "completion_logprobs",
    "count_words",
    "echo_pieces",
    "echoed_logprobs",
    "error_body",
    "prompt_words",
]

from pytest_benchaudit.testing.scripts import (
    text_of,
)

# --------------------------------------------------------------------------- responses

_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", None),
    408: ("timeout_error", None),
    413: ("invalid_request_error", None),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def error_body(
    status: int, message: str, *, param: str | None = None, code: Any = None, type_: str | None = None
) -> dict[str, Any]:
    """An OpenAI-style error object; type and code are guessed from the status."""
    default_type, default_code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    error: dict[str, Any] = {
        "message": message,
        "type": type_ or default_type,
        "param": param,
        "code": code if code is not None else (default_code or str(status)),
    }
    return {"error": error}


def count_words(text: str | None) -> int:
    return len(text.split()) if text else 0


def prompt_words(body: Mapping[str, Any]) -> int:
    messages = body.get("messages")
    if isinstance(messages, list):
        return sum(count_words(text_of(m.get("content"))) for m in messages if isinstance(m, dict))
    return count_words(text_of(body.get("prompt")))


def _ranked(top: Mapping[str, float], n: int) -> list[tuple[str, float]]:
    """The ``n`` best (token, logprob) pairs, best first; ties keep dict order."""
    return sorted(top.items(), key=lambda kv: -kv[1])[: max(n, 0)]


def _requested_n(value: Any) -> int | None:
    """An integer count from a request field; ``None`` when absent or not an int (bools excluded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def chat_logprobs(body: Mapping[str, Any], top: Mapping[str, float]) -> dict[str, Any] | None:
    if body.get("logprobs") is not True or not top:
        return None
    n = _requested_n(body.get("top_logprobs")) or 0
    token, logprob = _ranked(top, 1)[0]
    return {
        "content": [
            {
                "token": token,
                "logprob": logprob,
                "bytes": list(token.encode("utf-8")),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))} for t, lp in _ranked(top, n)
                ],
            }
        ]
    }


def completion_logprobs(body: Mapping[str, Any], top: Mapping[str, float]) -> dict[str, Any] | None:
    n = _requested_n(body.get("logprobs"))
    if n is None or not top:
        return None
    token, logprob = _ranked(top, 1)[0]
    return {
        "tokens": [token],
        "token_logprobs": [logprob],
        "top_logprobs": [dict(_ranked(top, n))],
        "text_offset": [0],
    }


_PIECE = re.compile(r"\s*\S+|\s+")


def echo_pieces(text: str) -> list[str]:
    """The scripted server's tokens of an echoed prompt: whitespace joined to the word after it
    (``"Answer: A"`` is ``"Answer:"``, ``" A"``), every character in one token."""
    return _PIECE.findall(text)


def echoed_logprobs(
    body: Mapping[str, Any],
    prompt: str,
    content: str,
    last_logprob: float,
    pieces: Callable[[str], list[str]] = echo_pieces,
) -> dict[str, Any] | None:
    """A completion's ``logprobs`` with the prompt echoed (``"echo": true``): the prompt's tokens (cut
    by ``pieces``) then ``content`` as one generated token (none when ``content`` is empty), their
    ``text_offset`` into ``prompt + content``; the first token's log-probability is null (as
    OpenAI's), the last prompt token's ``last_logprob``, every other -1.0 (the generated one -0.5).
    ``None`` when the body asked for no log-probabilities."""
    if _requested_n(body.get("logprobs")) is None:
        return None
    tokens: list[str] = [*pieces(prompt), *([content] if content else [])]
    n_prompt = len(tokens) - (1 if content else 0)
    values: list[float | None] = [-1.0 for _ in range(n_prompt)]
    values += [-0.5] if content else []
    if n_prompt:
        values[n_prompt - 1] = last_logprob
        values[0] = None if n_prompt > 1 else values[0]
    offsets: list[int] = []
    at = 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": values,
        "text_offset": offsets,
        "top_logprobs": [None if v is None else {t: v} for t, v in zip(tokens, values)],
    }
