"""Adaptive concurrency: halve once per burst of frequent 429s, not on sporadic ones; pause as the endpoint
says, recover gradually; against a loopback token bucket no request is lost."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.inference.backend import parse_model_spec
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.inference.ratelimit import AdaptiveLimiter, parse_duration, rate_limit_wait
from pytest_benchaudit.pipeline.types import Message, Request
from pytest_benchaudit.testing.provider_fakes import ProviderFake
from pytest_benchaudit.testing.virtual_time import VirtualClock


@pytest.mark.parametrize(
    "text, seconds",
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1m30.5s", 90.5), ("0.25", 0.25), ("soon", None), ("", None)],
)
def test_parse_duration(text, seconds) -> None:
    assert parse_duration(text) == seconds


def test_rate_limit_wait_prefers_explicit_hints() -> None:
    assert rate_limit_wait({"Retry-After-Ms": "250", "Retry-After": "3"}) == 0.25
    assert rate_limit_wait({"retry-after": "2"}) == 2.0
    spent = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "900",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert rate_limit_wait(spent) == 1.0  # only the exhausted budget counts
    assert rate_limit_wait(spent, exhausted_only=False) == 360.0
    assert rate_limit_wait({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "1s"}) is None


def test_halves_once_per_burst_and_recovers_gradually() -> None:
    async def scenario() -> None:
        lim = AdaptiveLimiter(32)
        assert (lim.window, lim.threshold) == (32, 5)
        tickets = [await lim.acquire() for _ in range(32)]
        for t in tickets:  # 32 refusals of requests sent at the old rate: one decrease, at the fifth
            lim.throttle(t, 0.0)
            lim.release()
        assert lim.cap == 16 and lim.decreases == 1 and lim.throttled == 32 and lim.isolated == 4
        late = await lim.acquire()  # sent after the decrease, refused while refusals are frequent: halves again
        lim.throttle(late, 0.0)
        lim.release()
        assert lim.cap == 8 and lim.decreases == 2
        for _ in range(8):  # one round of successes at limit 8 adds one
            lim.success()
        assert lim.cap == 9
        for _ in range(500):
            lim.success()
        assert lim.cap == 32  # never above the ceiling
        assert lim.stats()["isolated"] == 4

    asyncio.run(scenario())


def test_sporadic_429s_neither_halve_nor_pace() -> None:
    """1,000 answers, every 67th refused (1.5%, Retry-After 0, as testing/mixed_server's mix): the cap stays."""

    async def scenario() -> None:
        lim = AdaptiveLimiter(32)
        for i in range(1, 1001):
            t = await lim.acquire()
            if i % 67 == 0:
                lim.throttle(t, 0.0)
            else:
                lim.success()
            lim.release()
        assert lim.throttled == lim.isolated == 14
        assert lim.cap == 32 and lim.decreases == 0 and lim.lowest == 32 and lim.interval == 0.0

    asyncio.run(scenario())


def test_an_isolated_429_still_pauses_for_the_named_wait() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        lim = AdaptiveLimiter(32, clock=clock)
        t = await lim.acquire()
        lim.throttle(t, 0.05)
        lim.release()
        assert lim.isolated == 1 and lim.cap == 32 and lim.interval == 0.0
        start = clock.now()
        await lim.acquire()
        assert clock.now() - start >= 0.049

    asyncio.run(scenario())


def test_refusals_count_only_within_the_window() -> None:
    lim = AdaptiveLimiter(4)  # window 4, threshold 2
    lim.throttle(0.0, 0.0)
    for _ in range(4):  # the refusal leaves the window
        lim.success()
    lim.throttle(0.0, 0.0)
    assert lim.decreases == 0 and lim.isolated == 2
    lim.success()
    lim.throttle(0.0, 0.0)  # two refusals among the last four answers: congestion
    assert lim.decreases == 1 and lim.cap == 2


def test_pause_pacing_and_bound_are_honoured() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        lim = AdaptiveLimiter(2, clock=clock)
        t = await lim.acquire()
        lim.throttle(t, 0.05)  # one refusal in the window of two: sporadic, paused for but not paced
        lim.release()
        assert lim.interval == 0.0 and lim.cap == 2 and lim.isolated == 1
        await lim.acquire()
        lim.release()
        t = clock.now()
        lim.throttle(t - 1.0, 0.05)  # two refusals in a row: a limit (a request sent before any decrease)
        assert lim.interval == 0.05  # sends spaced by the endpoint's wait
        start = clock.now()
        await lim.acquire()
        assert clock.now() - start >= 0.049  # waited out the endpoint's Retry-After
        lim.release()
        peak, sent = 0, []

        async def one() -> None:
            nonlocal peak
            await lim.acquire()
            sent.append(clock.now())
            peak = max(peak, lim.in_flight)
            await clock.sleep(0.001)
            lim.release()

        await asyncio.gather(*(one() for _ in range(5)))
        assert peak == 1 and lim.in_flight == 0  # halved from 2 to 1: one at a time
        assert min(b - a for a, b in zip(sent, sent[1:], strict=False)) >= 0.045  # and paced
        for _ in range(200):
            lim.success()
        assert lim.interval < 0.001 and lim.cap == 2  # recovered gradually

    asyncio.run(scenario())


@settings(max_examples=200, deadline=None)
@given(
    ceiling=st.integers(1, 64),
    events=st.lists(st.tuples(st.sampled_from(["ok", "429", "429-old"]), st.floats(0.0, 1.0)), max_size=300),
)
def test_cap_stays_within_floor_and_ceiling(ceiling: int, events: list[tuple[str, float]]) -> None:
    lim = AdaptiveLimiter(ceiling)
    for kind, wait in events:
        if kind == "ok":
            lim.success()
        else:  # a request sent now, or one sent before every decrease
            lim.throttle(lim.clock.now() if kind == "429" else 0.0, wait)
        assert lim.floor <= lim.cap <= lim.ceiling and lim.lowest >= lim.floor
        assert lim._refused == sum(lim._outcomes) <= lim.window
        assert lim.isolated + lim.decreases <= lim.throttled
    assert lim.throttled == sum(kind != "ok" for kind, _ in events)


def test_success_with_an_exhausted_budget_pauses() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        lim = AdaptiveLimiter(4, clock=clock)
        lim.success({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "150ms"})
        start = clock.now()
        await lim.acquire()
        assert clock.now() - start >= 0.14

    asyncio.run(scenario())


def test_no_request_lost_against_a_token_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    n, rate = 150, 100.0
    with ProviderFake("openai", key="sk-bucket", bucket=(rate, 5)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.root + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-bucket")
        spec = parse_model_spec("openai/gpt-4o").model_copy(update={"max_retries": 0})

        async def scenario() -> tuple[list, OpenAICompatBackend]:
            backend = OpenAICompatBackend(spec, concurrency=32)
            requests = [Request(mode="chat", messages=(Message(role="user", content=f"q{i}"),)) for i in range(n)]
            try:
                return await asyncio.gather(*(backend.generate(r) for r in requests)), backend
            finally:
                await backend.aclose()

        gens, backend = asyncio.run(scenario())
    assert all(g.error is None for g in gens), [g.error for g in gens if g.error][:3]
    assert fake.granted == n and fake.refused_429 > 0
    assert backend.limiter.decreases >= 1 and backend.limiter.lowest < 32
