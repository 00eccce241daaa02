"""Asynchronous client for OpenAI-compatible endpoints (vLLM, llama.cpp, Ollama, OpenAI, Azure).

One :class:`OpenAICompatBackend` per model; it is used from the engine's event
loop.  Failures are returned, never raised: after bounded retries with
exponential backoff (429, 5xx, connection errors, timeouts, malformed bodies;
``Retry-After`` honoured) a request that still fails becomes
``Generation(error=...)``, which the pipeline records as an invalid response.

The API key travels only in the ``Authorization`` header to the endpoint.  Every
text this client hands back is passed through :func:`redact` first: error texts
(redacted *before* they are cut to length, so no part of a key survives a cut),
and the answer itself (content, reasoning, served model id) -- a key a server or
model echoes is model output, but it is still a secret, and what leaves here is
written to records, the terminal and the generation cache.  A password written
into the endpoint URL (``http://user:pass@host``) is treated as a secret too.

Whatever goes wrong with one request (including an exception the HTTP stack was
not expected to raise) becomes ``Generation(error=...)``; only cancellation
propagates.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
from httpx_aiohttp import AiohttpTransport

from pytest_benchaudit.common.secrets import redact, register_secret
from pytest_benchaudit.pipeline.types import Generation, Request
from pytest_benchaudit.inference.backend import ModelSpec

__all__ = ["OpenAICompatBackend", "RETRYABLE_STATUS"]

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_MAX_BACKOFF = 60.0
_MAX_ERROR_CHARS = 500


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Fatal(Exception):
    pass


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(response: httpx.Response) -> str:
    message = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
    text = redact(message or response.text)
    return f"HTTP {response.status_code}: {text[:_MAX_ERROR_CHARS]}"


class OpenAICompatBackend:
    """Send :class:`Request` objects to ``spec.base_url`` with bounded concurrency."""

    def __init__(self, spec: ModelSpec, *, concurrency: int, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not spec.base_url:
            raise ValueError(f"model {spec.label!r} has no endpoint URL")
        self.spec = spec
        password = urlsplit(spec.base_url).password
        if password:  # as written in the URL, and decoded (error texts may show either)
            register_secret(password)
            register_secret(unquote(password))
        headers = {"Content-Type": "application/json"}
        key = spec.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        if transport is None:
            # aiohttp underneath the httpx API: httpcore's pool costs several ms of CPU per
            # request, which at hundreds of requests/s competes with pytest for the GIL
            # (bench/throughput.py: 0.47 -> 0.86 of a bare client's speed at concurrency 32).
            transport = AiohttpTransport(limits=limits)
        self._client = httpx.AsyncClient(
            base_url=spec.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(spec.timeout, connect=min(10.0, spec.timeout)),
            limits=limits,
            transport=transport,
        )
        self._gate = asyncio.Semaphore(concurrency)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def served_models(self) -> list[str] | None:
        """The model ids the endpoint says it serves (``GET /models``), or ``None`` when it cannot say.

        Part of the generation cache's key: a different model restarted behind the same URL must
        not be answered from the old model's generations."""
        try:
            response = await self._client.get("models", timeout=min(10.0, self.spec.timeout))
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, OSError):
            return None
        items = data.get("data") if isinstance(data, dict) else None
        ids = sorted({m["id"] for m in items or [] if isinstance(m, dict) and isinstance(m.get("id"), str)})
        return ids or None

    def payload(self, request: Request) -> tuple[str, dict[str, Any]]:
        """The endpoint path and JSON body for ``request``."""
        params = dict(request.params)
        top = params.pop("top_logprobs", None)
        body: dict[str, Any] = {"model": self.spec.model_id}
        if request.mode == "chat":
            body["messages"] = [m.model_dump() for m in request.messages]
            if top is not None:
                body["logprobs"] = True
                body["top_logprobs"] = top
            path = "chat/completions"
        else:
            body["prompt"] = request.prompt
            if top is not None:
                body["logprobs"] = top
            path = "completions"
        body.update(params)
        return path, body

    async def generate(self, request: Request) -> Generation:
        path, body = self.payload(request)
        content = json.dumps(body).encode()
        attempts = 0
        start = time.perf_counter()
        async with self._gate:
            while True:
                attempts += 1
                try:
                    gen = await self._once(path, content)
                    return gen.model_copy(update={"latency_s": time.perf_counter() - start, "attempts": attempts})
                except _Fatal as err:
                    message = str(err)
                except _Retryable as err:
                    message = str(err)
                    if attempts <= self.spec.max_retries:
                        await asyncio.sleep(self._backoff(attempts, err.retry_after))
                        continue
                    message += f" (gave up after {attempts} attempts)"
                except Exception as err:  # noqa: BLE001 - never raise for one failed request
                    message = f"client error ({type(err).__name__}): {err}"
                return Generation(
                    error=redact(message),
                    latency_s=time.perf_counter() - start,
                    attempts=attempts,
                )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, _MAX_BACKOFF)
        # Full jitter keeps many workers that failed together from retrying together.
        return random.uniform(0.5, 1.0) * min(_MAX_BACKOFF, self.spec.retry_base * 2 ** (attempt - 1))

    async def _once(self, path: str, content: bytes) -> Generation:
        try:
            response = await self._client.post(path, content=content)
        except httpx.TransportError as err:
            raise _Retryable(_transport_failure(err, self.spec.timeout)) from None
        except httpx.DecodingError as err:  # e.g. a body that is not the gzip it claims to be
            raise _Retryable(f"malformed response (DecodingError: {err})") from None
        except httpx.HTTPError as err:  # too many redirects and the like: asking again will not help
            raise _Fatal(f"request error ({type(err).__name__}): {err}") from None
        if response.status_code != 200:
            message = _error_text(response)
            if response.status_code in RETRYABLE_STATUS:
                raise _Retryable(message, _retry_after(response.headers.get("retry-after")))
            raise _Fatal(message)
        try:
            data = response.json()
            gen = _parse(data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            snippet = redact(response.text)[:200].replace("\n", " ")
            raise _Retryable(f"malformed response ({type(err).__name__}: {err}): {snippet!r}") from None
        return _redacted(gen)


def _transport_failure(err: httpx.TransportError, timeout: float) -> str:
    """Say what really failed: the aiohttp transport reports a dropped connection as a
    ConnectTimeout, so the underlying cause decides between "timeout" and "connection error"."""
    cause = err.__cause__ or err.__context__
    timed_out = isinstance(cause, TimeoutError) if cause is not None else isinstance(err, httpx.TimeoutException)
    if timed_out:
        return f"timeout: no answer within {timeout:g}s ({type(cause or err).__name__})"
    detail = f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(err).__name__}: {err}"
    return f"connection error: {detail}"


def _parse(data: dict[str, Any]) -> Generation:
    """Read a chat or completion response body into a :class:`Generation`."""
    if not isinstance(data, dict) or not data.get("choices"):
        raise ValueError("no 'choices' in the response")
    choice = data["choices"][0]
    if "message" in choice:
        message = choice["message"] or {}
        text = message.get("content") or ""
        reasoning = message.get("reasoning_content") or message.get("reasoning")
    else:
        text = choice["text"] or ""
        reasoning = None
    if not isinstance(text, str):
        raise TypeError("answer content is not a string")
    return Generation(
        text=text,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage") or {},
        top_logprobs=_top_logprobs(choice.get("logprobs")),
        served_model=data.get("model"),
    )


def _redacted(gen: Generation) -> Generation:
    """``gen`` with known secrets masked in every text it carries (answer, reasoning, model id)."""
    update: dict[str, Any] = {}
    for name in ("text", "reasoning", "served_model"):
        value = getattr(gen, name)
        if isinstance(value, str):
            masked = redact(value)
            if masked != value:
                update[name] = masked
    return gen.model_copy(update=update) if update else gen


def _top_logprobs(logprobs: Any) -> tuple[dict[str, float], ...] | None:
    if not logprobs:
        return None
    if isinstance(logprobs.get("content"), list):  # chat format
        return tuple(
            {alt["token"]: float(alt["logprob"]) for alt in tok.get("top_logprobs") or []}
            for tok in logprobs["content"]
        )
    if isinstance(logprobs.get("top_logprobs"), list):  # legacy completions format
        return tuple({str(k): float(v) for k, v in (d or {}).items()} for d in logprobs["top_logprobs"])
    return None
