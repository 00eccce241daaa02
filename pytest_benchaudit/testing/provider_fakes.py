"""Loopback stand-ins for hosted providers, checking the request shape each provider expects.

:class:`ProviderFake` listens on 127.0.0.1 and answers like one provider of the
registry (:mod:`pytest_benchaudit.inference.providers`):

=============  ===============================================  ===================================
kind           path                                             auth
=============  ===============================================  ===================================
``openai``     ``/v1/chat/completions``, ``/v1/completions``    ``Authorization: Bearer KEY``
``azure``      ``/openai/deployments/DEP/chat/completions``     ``api-key: KEY``, ``?api-version=``
``anthropic``  ``/v1/messages``                                 ``x-api-key: KEY``, ``anthropic-version``
``gemini``     ``/v1beta/openai/chat/completions``              ``Authorization: Bearer KEY``
=============  ===============================================  ===================================

A request with another path gets 404, one without the right auth 401 (nothing else
is checked then); ``key=""`` is a server without keys, which expects no auth header.  Then the documented refusals, as the providers word them:

* Azure: ``max_tokens`` (or ``max_completion_tokens``) below 16 -> 400
  ``integer_below_min_value``;
* OpenAI / Azure reasoning models (``o1``, ``o3``, ``o4-*``, ``gpt-5*`` but not
  ``*-chat*``): ``max_tokens`` -> 400 ``unsupported_parameter`` (use
  ``max_completion_tokens``); ``temperature`` / ``top_p`` other than 1 -> 400
  ``unsupported_value``; ``stop`` -> 400 ``unsupported_parameter``;
* Anthropic: no ``max_tokens`` -> 400 ``invalid_request_error``;
* ``bucket=(rate, burst)``: a token bucket of requests; an empty bucket -> 429 with
  ``Retry-After`` (whole seconds, rounded up), ``retry-after-ms`` and
  ``x-ratelimit-limit/remaining/reset-requests`` (the limit per minute, as OpenAI
  sends it); every answer carries the headers;
* ``script``: a callable ``(FakeCall) -> FakeReply | None`` run first, for one-off
  statuses (a 429 with headers, Anthropic's 529 ``overloaded_error``).

Every request is kept in :attr:`ProviderFake.calls` (path, query, headers with the
key masked as ``<key>``, body, status answered).  :meth:`ProviderFake.env` gives the
environment variables that point the provider at the fake, so a test never leaves
127.0.0.1.
"""

from __future__ import annotations

import fnmatch
import json
import math
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeCall", "FakeReply", "ProviderFake", "REASONING_MODELS"]

Kind = Literal["openai", "azure", "anthropic", "gemini"]
REASONING_MODELS = ("o1", "o1-*", "o3", "o3-*", "o4-*", "gpt-5*")
AZURE_MIN_TOKENS = 16


@dataclass
class FakeCall:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 0


@dataclass
class FakeReply:
    status: int = 200
    content: str = "Answer: A"
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # the whole JSON error body, for a status other than 200
    reasoning: str | None = None
    finish_reason: str = "stop"


def _is_reasoning(model: str) -> bool:
    name = model.lower()
    return any(fnmatch.fnmatchcase(name, p) for p in REASONING_MODELS) and "-chat" not in name


def _openai_error(message: str, param: str | None, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


class _Bucket:
    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> tuple[bool, float, int]:
        """(granted, seconds until the next token, tokens left)."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True, max(0.0, (1 - self.tokens) / self.rate) if self.tokens < 1 else 0.0, int(self.tokens)
            return False, (1 - self.tokens) / self.rate, 0


class ProviderFake:
    """A loopback server speaking one provider's API (see the module docstring)."""

    def __init__(
        self,
        kind: Kind = "openai",
        *,
        key: str = "sk-fake",
        deployment: str | None = None,
        api_version: str = "2024-10-21",
        script: Callable[[FakeCall], FakeReply | None] | None = None,
        bucket: tuple[float, int] | None = None,
        answer: Callable[[FakeCall], str] | None = None,
    ) -> None:
        self.kind = kind
        self.key = key
        self.deployment = deployment
        self.api_version = api_version
        self.script = script
        self.answer = answer
        self.bucket = _Bucket(*bucket) if bucket else None
        self.calls: list[FakeCall] = []
        self.granted = 0  # requests answered 200
        self.grant_times: list[float] = []  # time.monotonic() of each 200, for throughput
        self.refused_429 = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> ProviderFake:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, headers, body = fake._handle(self.path, dict(self.headers.items()), raw)
                data = json.dumps(body).encode()
                head = [
                    f"HTTP/1.1 {status} X",
                    "Content-Type: application/json",
                    f"Content-Length: {len(data)}",
                    *(f"{k}: {v}" for k, v in headers.items()),
                ]
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="provider-fake").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ProviderFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """The provider's conventional variables, pointing at this fake."""
        if self.kind == "azure":
            return {
                "AZURE_OPENAI_ENDPOINT": self.root,
                "AZURE_OPENAI_API_KEY": self.key,
                "OPENAI_API_VERSION": self.api_version,
            }
        if self.kind == "anthropic":
            return {"ANTHROPIC_BASE_URL": self.root, "ANTHROPIC_API_KEY": self.key}
        if self.kind == "gemini":
            return {"GEMINI_BASE_URL": self.root + "/v1beta/openai", "GEMINI_API_KEY": self.key}
        return {"OPENAI_BASE_URL": self.root + "/v1", "OPENAI_API_KEY": self.key}

    # -- one request ---------------------------------------------------------------------
    def _handle(self, target: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], Any]:
        parts = urlsplit(target)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        masked = {k.lower(): (v.replace(self.key, "<key>") if self.key else v) for k, v in headers.items()}
        call = FakeCall(
            path=parts.path,
            query={k: v[0] for k, v in parse_qs(parts.query).items()},
            headers=masked,
            body=body if isinstance(body, dict) else {},
        )
        status, extra, out = self._answer(call, {k.lower(): v for k, v in headers.items()})
        call.status = status
        with self._lock:
            self.calls.append(call)
            if status == 200:
                self.granted += 1
                self.grant_times.append(time.monotonic())
            elif status == 429:
                self.refused_429 += 1
        return status, extra, out

    def _answer(self, call: FakeCall, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        problem = self._check_route(call, headers)
        if problem is not None:
            return problem
        limits: dict[str, str] = {}
        if self.bucket is not None:
            granted, wait, left = self.bucket.take()
            limits = {
                "x-ratelimit-limit-requests": str(round(self.bucket.rate * 60)),  # per minute, as OpenAI
                "x-ratelimit-remaining-requests": str(left),
                "x-ratelimit-reset-requests": f"{max(1, round(wait * 1000))}ms",
            }
            if not granted:
                limits.update({"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": f"{wait * 1000:.0f}"})
                return 429, limits, _openai_error("Rate limit reached for requests", None, "rate_limit_exceeded")
        reply = self.script(call) if self.script is not None else None
        if reply is not None and reply.status != 200:
            return reply.status, {**limits, **reply.headers}, reply.error or _openai_error("scripted", None, "x")
        refusal = self._check_body(call.body)
        if refusal is not None:
            return 400, limits, refusal
        reply = reply or FakeReply(content=self.answer(call) if self.answer else "Answer: A")
        return 200, {**limits, **reply.headers}, self._completion(call, reply)

    def _check_route(self, call: FakeCall, headers: dict[str, str]) -> tuple[int, dict[str, str], Any] | None:
        if self.kind == "azure":
            dep = self.deployment or "*"
            ok_path = fnmatch.fnmatchcase(
                call.path, f"/openai/deployments/{dep}/chat/completions"
            ) or fnmatch.fnmatchcase(call.path, f"/openai/deployments/{dep}/completions")
            auth_ok = headers.get("api-key") == self.key and "authorization" not in headers
            if ok_path and call.query.get("api-version") != self.api_version:
                return 404, {}, {"error": {"code": "404", "message": "Resource not found"}}
        elif self.kind == "anthropic":
            ok_path = call.path == "/v1/messages"
            auth_ok = headers.get("x-api-key") == self.key and bool(headers.get("anthropic-version"))
        else:
            prefix = "/v1beta/openai" if self.kind == "gemini" else "/v1"
            ok_path = call.path in (f"{prefix}/chat/completions", f"{prefix}/completions")
            # key "" stands for a server without keys (Ollama, vLLM): then no auth header is expected.
            auth_ok = (
                headers.get("authorization") == f"Bearer {self.key}" if self.key else "authorization" not in headers
            )
        if not ok_path:
            return 404, {}, {"error": {"message": f"no route {call.path}", "code": "not_found"}}
        if not auth_ok:
            return 401, {}, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
        return None

    def _check_body(self, body: dict[str, Any]) -> dict[str, Any] | None:
        if self.kind == "anthropic":
            if "max_tokens" not in body:
                return {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
                }
            return None
        model = str(self.deployment if self.kind == "azure" and self.deployment else body.get("model", ""))
        if self.kind == "azure":
            for param in ("max_tokens", "max_completion_tokens"):
                value = body.get(param)
                if isinstance(value, int) and value < AZURE_MIN_TOKENS:
                    return _openai_error(
                        f"Invalid '{param}': integer below minimum value. Expected a value >= "
                        f"{AZURE_MIN_TOKENS}, but got {value} instead.",
                        param,
                        "integer_below_min_value",
                    )
        if self.kind in ("openai", "azure") and _is_reasoning(model):
            if "max_tokens" in body:
                return _openai_error(
                    "Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead.",
                    "max_tokens",
                    "unsupported_parameter",
                )
            for param in ("temperature", "top_p"):
                if param in body and body[param] != 1:
                    return _openai_error(
                        f"Unsupported value: '{param}' does not support {body[param]} with this "
                        "model. Only the default (1) value is supported.",
                        param,
                        "unsupported_value",
                    )
            if "stop" in body:
                return _openai_error(
                    "Unsupported parameter: 'stop' is not supported with this model.", "stop", "unsupported_parameter"
                )
        return None

    def _completion(self, call: FakeCall, reply: FakeReply) -> dict[str, Any]:
        body = call.body
        prompt_tokens = len(json.dumps(body.get("messages") or body.get("prompt") or "").split())
        completion_tokens = max(1, len(reply.content.split()))
        model = body.get("model") or self.deployment
        if self.kind == "anthropic":
            content: list[dict[str, Any]] = []
            if reply.reasoning is not None:
                content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig"})
            content.append({"type": "text", "text": reply.content})
            return {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": {"stop": "end_turn", "length": "max_tokens"}.get(reply.finish_reason, "end_turn"),
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
            }
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if call.path.endswith("/completions") and not call.path.endswith("chat/completions"):
            return {
                "object": "text_completion",
                "model": model,
                "usage": usage,
                "choices": [{"index": 0, "text": reply.content, "finish_reason": reply.finish_reason}],
            }
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        return {
            "object": "chat.completion",
            "model": model,
            "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        }
