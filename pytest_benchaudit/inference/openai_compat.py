"""Asynchronous client for OpenAI-compatible endpoints (vLLM, llama.cpp, Ollama, OpenAI, Azure, ...).

One :class:`OpenAICompatBackend` per model; it is used from the engine's event
loop.  Failures are returned, never raised: after bounded retries with
exponential backoff (429, 5xx, connection errors -- a connection cut mid-body among them --,
timeouts, malformed bodies; ``Retry-After`` honoured) a request that still fails becomes
``Generation(error=...)``, which the pipeline records as an invalid response.

Providers (:mod:`.providers`) differ by data: the auth header (``Authorization:
Bearer`` by default, ``api-key`` for Azure, ``x-api-key`` for Anthropic), fixed
headers and query parameters (Azure's ``api-version``), and the API: OpenAI's
``chat/completions`` and ``completions``, or Anthropic's native ``messages``
(translated both ways here: system messages to ``system``, ``stop`` to
``stop_sequences``, ``thinking`` blocks to the reasoning field, ``input_tokens`` /
``output_tokens`` to the usual usage names; 529 "overloaded" is retried).

Requests in flight are bounded per endpoint by an :class:`~.ratelimit.AdaptiveLimiter`
that starts at the configured concurrency, halves when 429s are frequent and recovers gradually.
A 429 that says how long to wait (``Retry-After``, ``retry-after-ms``,
``x-ratelimit-reset-*``) is rate limiting, not a failure: it is retried after that
wait without using up ``max_retries`` (up to ``RATE_LIMIT_RETRIES`` times); a bare
429 counts as an ordinary retry.

The API key travels only in the auth header to the endpoint.  Every
text this client hands back is passed through :func:`redact` first: error texts
(redacted *before* they are cut to length, so no part of a key survives a cut),
and the answer itself (content, reasoning, served model id) -- a key a server or
model echoes is model output, but it is still a secret, and what leaves here is
written to records, the terminal and the generation cache.  A password written
into the endpoint URL (``http://user:pass@host``) is treated as a secret too.

What goes wrong with one request on the wire becomes ``Generation(error=...)``: what the HTTP
client raises (aiohttp's errors, timeouts, OS errors), a status that is not 200, and an answer
that cannot be read -- not JSON, or JSON of another shape (:class:`MalformedResponse`, raised by
the readers below for every shape they do not take, and pydantic's ``ValidationError`` for a
field of the wrong type).  Nothing else is caught: an exception of any other kind is a bug in
this code, not the model's answer, and leaves :meth:`OpenAICompatBackend.generate` as a
:class:`~.backend.BackendBug` naming it and where it was raised (the run stops; it is never
recorded as the model's ``inference_error``, scored 0).  Cancellation propagates.

The HTTP client is aiohttp, called directly: one ``ClientSession`` per backend (opened on
the engine's loop at the first request), a ``TCPConnector`` holding up to ``concurrency``
connections, redirects not followed, a connect timeout of min(10 s, ``timeout``) and a read
timeout of ``timeout`` (the longest wait for the answer's next bytes).  httpx with an aiohttp
transport underneath cost ~0.8 ms of CPU per request against ~0.45 ms for aiohttp alone, on
the one GIL the engine's loop shares with pytest (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import json
import random
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import orjson
from aiohttp import http_exceptions
from pydantic import ValidationError

from pytest_benchaudit.common.secrets import redact, redact_error, redactor, register_secret, register_url_secrets
from pytest_benchaudit.inference.backend import BackendBug, ModelSpec, auth_headers
from pytest_benchaudit.inference.endpoint_tokenizer import tokenizer_root
from pytest_benchaudit.inference.loglikelihood import TokenizerError, ask_loglikelihood
from pytest_benchaudit.inference.ratelimit import AdaptiveLimiter, rate_limit_wait
from pytest_benchaudit.inference.response_body import MalformedResponse, ParsedResponse
from pytest_benchaudit.inference.response_body import parse_anthropic as _parse_anthropic
from pytest_benchaudit.inference.response_body import parse_openai as _parse
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = ["MalformedResponse", "OpenAICompatBackend", "RETRYABLE_STATUS", "RATE_LIMIT_RETRIES"]

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})  # 529: Anthropic overloaded
RATE_LIMIT_RETRIES = 64  # 429s with a wait hint, per request, beside max_retries
_MAX_BACKOFF = 60.0
_MAX_ERROR_CHARS = 500


# What reading a 200 answer may raise for a bad body: not JSON (json's and orjson's errors are
# json.JSONDecodeError), another shape, a field of the wrong type for Generation.
_UNREADABLE = (json.JSONDecodeError, MalformedResponse, ValidationError)


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.throttled = throttled  # a 429 that said how long to wait: rate limiting, not a failure


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


class _Response:
    """What one HTTP exchange brought back: status, headers (case-insensitive) and the body read."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    def json(self) -> Any:
        try:
            return orjson.loads(self.content)
        except orjson.JSONDecodeError:
            # What orjson refuses and json takes: NaN / Infinity (some servers' log-probabilities),
            # a UTF-16 or UTF-32 body.  Still not JSON: json's ValueError (a malformed response).
            return json.loads(self.content)

    @property
    def text(self) -> str:
        """The body decoded by its declared charset (UTF-8 when none or unknown), as httpx decodes it."""
        charset = "utf-8"
        for part in str(self.headers.get("content-type", "")).split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip('"')
        try:
            codecs.lookup(charset)
        except LookupError:
            charset = "utf-8"
        return self.content.decode(charset, errors="replace")


def _error_text(response: _Response) -> str:
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
    text = redact_error(message or response.text)
    return f"HTTP {response.status_code}: {text[:_MAX_ERROR_CHARS]}"


class OpenAICompatBackend:
    """Send :class:`Request` objects to ``spec.base_url`` with bounded concurrency."""

    def __init__(self, spec: ModelSpec, *, concurrency: int) -> None:
        if not spec.base_url:
            raise ValueError(f"model {spec.label!r} has no endpoint URL")
        self.spec = spec
        register_url_secrets(spec.base_url)  # a password or api_key= in the URL: as written and decoded
        key = spec.api_key()
        if key:
            register_secret(key)
        headers = {"Content-Type": "application/json", **dict(spec.headers), **auth_headers(spec, key)}
        # Credentials in the URL stay there: aiohttp sends them as HTTP Basic auth, and refuses to
        # combine them with a key's Authorization (backend.endpoint_problem says so before the run).
        # A query in the URL (`.../v1?api_key=K`) goes with every request, after the path: the
        # path is joined to the URL's own path, not appended to its query.
        url = urlsplit(spec.base_url)
        self._base = url._replace(path=url.path.rstrip("/") + "/", query="", fragment="").geturl()
        self._headers = headers
        self._params = [*parse_qsl(url.query, keep_blank_values=True), *spec.query] or None
        self._concurrency = concurrency
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(10.0, spec.timeout), sock_read=spec.timeout)
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self.limiter = AdaptiveLimiter(concurrency)
        # The endpoint's tokenizer for log-likelihood requests, probed once (lm-eval's remote tokenizer).
        self._root = tokenizer_root(spec.base_url)
        self._tokenizer: _RemoteTokenizer | None = None
        self._tokenizer_probed = False
        self._tokenizer_lock = asyncio.Lock()

    def _client(self) -> aiohttp.ClientSession:
        """The backend's session, opened on first use (aiohttp wants the running loop)."""
        if self._session is None:
            if self._closed:
                raise RuntimeError("the backend is closed")
            connector = aiohttp.TCPConnector(limit=self._concurrency, limit_per_host=0)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, timeout=self._timeout)
        return self._session

    @property
    def is_closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()

    async def _send(
        self, method: str, path: str, content: bytes | None = None, timeout: aiohttp.ClientTimeout | None = None
    ) -> _Response:
        """One HTTP exchange, the whole body read (raises aiohttp's and asyncio's exceptions)."""
        async with self._client().request(
            method,
            self._base + path,
            data=content,
            params=self._params,
            allow_redirects=False,
            timeout=timeout or self._timeout,
        ) as response:
            return _Response(response.status, response.headers, await response.read())

    async def served_models(self) -> list[str] | None:
        """The model ids the endpoint says it serves (``GET /models``), or ``None`` when it cannot say.

        Part of the generation cache's key: a different model restarted behind the same URL must
        not be answered from the old model's generations."""
        wait = min(10.0, self.spec.timeout)
        try:
            response = await self._send(
                "GET", "models", timeout=aiohttp.ClientTimeout(total=None, sock_connect=wait, sock_read=wait)
            )
            data = response.json() if response.status_code == 200 else None
        except (TimeoutError, aiohttp.ClientError, ValueError, OSError):
            return None
        items = data.get("data") if isinstance(data, dict) else None
        ids = sorted({m["id"] for m in items or [] if isinstance(m, dict) and isinstance(m.get("id"), str)})
        return ids or None

    async def root_call(self, method: str, route: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """One request to a route at the server's root (``/tokenize``, not under ``/v1``): its status
        and JSON answer (``None`` when not JSON).  Raises aiohttp's and asyncio's exceptions."""
        async with self._client().request(
            method, f"{self._root}/{route}", allow_redirects=False, data=None if body is None else request_body(body)
        ) as response:
            content = await response.read()
        try:
            return response.status, _Response(response.status, response.headers, content).json()
        except ValueError:
            return response.status, None

    async def remote_tokenizer(self) -> _RemoteTokenizer | None:
        """The endpoint's tokenizer when it serves the one lm-eval would use (lm-eval 0.4.13
        ``check_remote_tokenizer_support``: ``GET /tokenizer_info`` with an ``eos_token`` key and ``POST
        /tokenize`` answering tokens; see :mod:`.endpoint_tokenizer`), asked once; else ``None``."""
        async with self._tokenizer_lock:
            if not self._tokenizer_probed:
                self._tokenizer_probed = True
                try:
                    status, info = await self.root_call("GET", "tokenizer_info")
                    if status == 200 and isinstance(info, dict) and "eos_token" in info:
                        status, tokens = await self.root_call(
                            "POST", "tokenize", {"prompt": "test", "add_special_tokens": False}
                        )
                        if status == 200 and isinstance(tokens, dict) and isinstance(tokens.get("tokens"), list):
                            self._tokenizer = _RemoteTokenizer(self)
                except (TimeoutError, aiohttp.ClientError, OSError):
                    pass  # lm-eval, too, then falls back to a tokenizer of its own
        return self._tokenizer

    def payload(self, request: Request) -> tuple[str, dict[str, Any]]:
        """The endpoint path and JSON body for ``request`` (``ValueError``: the API cannot take it)."""
        if self.spec.api == "anthropic":
            return _anthropic_payload(self.spec.model_id, request)
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
        """``request``'s answer, or a generation whose ``error`` says why there is none (see the
        module); :class:`~.backend.BackendBug` when this code itself fails."""
        try:
            return await self._generate(request)
        except BackendBug:
            raise  # a log-likelihood request's sub-request already said it
        except Exception as err:  # what the wire can raise is handled inside: this is our own code failing
            raise BackendBug(_bug_text(self.spec.label, err)) from err

    async def _generate(self, request: Request) -> Generation:
        if request.continuations:  # inference.request = "loglikelihood": one echoed completion per continuation
            return await ask_loglikelihood(request, self.generate, await self.remote_tokenizer())
        start = time.perf_counter()
        try:
            path, body = self.payload(request)
        except ValueError as err:
            return Generation(error=redact_error(f"not sent: {err}"), attempts=0)
        content = request_body(body)
        echo = body.get("echo") is True
        attempts = retries = throttles = 0
        while True:
            attempts += 1
            try:
                return await self.attempt(path, content, retries + 1, start=start, attempts=attempts, echo=echo)
            except _Fatal as err:
                message = str(err)
            except _Retryable as err:
                message = str(err)
                if err.throttled and throttles < RATE_LIMIT_RETRIES:
                    throttles += 1
                    continue  # the limiter holds the next attempt until the endpoint's wait is over
                retries += 1
                if retries <= self.spec.max_retries:
                    await asyncio.sleep(self._backoff(retries, err.retry_after))
                    continue
                message += f" (gave up after {attempts} attempts)"
            return Generation(
                error=redact_error(message),
                latency_s=time.perf_counter() - start,
                attempts=attempts,
            )

    async def attempt(
        self,
        path: str,
        content: bytes,
        retry: int = 1,
        *,
        start: float | None = None,
        attempts: int = 1,
        echo: bool = False,
    ) -> Generation:
        """One HTTP attempt within the endpoint's adaptive limit (raises ``_Retryable`` / ``_Fatal``).
        The generation says ``attempts`` and its latency since ``start`` (``time.perf_counter()``;
        by default since this attempt began); ``echo``: the body asked for the prompt echoed, whose
        token log-probabilities are kept (``Generation.echoed``)."""
        start = time.perf_counter() if start is None else start
        sent_at = await self.limiter.acquire()
        try:
            return await self._once(path, content, sent_at, retry, start, attempts, echo)
        finally:
            self.limiter.release()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, _MAX_BACKOFF)
        # Full jitter keeps many workers that failed together from retrying together.
        return random.uniform(0.5, 1.0) * min(_MAX_BACKOFF, self.spec.retry_base * 2 ** (attempt - 1))

    async def _once(
        self, path: str, content: bytes, sent_at: float, retry: int, start: float, attempts: int, echo: bool = False
    ) -> Generation:
        try:
            response = await self._send("POST", path, content)
        except (TimeoutError, aiohttp.ClientConnectionError, OSError) as err:
            raise _Retryable(_transport_failure(err, self.spec.timeout)) from None
        except aiohttp.ClientPayloadError as err:
            if _cut_mid_body(err):  # the connection closed before the announced body was complete
                why = getattr(err.__cause__, "message", None) or str(err)
                raise _Retryable(f"connection error: cut mid-body ({type(err).__name__}: {why})") from None
            # e.g. a body that is not the gzip it claims to be
            raise _Retryable(f"malformed response (DecodingError: {err})") from None
        except (aiohttp.ClientError, ValueError) as err:
            # An invalid URL and the like (aiohttp refuses arguments it cannot send with ValueError: a URL
            # holding credentials beside the auth header): asking again will not help.
            raise _Fatal(f"request error ({type(err).__name__}): {err}") from None
        if response.status_code != 200:
            message = _error_text(response)
            if response.status_code == 429:
                hint = rate_limit_wait(response.headers, exhausted_only=False)
                wait = hint if hint is not None else self._backoff(retry, None)
                self.limiter.throttle(sent_at, min(wait, _MAX_BACKOFF), response.headers)
                raise _Retryable(message, wait, throttled=hint is not None)
            if response.status_code in RETRYABLE_STATUS:
                raise _Retryable(message, _retry_after(response.headers.get("retry-after")))
            raise _Fatal(message)
        self.limiter.success(response.headers)
        try:
            data = response.json()
            fields = _parse_anthropic(data) if self.spec.api == "anthropic" else _parse(data, echo)
            _redact_fields(fields)
            # Built once, with what the caller knows (no copies of a frozen model per answer).
            return Generation(**fields, latency_s=time.perf_counter() - start, attempts=attempts)
        except _UNREADABLE as err:  # the body, not this code: anything else is a bug (BackendBug)
            snippet = redact_error(response.text)[:200].replace("\n", " ")
            why = str(err) if isinstance(err, MalformedResponse) else f"{type(err).__name__}: {err}"
            raise _Retryable(f"malformed response ({why}): {snippet!r}") from None


class _RemoteTokenizer:
    """The endpoint's ``/tokenize`` and ``/detokenize`` as lm-eval's ``RemoteTokenizer`` asks them (three
    tries each; :class:`~.loglikelihood.TokenizerError` when none is answered)."""

    def __init__(self, backend: OpenAICompatBackend) -> None:
        self._backend = backend

    async def _ask(self, route: str, body: dict[str, Any], key: str) -> Any:
        why = ""
        for _ in range(3):
            try:
                status, answer = await self._backend.root_call("POST", route, body)
            except (TimeoutError, aiohttp.ClientError, OSError) as err:
                why = f"{type(err).__name__}: {err}"
                continue
            if status == 200 and isinstance(answer, dict) and key in answer:
                return answer[key]
            why = f"HTTP {status}" + ("" if status != 200 else f", no {key!r} in the answer")
        raise TokenizerError(redact(f"POST /{route}: {why} (3 tries)"))

    async def encode(self, text: str) -> list[int]:
        tokens = await self._ask("tokenize", {"prompt": text, "add_special_tokens": False}, "tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise TokenizerError("POST /tokenize: tokens is not a list of token ids")
        return tokens

    async def decode(self, ids: list[int]) -> str:
        text = await self._ask("detokenize", {"tokens": ids}, "prompt")
        if not isinstance(text, str):
            raise TokenizerError("POST /detokenize: prompt is not a string")
        return text


def _cut_mid_body(err: aiohttp.ClientPayloadError) -> bool:
    """Whether a payload error is a connection that closed mid-body (fewer bytes than the
    ``Content-Length``, an unfinished chunked body), not a body that arrived whole but garbled.

    A cut is a connection failure like a reset before the headers: the circuit breaker counts
    it (``"connection error: ..."``); a garbled body is the endpoint's answer (``"malformed ..."``)."""
    cause = err.__cause__
    if isinstance(cause, (http_exceptions.ContentLengthError, http_exceptions.TransferEncodingError)):
        return True
    return cause is None and str(err).startswith("Response payload is not completed")


def _transport_failure(err: BaseException, timeout: float) -> str:
    """Say what failed: no answer in time (a read or connect timeout) or the connection
    (refused, reset, dropped mid-response)."""
    if isinstance(err, (asyncio.TimeoutError, TimeoutError)):
        return f"timeout: no answer within {timeout:g}s ({type(err).__name__})"
    return f"connection error: {type(err).__name__}: {err}"


def request_body(body: dict[str, Any]) -> bytes:
    """The JSON sent for ``body``: orjson's (compact, UTF-8; ~5x less CPU than json per request),
    json's for what orjson cannot write (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(body).encode()


def _bug_text(label: str, err: BaseException) -> str:
    """What a :class:`~.backend.BackendBug` says: the model, the exception and the line that raised it."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}()" if frames else ""
    return redact_error(
        f"the client of model {label!r} failed: {type(err).__name__}: {err}{where} -- a bug in "
        "benchaudit, not the model's answer"
    )


def _anthropic_payload(model: str | None, request: Request) -> tuple[str, dict[str, Any]]:
    """A chat request as Anthropic's Messages API takes it (``v1/messages``)."""
    if request.mode != "chat":
        raise ValueError(
            "Anthropic's Messages API takes chat messages, not a completion prompt (prompt.format.mode = completion)"
        )
    params = dict(request.params)
    body: dict[str, Any] = {"model": model}
    system = [m.content for m in request.messages if m.role == "system"]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"]
    if "stop" in params:
        body["stop_sequences"] = params.pop("stop")
    body.update(params)
    return "v1/messages", body


_TEXTS: tuple[Literal["text", "reasoning", "served_model"], ...] = ("text", "reasoning", "served_model")


def _redact_fields(fields: ParsedResponse) -> None:
    """Mask known secrets, in place, in every text a generation carries (answer, reasoning, model id)."""
    mask = redactor()
    for name in _TEXTS:
        value = fields.get(name)
        if isinstance(value, str):
            fields[name] = mask(value)
