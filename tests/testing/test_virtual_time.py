"""The virtual clock the waiting code's tests drive (pytest_benchaudit.testing.virtual_time), and the real one."""

from __future__ import annotations

import asyncio

from pytest_benchaudit.inference.clock import MONOTONIC, Clock
from pytest_benchaudit.testing.virtual_time import VirtualClock


def test_time_passes_only_by_the_waits_asked_for() -> None:
    clock = VirtualClock(start=10.0)

    async def scenario() -> None:
        assert clock.now() == 10.0
        await clock.sleep(0.25)
        assert clock.now() == 10.25
        await clock.sleep(-1.0)  # a negative wait is no wait, and time never goes back
        assert clock.now() == 10.25
        clock.advance(1.0)
        assert clock.now() == 11.25

    asyncio.run(scenario())
    assert clock.sleeps == [0.25, -1.0]


def test_concurrent_sleepers_wake_at_the_later_time_not_the_sum() -> None:
    clock = VirtualClock(start=0.0)
    woke: dict[str, float] = {}

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke[name] = clock.now()

    async def scenario() -> None:
        await asyncio.gather(sleeper("short", 0.1), sleeper("long", 0.3), sleeper("mid", 0.2))

    asyncio.run(scenario())
    assert clock.now() == 0.3  # not 0.6
    assert woke["long"] == 0.3 and all(woke[name] >= wait for name, wait in (("short", 0.1), ("mid", 0.2)))


def test_the_real_clock_never_goes_back() -> None:
    clock: Clock = MONOTONIC

    async def scenario() -> tuple[float, float]:
        before = clock.now()
        await clock.sleep(0.0)
        return before, clock.now()

    before, after = asyncio.run(scenario())
    assert after >= before
