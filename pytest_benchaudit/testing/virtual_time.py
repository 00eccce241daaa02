"""A clock for tests of code that waits (:class:`~pytest_benchaudit.inference.clock.Clock`): time passes
only when a coroutine sleeps on it, by exactly what it asked, so a test of pacing or pausing reads the
waits the code chose, never the machine's speed.
"""

from __future__ import annotations

import asyncio

__all__ = ["VirtualClock"]


class VirtualClock:
    """Virtual seconds from ``start``. :meth:`sleep` lets every other ready task run first (as a real wait
    would), then moves the time to the sleeper's wake-up time unless it is already later: two tasks that
    sleep at once wake at the later of their two times, not at their sum. Time never goes back."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self.sleeps: list[float] = []  # every wait asked for, in order

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        wake = self._now + max(0.0, seconds)
        self.sleeps.append(seconds)
        await asyncio.sleep(0)
        self._now = max(self._now, wake)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass with nobody waiting (the time between two calls of a test)."""
        self._now += max(0.0, seconds)
