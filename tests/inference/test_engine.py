"""Tests for pytest_benchaudit.inference.engine: prefetching with bounded concurrency against a
real endpoint (the scripted server), de-duplication of identical requests,
on-demand generation, priority of a waiting item, failures and shutdown."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from pytest_benchaudit.inference import engine as engine_module
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.engine import Engine, request_key
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.pipeline.types import Generation, Message, Request
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.virtual_time import VirtualClock

LATENCY = 0.05


class ConcurrencyProbe:
    """A script that holds each request for ``latency`` (and until ``gate`` opens, when there is one) and
    records the peak number in flight. With ``hold_until_in_flight`` set to N, every request is also held
    until N were in flight at once: a client that sends them concurrently opens that gate however slow
    the machine, one that sends them one at a time never does (a bound against a hang then ends it)."""

    def __init__(self, latency: float = LATENCY) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.order: list[str] = []
        self.gate: threading.Event | None = None
        self.hold_until_in_flight: int | None = None
        self.together = threading.Event()
        self.hold_deadline: float | None = None  # one bound against a hang for all the held requests

    def __call__(self, call: Call) -> Reply:
        text = call.last_user_text
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.order.append(text)
            if self.hold_until_in_flight is not None and self.peak >= self.hold_until_in_flight:
                self.together.set()
            if self.hold_deadline is None:
                self.hold_deadline = time.monotonic() + 120
        try:
            time.sleep(self.latency)  # the hold happens inside the script so it is counted
            if self.hold_until_in_flight is not None:  # (a client that never sends N at once meets the bound)
                self.together.wait(max(0.0, self.hold_deadline - time.monotonic()))
            if self.gate is not None:
                self.gate.wait()
        finally:
            with self.lock:
                self.in_flight -= 1
        return Reply(content=f"echo {text}", delay=0)


@pytest.fixture
def probe() -> ConcurrencyProbe:
    return ConcurrencyProbe()


@pytest.fixture
def server(probe: ConcurrencyProbe) -> Iterator[ScriptedServer]:
    srv = ScriptedServer(probe).start()
    try:
        yield srv
    finally:
        srv.stop()


def make_engine(server: ScriptedServer, *, concurrency: int = 8, window: int = 256) -> Engine:
    spec = ModelSpec(
        label="m",
        kind="endpoint",
        base_url=server.url,
        model_id="m",
        api_key_env=None,
        retry_base=0.01,
        max_retries=1,
        timeout=10.0,
    )
    engine = Engine(window=window)
    engine.add_model("m", lambda: OpenAICompatBackend(spec, concurrency=concurrency))
    return engine


@pytest.fixture
def engine(server: ScriptedServer) -> Iterator[Engine]:
    eng = make_engine(server)
    try:
        yield eng
    finally:
        eng.close()


def req(text: str, **params: object) -> Request:
    return Request(mode="chat", messages=(Message(role="user", content=text),), params=params)


def n_completions(server: ScriptedServer) -> int:
    return sum(1 for c in server.calls if c.path == "/v1/chat/completions")


def wait_for(predicate, timeout: float = 120.0) -> None:
    """Poll until ``predicate()`` holds; the deadline only catches a hang (a loaded machine is slow, not stuck)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


def engine_idle(engine: Engine) -> bool:
    """Nothing queued and nothing running (read under the engine's lock, as _pump changes both)."""
    with engine._lock:
        return not engine._pending and engine._running == 0


# --------------------------------------------------------------------------- prefetch and concurrency


def test_prefetch_runs_concurrently_but_never_above_the_backend_limit(server, engine, probe):
    probe.hold_until_in_flight = 4  # the first requests wait for each other: the lower bound below is an event
    n = 40
    requests = [req(f"q{i}") for i in range(n)]
    for r in requests:
        engine.prefetch("m", r)
    gens = [engine.generate("m", r) for r in requests]

    assert [g.text for g in gens] == [f"echo q{i}" for i in range(n)]
    assert all(g.error is None for g in gens)
    assert n_completions(server) == n
    assert probe.peak <= 8
    # really concurrent, not one at a time: read from the server's count of requests held at once, reached
    # by the held requests however slowly the client sends (a wall-clock bound, under 60% of n * LATENCY,
    # depended on the machine's load, and so did the peak of requests held LATENCY s each)
    assert probe.peak >= 4


def test_window_bounds_requests_in_flight(server, probe):
    engine = make_engine(server, concurrency=8, window=3)
    try:
        requests = [req(f"w{i}") for i in range(12)]
        for r in requests:
            engine.prefetch("m", r)
        gens = [engine.generate("m", r) for r in requests]
    finally:
        engine.close()
    assert [g.text for g in gens] == [f"echo w{i}" for i in range(12)]
    assert probe.peak <= 3
    assert n_completions(server) == 12


# --------------------------------------------------------------------------- consumption and de-duplication


def test_generate_of_prefetched_request_does_not_send_again(server, engine):
    r = req("once")
    engine.prefetch("m", r)
    wait_for(lambda: n_completions(server) == 1)
    gen = engine.generate("m", r)
    assert gen.text == "echo once"
    # A second send would be queued or running in the engine until its answer came back (after the
    # server counted it): once the engine has nothing queued or running, the count is final.
    wait_for(lambda: engine_idle(engine))
    assert n_completions(server) == 1


def test_identical_prefetches_are_sent_once_and_share_the_generation(server, engine):
    r = req("twice", temperature=0.0)
    engine.prefetch("m", r)
    engine.prefetch(
        "m", Request(mode="chat", messages=(Message(role="user", content="twice"),), params={"temperature": 0.0})
    )  # equal, not the same object
    first = engine.generate("m", r)
    second = engine.generate("m", r)
    assert isinstance(first, Generation)
    assert second is first
    assert n_completions(server) == 1


def test_different_params_are_different_requests(server, engine):
    a, b = req("same text", temperature=0.0), req("same text", temperature=1.0)
    assert request_key("m", a) != request_key("m", b)
    assert request_key("m", a) != request_key("other", a)
    engine.prefetch("m", a)
    engine.prefetch("m", b)
    engine.generate("m", a)
    engine.generate("m", b)
    assert n_completions(server) == 2


def test_consumed_request_is_forgotten(server, engine):
    r = req("again")
    engine.prefetch("m", r)
    engine.generate("m", r)
    engine.generate("m", r)  # every consumer has had it: generated anew
    assert n_completions(server) == 2
    assert [c.attempt for c in server.calls] == [1, 2]


def test_generate_without_prefetch_runs_on_demand(server, engine):
    gen = engine.generate("m", req("on demand"))
    assert gen.text == "echo on demand"
    assert gen.error is None
    assert n_completions(server) == 1


def open_gate_once_first_in_queue(engine: Engine, probe: ConcurrencyProbe, request: Request) -> None:
    """Hold what the server is answering until ``request`` heads the engine's queue, then let all through:
    the request in flight cannot finish (and let the next queued one start) before the item asks, however
    slowly the test's thread runs (a 0.05 s hold could end first on a loaded machine)."""
    probe.gate = gate = threading.Event()
    key = request_key("m", request)

    def first_in_queue() -> bool:  # (or already started: the loop had not yet started another)
        with engine._lock:
            slot = engine._slots.get(key)
            return slot is not None and (slot.started or (bool(engine._pending) and engine._pending[0] == key))

    def open_then() -> None:
        try:
            wait_for(first_in_queue)
        finally:
            gate.set()

    threading.Thread(target=open_then, daemon=True).start()


def test_waiting_item_jumps_the_queue(server, probe):
    engine = make_engine(server, window=1)
    try:
        for i in range(5):
            engine.prefetch("m", req(f"bg{i}"))
        open_gate_once_first_in_queue(engine, probe, req("urgent"))
        urgent = engine.generate("m", req("urgent"))
        assert urgent.text == "echo urgent"
        # at most the one request already in flight went before it
        assert probe.order.index("urgent") <= 1
        for i in range(5):
            assert engine.generate("m", req(f"bg{i}")).text == f"echo bg{i}"
    finally:
        engine.close()
    assert probe.peak == 1


def test_prefetched_item_requested_now_moves_to_the_front(server, probe):
    engine = make_engine(server, window=1)
    try:
        for i in range(6):
            engine.prefetch("m", req(f"p{i}"))
        open_gate_once_first_in_queue(engine, probe, req("p5"))
        assert engine.generate("m", req("p5")).text == "echo p5"
        assert probe.order.index("p5") <= 1
        for i in range(5):
            engine.generate("m", req(f"p{i}"))
    finally:
        engine.close()
    assert n_completions(server) == 6


# --------------------------------------------------------------------------- failures


def test_unknown_model_is_refused(engine):
    with pytest.raises(KeyError, match="no backend registered for model 'nope'"):
        engine.prefetch("nope", req("x"))
    with pytest.raises(KeyError):
        engine.generate("nope", req("x"))


def test_failed_request_comes_back_as_generation_error(server, engine):
    server.script = lambda call: Reply(status=400, error_message="bad request here")
    gen = engine.generate("m", req("bad"))
    assert gen.error == "HTTP 400: bad request here"
    assert gen.text == ""


class _Broken:
    async def generate(self, request: Request) -> Generation:
        raise RuntimeError("backend bug")

    async def aclose(self) -> None:
        pass


def test_backend_exception_reaches_the_waiting_item_instead_of_hanging():
    engine = Engine()
    engine.add_model("b", _Broken)
    try:
        with pytest.raises(RuntimeError, match="backend bug"):
            engine.generate("b", req("x"))
    finally:
        engine.close()


# --------------------------------------------------------------------------- shutdown


def test_close_stops_the_loop_thread_and_closes_backends(server):
    engine = make_engine(server)
    assert engine.generate("m", req("hello")).text == "echo hello"
    backend = engine._backends["m"]
    assert engine._thread.is_alive()
    engine.close()
    assert not engine._thread.is_alive()
    assert engine._loop.is_closed()
    assert backend.is_closed
    engine.close()  # a second close is harmless


def test_close_with_requests_queued_and_in_flight_returns_promptly(server, probe):
    # The server holds every request until the test opens the gate: close() returning at all shows that
    # it neither drains the queue nor waits for the requests in flight (a wall-clock bound depended on the load).
    probe.gate = threading.Event()
    engine = make_engine(server, concurrency=2, window=2)
    try:
        for i in range(30):
            engine.prefetch("m", req(f"late{i}"))
        wait_for(lambda: n_completions(server) >= 1)
        engine.close()
        assert not engine._thread.is_alive()
        assert n_completions(server) < 30  # the queue was dropped, not drained
    finally:
        probe.gate.set()


def test_close_without_any_request():
    engine = Engine()
    engine.close()
    assert not engine._thread.is_alive()


def test_run_sync_runs_on_the_engine_loop():
    engine = Engine()
    try:

        async def where() -> str:
            await asyncio.sleep(0)
            return threading.current_thread().name

        assert engine.run_sync(where()) == "benchaudit-engine"
    finally:
        engine.close()


# --------------------------------------------------------------------------- nothing kept once consumed


def test_generations_are_forgotten_once_consumed_or_released(server, engine):
    requests = [req(f"q{i}") for i in range(20)]
    engine.prefetch_many([("m", r) for r in requests])
    for r in requests[:15]:
        assert engine.generate("m", r).error is None
    for r in requests[15:]:  # queued ahead, but their items will never ask (e.g. they errored first)
        engine.release("m", r)
    wait_for(lambda: engine._running == 0)
    assert engine._slots == {}  # no request, no answer held
    # A request released and asked later is simply asked again.
    assert engine.generate("m", requests[-1]).text == "echo q19"
    assert engine._slots == {}


def test_waiting_counts_requests_unanswered_longer_than_n_seconds(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The engine's sent times and waiting() read a virtual clock that moves 0.25 s at each on_wait tick
    # from the moment both requests are at the server until a tick counts both; the server holds them
    # until then. The ages are exact whatever the machine's load (a 1.5 s answer and wall-clock bounds
    # depended on it).
    clock = VirtualClock()
    monkeypatch.setattr(engine_module, "time", SimpleNamespace(monotonic=clock.now))
    counted = threading.Event()

    def held(call: Call) -> Reply:
        counted.wait(120)  # a bound against a hang only: the tick that counts both sets it
        return Reply(content="slow")

    server.script = held
    engine = Engine(window=8)
    spec = ModelSpec(label="m", kind="endpoint", base_url=server.url, model_id="m", timeout=300.0)
    engine.add_model("m", lambda: OpenAICompatBackend(spec, concurrency=4))
    engine.wait_tick = 0.05
    seen: list[tuple[int, float]] = []

    def on_wait(eng: Engine) -> None:
        seen.append(eng.waiting(0.5))
        if seen[-1][0] == 2:
            counted.set()  # time stops here: every later tick reads the same ages
        elif n_completions(server) == 2 and not counted.is_set():  # both asked (sent_at set before)
            clock.advance(0.25)

    engine.on_wait = on_wait
    try:
        engine.prefetch("m", Request(mode="chat", messages=(Message(role="user", content="a"),)))
        assert engine.generate("m", Request(mode="chat", messages=(Message(role="user", content="b"),))).text == "slow"
    finally:
        engine.close()
    assert len(seen) >= 4 and seen[0] == (0, 0.0)  # asked before anything was 0.5 s old
    counting = [entry for entry in seen if entry[0]]
    # 0, 0.25 and 0.5 s old are not "older than 0.5 s"; at 0.75 s both are
    assert seen[: seen.index(counting[0])] == [(0, 0.0)] * seen.index(counting[0]) and counting[0] == (2, 0.75)
    assert max(n for n, _ in seen) == 2 and all(longest == 0.75 for _, longest in counting)
