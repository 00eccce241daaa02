"""A per-endpoint circuit breaker: stop asking a model whose endpoint is down or refuses the key.

Without it a dead endpoint is asked every question: each request waits out its timeout and
retries (100 questions took 21 s of ``inference_error``, a full suite about an hour) before
anything says the endpoint is down.  :class:`BreakerBackend` wraps a model's backend (it does
not change the HTTP client) and watches each generation's ``error``:

* a connection failure or a timeout (after the client's own retries) counts one; any other
  outcome (an answer, an HTTP error the endpoint chose to send) resets the count.  After
  ``threshold`` consecutive ones the breaker *trips*;
* HTTP 401 or 403 trips it at once: the credentials are wrong and every later question
  would be refused the same way.  That first answer keeps the provider's message.

Once tripped, every later request of the model is answered at once, without being sent,
with ``Generation(error="endpoint_down: <why>; not asked", attempts=0)``.  When it trips on
connection failures or timeouts, the requests still in flight are cut too (cancelled, and
answered ``"endpoint_down: <why>; cut short: ..."``) instead of running out their retries against
the same dead endpoint: five attempts and their backoff, or five timeouts, that the end of the
run would wait for.  (A 401/403 is not retried: what is in flight then keeps its own answer.)  Extraction records both invalid with
reason ``endpoint_down`` (see :data:`~pytest_benchaudit.pipeline.types.ENDPOINT_DOWN_PREFIX`).
Such records mark the run incomplete; ``--resume RUN_DIR`` drops them and asks those
questions again.  ``threshold = 0`` turns the counting off (401/403 still trip).

The classification reads the error texts of this project's own client
(:mod:`.openai_compat`): ``"timeout: ..."``, ``"connection error: ..."``, ``"HTTP 401: ..."``.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from pytest_benchaudit.pipeline.types import ENDPOINT_DOWN_PREFIX, Generation, Request

__all__ = [
    "BreakerBackend",
    "BreakerState",
    "CUT",
    "DEFAULT_THRESHOLD",
    "NOT_ASKED",
    "classify_error",
    "endpoint_down_reason",
]

DEFAULT_THRESHOLD = 20  # consecutive connection failures / timeouts before a model's endpoint counts as down

# How an endpoint_down error ends: "endpoint_down: <why the breaker tripped>; <one of these>".
NOT_ASKED = "not asked"
CUT = "cut short: in flight when the breaker tripped"

_AUTH = re.compile(r"^HTTP (401|403)\b")


def classify_error(error: str | None) -> str:
    """``"ok"`` (no error), ``"down"`` (connection failure / timeout), ``"auth"`` (401/403) or ``"other"``."""
    if not error:
        return "ok"
    if _AUTH.match(error):
        return "auth"
    if error.startswith(("timeout:", "connection error:")):
        return "down"
    return "other"


def endpoint_down_reason(error: str) -> str:
    """Why the breaker tripped, from the error of a question it answered ``endpoint_down``."""
    return error.removeprefix(ENDPOINT_DOWN_PREFIX).rsplit("; ", 1)[0]


@dataclass
class BreakerState:
    """What one model's breaker has seen (read by the runner; written on the engine loop only)."""

    threshold: int
    consecutive: int = 0
    tripped: str | None = None  # why, once tripped (``endpoint_down_reason`` reads it back from an error)
    kind: str | None = None  # "down" or "auth"
    not_asked: int = 0
    cut: int = 0  # requests in flight when it tripped, stopped (recorded endpoint_down too)


class BreakerBackend:
    """A backend that stops asking once its endpoint is down (see the module docstring)."""

    def __init__(
        self, inner: Any, threshold: int = DEFAULT_THRESHOLD, label: str = "", concurrency: int | None = None
    ) -> None:
        self.inner = inner
        self.label = label
        self.state = BreakerState(threshold=max(0, int(threshold)))
        # The engine starts many more generations than the backend sends at once (they wait on
        # the client's own concurrency gate).  Waiting here instead, with the same bound, makes
        # the breaker decide when a request is about to be sent, not when it was queued.
        self._gate = asyncio.Semaphore(concurrency) if concurrency else None
        self._in_flight: set[asyncio.Task[Any]] = set()  # the tasks of requests sent and not yet answered
        self._cut: set[asyncio.Task[Any]] = set()  # of those, the ones cancelled because the breaker tripped

    @property
    def spec(self) -> Any:
        """The wrapped backend's model spec (the generation cache names the model by it)."""
        return getattr(self.inner, "spec", None)

    async def served_models(self) -> list[str] | None:
        """What the wrapped endpoint serves (the generation cache keys on it); ``None`` if it cannot say."""
        inner = getattr(self.inner, "served_models", None)
        return await inner() if inner is not None else None

    async def generate(self, request: Request) -> Generation:
        if self._gate is None:
            return await self._generate(request)
        async with self._gate:
            return await self._generate(request)

    async def _generate(self, request: Request) -> Generation:
        state = self.state
        if state.tripped is not None:
            state.not_asked += 1
            return Generation(error=f"{ENDPOINT_DOWN_PREFIX}{state.tripped}; {NOT_ASKED}", attempts=0)
        task = asyncio.current_task()
        assert task is not None  # a coroutine the engine's loop runs is always in a task
        self._in_flight.add(task)
        try:
            generation = await self.inner.generate(request)
        except asyncio.CancelledError:
            if task not in self._cut or task.cancelling() > 1:
                raise  # not (only) ours: the engine is closing
            task.uncancel()
            state.cut += 1
            return Generation(error=f"{ENDPOINT_DOWN_PREFIX}{state.tripped}; {CUT}", attempts=0)
        finally:
            self._in_flight.discard(task)
            self._cut.discard(task)
        if state.tripped is not None:  # tripped as this one was answered: its own answer stands
            return generation
        kind = classify_error(generation.error)
        if kind == "auth":
            state.kind = "auth"
            state.tripped = f"the endpoint refused the credentials ({generation.error})"
        elif kind == "down":
            state.consecutive += 1
            if state.threshold and state.consecutive >= state.threshold:
                state.kind = "down"
                state.tripped = (
                    f"{state.consecutive} consecutive connection failures or timeouts (last: {generation.error})"
                )
                self._stop_in_flight()
        else:
            state.consecutive = 0
        return generation

    def _stop_in_flight(self) -> None:
        """The breaker just tripped: cut the requests still in flight.  Each would otherwise go on
        through its whole retry schedule against the same dead endpoint (five attempts and their
        backoff, or five timeouts), and the run would wait for them before it ends; they are
        recorded ``endpoint_down`` like the questions not asked, and ``--resume`` asks them."""
        current = asyncio.current_task()
        for task in self._in_flight:
            if task is not current and task not in self._cut:
                self._cut.add(task)
                task.cancel()

    async def aclose(self) -> None:
        await self.inner.aclose()
