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
with ``Generation(error="endpoint_down: <why>", attempts=0)``; extraction records it invalid
with reason ``endpoint_down`` (see :data:`~pytest_benchaudit.pipeline.types.ENDPOINT_DOWN_PREFIX`).
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

__all__ = ["BreakerBackend", "BreakerState", "classify_error", "DEFAULT_THRESHOLD"]

DEFAULT_THRESHOLD = 20  # consecutive connection failures / timeouts before a model's endpoint counts as down

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


@dataclass
class BreakerState:
    """What one model's breaker has seen (read by the runner; written on the engine loop only)."""

    threshold: int
    consecutive: int = 0
    tripped: str | None = None  # why, once tripped
    kind: str | None = None  # "down" or "auth"
    not_asked: int = 0


class BreakerBackend:
    """A backend that stops asking once its endpoint is down (see the module docstring)."""

    def __init__(self, inner: Any, threshold: int = DEFAULT_THRESHOLD, label: str = "",
                 concurrency: int | None = None) -> None:
        self.inner = inner
        self.label = label
        self.state = BreakerState(threshold=max(0, int(threshold)))
        # The engine starts many more generations than the backend sends at once (they wait on
        # the client's own concurrency gate).  Waiting here instead, with the same bound, makes
        # the breaker decide when a request is about to be sent, not when it was queued.
        self._gate = asyncio.Semaphore(concurrency) if concurrency else None

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
            return Generation(error=ENDPOINT_DOWN_PREFIX + state.tripped, attempts=0)
        generation = await self.inner.generate(request)
        if state.tripped is not None:  # tripped while this one was in flight: its own answer stands
            return generation
        kind = classify_error(generation.error)
        if kind == "auth":
            state.kind = "auth"
            state.tripped = f"the endpoint refused the credentials ({generation.error}); not asked"
        elif kind == "down":
            state.consecutive += 1
            if state.threshold and state.consecutive >= state.threshold:
                state.kind = "down"
                state.tripped = (f"{state.consecutive} consecutive connection failures or timeouts "
                                 f"(last: {generation.error}); not asked")
        else:
            state.consecutive = 0
        return generation

    async def aclose(self) -> None:
        await self.inner.aclose()
