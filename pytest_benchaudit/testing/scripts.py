"""What a scripted server answers: :class:`Call` in, :class:`Reply` out, and script builders.

A *script* is a callable ``Call -> Reply``; :func:`by_marker` and :func:`sequence` build the
common ones.  Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Call", "Reply", "Script", "by_marker", "default_script", "sequence", "text_of"]


# --------------------------------------------------------------------------- values


@dataclass
class Reply:
    """What the server answers to one completion request.

    ``content``            message content (chat) or ``text`` (completion); ``None`` is sent as JSON null.
    ``reasoning_content``  sent as ``choices[0].message.reasoning_content`` (chat only) when not ``None``.
    ``finish_reason``      ``choices[0].finish_reason``.
    ``status``             HTTP status; anything but 200 sends the JSON error body
                           ``{"error": {"message": error_message, "type": ..., "code": ...}}``.
    ``error_message``      the ``message`` of that error body.
    ``headers``            extra response headers, e.g. ``{"Retry-After": "1"}`` (sent with any status).
    ``delay``              seconds to hold the request before answering; ``None``: the server's ``latency``.
    ``raw_body``           bytes sent verbatim as the body (with ``status`` and ``content_type``),
                           replacing whatever JSON would have been sent -- for malformed responses.
    ``content_type``       the ``Content-Type`` of the response.
    ``drop_connection``    after the delay, close the socket without sending any response.
    ``top_logprobs``       first-token alternatives ``{token: logprob}``.  The sampled token is the
                           one with the highest logprob (greedy).  Sent only when the request asked
                           for log-probabilities (chat: ``"logprobs": true`` + ``"top_logprobs": N``;
                           completions: ``"logprobs": N``), truncated to the N best.
    ``continuation_logprob`` a completion asked with ``"echo": true`` and ``"logprobs": N``: the prompt
                           comes back before ``content`` with its tokens' log-probabilities (see
                           :func:`~.responses.echoed_logprobs`), the last prompt token's being this
                           (the continuation " A" of a log-likelihood request), every other -1.0.
    ``ignore_echo``        answer an ``echo`` request as a server that does not echo (content only).
    ``echo_generated``     ``False``: an ``echo`` answer is the prompt alone, no generated token after it
                           (a server that echoes and generates nothing); ``content`` is not sent.
    ``usage``              the ``usage`` object; ``None``: whitespace word counts of prompt and content.
    ``model``              the completion's ``model`` field; ``None``: the server's ``model_id`` (what
                           ``/v1/models`` lists), so a reply can name another model than the one listed.
    ``cut_body_after``     send the headers (the whole body's ``Content-Length``) and only this many
                           bytes of the body, then close the connection: a connection cut mid-body.
    ``stall_body``         send the headers and the first half of the body, wait this many seconds,
                           then the rest: a body that stalls (the client's read timeout may end it first).
    """

    content: str | None = "Answer: A"
    reasoning_content: str | None = None
    finish_reason: str = "stop"
    status: int = 200
    error_message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float | None = None
    raw_body: bytes | None = None
    content_type: str = "application/json"
    drop_connection: bool = False
    top_logprobs: dict[str, float] | None = None
    continuation_logprob: float = -1.0
    ignore_echo: bool = False
    echo_generated: bool = True
    usage: dict[str, Any] | None = None
    model: str | None = None
    cut_body_after: int | None = None
    stall_body: float | None = None


@dataclass(frozen=True)
class Call:
    """One request as the server received it.

    ``path``     the request path without query string, e.g. ``"/v1/chat/completions"``.
    ``body``     the parsed JSON body (``{}`` for a request without a body, such as ``GET /v1/models``).
    ``headers``  request headers with lower-case names (repeated headers joined with ``", "``).
    ``attempt``  1 for the first request with this exact (path, body), 2 for the next one
                 (a client retry), and so on.  Bodies are compared as canonical JSON, so key
                 order does not matter.
    """

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    attempt: int

    @property
    def last_user_text(self) -> str:
        """The last user message's text (chat) or the prompt (completion); ``""`` if none.

        Content given as a list of parts has its text parts joined with newlines; a
        prompt given as a list of strings is joined the same way.
        """
        messages = self.body.get("messages")
        if isinstance(messages, list):
            for message in reversed(messages):
                if isinstance(message, dict) and message.get("role") == "user":
                    return text_of(message.get("content"))
            return ""
        return text_of(self.body.get("prompt"))


Script = Callable[[Call], Reply]
"""Decides the reply for each completion request."""


def text_of(content: Any) -> str:
    """Text of a message content / prompt that may be a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


# --------------------------------------------------------------------------- scripts


def default_script(call: Call) -> Reply:
    return Reply()


def by_marker(mapping: Mapping[str, Reply], default: Reply) -> Script:
    """Answer with the reply whose key occurs in ``call.last_user_text``.

    Keys are tried in mapping order and the first one found as a substring wins;
    ``default`` answers when none is found.  Typical use: put a marker such as
    ``"Q-17"`` in one question's text and map it to a fault.
    """
    items = list(mapping.items())

    def script(call: Call) -> Reply:
        text = call.last_user_text
        for marker, reply in items:
            if marker in text:
                return reply
        return default

    return script


def sequence(*replies: Reply) -> Script:
    """Answer by attempt number: attempt 1 gets ``replies[0]``, attempt 2 ``replies[1]``, ...

    The last reply repeats for every later attempt.  Attempts are counted per
    (path, body), so each distinct request walks through the sequence on its own:
    ``sequence(Reply(status=503), Reply())`` fails every first try and answers the retry.
    """
    if not replies:
        raise ValueError("sequence() needs at least one Reply")
    chosen = tuple(replies)

    def script(call: Call) -> Reply:
        return chosen[min(call.attempt, len(chosen)) - 1]

    return script
