"""One model served by several OpenAI-compatible endpoints (``--model ID@URL1,URL2,...``).

Data parallel: every endpoint serves the same model, so any request may go to
any of them.  :class:`BalancedBackend` holds one :class:`OpenAICompatBackend` per
URL and sends each attempt of a request to the endpoint with the fewest requests
in flight *from this process* (assigned and not yet answered, including those
waiting for the endpoint's concurrency slot); ties go round-robin.  Under xdist
each worker balances its own requests.

Concurrency (``--concurrency`` or the model's ``concurrency``) applies **per
endpoint**: with N endpoints up to N × concurrency requests are in flight.

Failures:

* a **connection error** (refused, reset, dropped mid-response) marks the endpoint
  down for a few seconds and sends the request again at once, without backoff, to
  another endpoint it has not yet tried; this fail-over does not use up
  ``max_retries``.  Only when every endpoint has refused it does the request fall
  back to the ordinary retry: backoff, then another round over the endpoints.
* a 429 that says how long to wait pauses that endpoint (and halves its adaptive limit when
  429s are frequent, see :mod:`.ratelimit`); the request goes at once to another endpoint that is not
  paused (or waits for the pause), without using up ``max_retries``;
* other retryable failures (bare 429s, 5xx, timeouts, malformed bodies) are retried with
  the usual exponential backoff (``Retry-After`` honoured, ``max_retries`` counted),
  each retry going to the least-loaded endpoint that is not marked down;
* a fatal answer (e.g. HTTP 400) is returned as the error at once.

``attempts`` in the record counts every HTTP attempt, fail-overs included.  The
request is the same on every endpoint (same model id), so a generation is
cached under the model and its whole endpoint set, whichever endpoint answered.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from pytest_benchaudit.common.secrets import redact_error
from pytest_benchaudit.inference.backend import BackendBug, ModelSpec, strip_credentials
from pytest_benchaudit.inference.loglikelihood import ask_loglikelihood
from pytest_benchaudit.inference.openai_compat import (
    RATE_LIMIT_RETRIES,
    OpenAICompatBackend,
    _bug_text,
    _Fatal,
    _Retryable,
    request_body,
)
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = ["DOWN_FOR_S", "BalancedBackend", "balanced_identity"]

DOWN_FOR_S = 5.0  # how long an endpoint that refused a connection is avoided


@dataclass(eq=False)
class Endpoint:
    url: str
    backend: OpenAICompatBackend  # its AdaptiveLimiter bounds the requests in flight to this endpoint
    in_flight: int = 0
    answered: int = 0
    connection_errors: int = 0
    down_until: float = 0.0


def balanced_identity(spec: ModelSpec) -> str:
    """The generation cache's name for a balanced model: label, model id and the set of endpoints."""
    urls = sorted(strip_credentials(u).rstrip("/") for u in (spec.endpoints or (spec.base_url or "",)))
    return json.dumps(
        {"spec": spec.label, "endpoints": urls, "model_id": spec.model_id}, sort_keys=True, separators=(",", ":")
    )


class BalancedBackend:
    """Least-in-flight balancing over one :class:`OpenAICompatBackend` per endpoint."""

    def __init__(self, spec: ModelSpec, *, concurrency: int) -> None:
        urls = list(spec.endpoints or ((spec.base_url,) if spec.base_url else ()))
        if not urls:
            raise ValueError(f"model {spec.label!r} has no endpoint URL")
        self.spec = spec
        self.endpoints = [
            Endpoint(
                url,
                OpenAICompatBackend(
                    spec.model_copy(update={"base_url": url, "endpoints": ()}), concurrency=concurrency
                ),
            )
            for url in urls
        ]
        self._turn = 0  # round-robin pointer for ties

    async def aclose(self) -> None:
        for ep in self.endpoints:
            await ep.backend.aclose()

    async def served_models(self) -> list[str] | None:
        """What the endpoints serve, together (``None`` if any cannot say: the cache then stays out)."""
        ids: set[str] = set()
        for ep in self.endpoints:
            served = await ep.backend.served_models()
            if served is None:
                return None
            ids.update(served)
        return sorted(ids)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per endpoint: answers received and connection errors seen (for tests and diagnostics)."""
        return {ep.url: {"answered": ep.answered, "connection_errors": ep.connection_errors} for ep in self.endpoints}

    def pick(self, avoid: set[int] | frozenset[int] = frozenset()) -> int:
        """Index of the endpoint for the next attempt: fewest in flight among those not avoided
        and not marked down (falling back to all not avoided, then to all); ties round-robin."""
        now = time.monotonic()
        n = len(self.endpoints)
        order = [(self._turn + k) % n for k in range(n)]
        candidates = (
            [
                i
                for i in order
                if i not in avoid
                and self.endpoints[i].down_until <= now
                and self.endpoints[i].backend.limiter.paused_until <= now
            ]
            or [i for i in order if i not in avoid]
            or order
        )
        best = min(candidates, key=lambda i: self.endpoints[i].in_flight)  # first minimum in turn order
        self._turn = (best + 1) % n
        return best

    async def generate(self, request: Request) -> Generation:
        if request.continuations:  # inference.request = "loglikelihood"
            # Cut by the first endpoint's tokenizer (they serve one model), each continuation balanced on its own.
            return await ask_loglikelihood(request, self.generate, await self.endpoints[0].backend.remote_tokenizer())
        start = time.perf_counter()
        try:
            path, body = self.endpoints[0].backend.payload(request)
        except ValueError as err:
            return Generation(error=redact_error(f"not sent: {err}"), attempts=0)
        content = request_body(body)
        attempts = 0
        retries = 0
        throttles = 0
        refused: set[int] = set()  # endpoints that refused this request in the current round
        while True:
            index = self.pick(refused)
            ep = self.endpoints[index]
            attempts += 1
            ep.in_flight += 1
            try:
                gen = await ep.backend.attempt(
                    path, content, retries + 1, start=start, attempts=attempts, echo=body.get("echo") is True
                )
                ep.answered += 1
                ep.down_until = 0.0
                return gen
            except _Fatal as err:
                return self._failed(str(err), start, attempts)
            except _Retryable as err:
                message, retry_after, throttled = str(err), err.retry_after, err.throttled
            except Exception as err:  # what the wire raises is caught in attempt(): this is our own code failing
                raise BackendBug(_bug_text(self.spec.label, err)) from err
            finally:
                ep.in_flight -= 1
            if message.startswith("connection error"):
                ep.connection_errors += 1
                ep.down_until = time.monotonic() + DOWN_FOR_S
                refused.add(index)
                if len(refused) < len(self.endpoints):
                    continue  # fail over at once; not a retry
                refused.clear()  # every endpoint refused: ordinary retry, then a new round
            elif throttled and throttles < RATE_LIMIT_RETRIES:
                throttles += 1
                continue  # to an endpoint that is not paused, or wait in the limiter for the pause to end
            retries += 1
            if retries > self.spec.max_retries:
                return self._failed(
                    f"{message} (gave up after {attempts} attempts over {len(self.endpoints)} endpoints)",
                    start,
                    attempts,
                )
            await asyncio.sleep(ep.backend._backoff(retries, retry_after))

    @staticmethod
    def _failed(message: str, start: float, attempts: int) -> Generation:
        return Generation(error=redact_error(message), latency_s=time.perf_counter() - start, attempts=attempts)
