"""The time the inference client reads and waits on, as one small seam (httpx's pattern of injectable
transports): the real monotonic clock in a run, a virtual one in tests, so no test of pacing or pausing
depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["MONOTONIC", "Clock", "MonotonicClock"]


class Clock(Protocol):
    """Seconds on a clock that never goes back, and an asynchronous wait on it."""

    def now(self) -> float:
        """The current time, in seconds (only differences mean anything)."""

    async def sleep(self, seconds: float) -> None:
        """Return once at least ``seconds`` have passed on this clock."""


class MonotonicClock:
    """:func:`time.monotonic` and :func:`asyncio.sleep`: the clock of every real run."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


MONOTONIC: Clock = MonotonicClock()
