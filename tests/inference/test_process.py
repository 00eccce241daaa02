"""Tests for pytest_benchaudit.inference.process: the engine in a child process, against a real
endpoint (the scripted server, in this process): answers in any order, identical requests sent
once, claims released, the cache in the child, keys handed over in memory, failures of the
backend and of the child itself, and no child left behind."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator

import pytest

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.factory import budgeted_recipe, endpoint_recipe
from pytest_benchaudit.inference.process import InferenceProcessError, ProcessEngine, available
from pytest_benchaudit.inference.usage import CostMeter
from pytest_benchaudit.pipeline.types import Message, Request
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer

pytestmark = pytest.mark.skipif(not available(), reason="the inference process needs a POSIX platform")


def ask(text: str, **params: object) -> Request:
    return Request(mode="chat", messages=(Message(role="user", content=text),), params=dict(params))


class Echo:
    """Answers ``echo <question>``; holds each request ``latency`` s, and until ``gate`` opens when there is
    one; remembers who asked what (``arrived`` is set at the first request)."""

    def __init__(self, latency: float = 0.02) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.asked: list[str] = []
        self.auth: list[str] = []
        self.arrived = threading.Event()
        self.gate: threading.Event | None = None

    def __call__(self, call: Call) -> Reply:
        with self.lock:
            self.asked.append(call.last_user_text)
            self.auth.append(call.headers.get("authorization", ""))
        self.arrived.set()
        if self.gate is not None:
            self.gate.wait()
        return Reply(
            content=f"echo {call.last_user_text}",
            delay=self.latency,
            usage={"prompt_tokens": 10, "completion_tokens": 1000},
        )


@pytest.fixture
def echo() -> Echo:
    return Echo()


@pytest.fixture
def server(echo: Echo) -> Iterator[ScriptedServer]:
    srv = ScriptedServer(echo).start()
    try:
        yield srv
    finally:
        srv.stop()


def spec_for(server: ScriptedServer, **fields: object) -> ModelSpec:
    return ModelSpec(
        label="m", kind="endpoint", base_url=server.url, model_id="m", max_retries=0, api_key_env=None, **fields
    )  # type: ignore[arg-type]


@pytest.fixture(params=["fork", "spawn"])
def start(request: pytest.FixtureRequest) -> str:
    """How the child starts: forked from this process (Linux, one thread) or a fresh interpreter."""
    if request.param == "fork" and not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    return str(request.param)


@pytest.fixture
def engine(start: str) -> Iterator[ProcessEngine]:
    eng = ProcessEngine(window=16, start=start)
    try:
        yield eng
    finally:
        eng.close()


def test_prefetched_answers_come_back_in_any_order_and_are_then_forgotten(engine, server, echo) -> None:
    engine.add_model("m", endpoint_recipe(spec_for(server), 8, 20))
    requests = [ask(f"q{i}") for i in range(40)]
    engine.prefetch_many([("m", r) for r in requests])
    # Consumed in reverse: each item waits for its own answer only.
    for i in reversed(range(40)):
        assert engine.generate("m", requests[i]).text == f"echo q{i}"
    assert sorted(echo.asked) == sorted(f"q{i}" for i in range(40))
    assert engine.held() == 0


def test_identical_requests_are_sent_once_and_each_claim_reads_the_answer(engine, server, echo) -> None:
    engine.add_model("m", endpoint_recipe(spec_for(server), 4, 20))
    same = ask("twice")
    engine.prefetch("m", same)
    engine.prefetch("m", same)
    first, second = engine.generate("m", same), engine.generate("m", same)
    assert first == second and first.text == "echo twice"
    assert echo.asked == ["twice"]
    assert engine.held() == 0


def test_a_request_not_prefetched_is_asked_at_once(engine, server, echo) -> None:
    engine.add_model("m", endpoint_recipe(spec_for(server), 2, 20))
    engine.generate("m", ask("warm-up"))  # the child has started and connected
    engine.prefetch_many([("m", ask(f"later{i}")) for i in range(30)])
    assert engine.generate("m", ask("now")).text == "echo now"
    # At the head of the queue, not behind the 30 prefetched ones: read from the order the server was
    # asked in (a wall-clock bound, 15 rounds of 2 x 20 ms, failed on a loaded machine). Ahead of every
    # request still queued: behind at most those the engine had already started (its window, 16,
    # waiting for the client's 2 connections).
    assert echo.asked.index("now") <= 1 + 16 + 1


def test_a_released_claim_is_not_kept(engine, server, echo) -> None:
    engine.add_model("m", endpoint_recipe(spec_for(server), 1, 20))
    requests = [ask(f"r{i}") for i in range(20)]
    engine.prefetch_many([("m", r) for r in requests])
    for r in requests[5:]:
        engine.release("m", r)
    for r in requests[:5]:
        engine.generate("m", r)
    assert engine.held() == 0
    # Released before they were sent (one at a time, 20 ms each): most never reached the server.
    assert len(echo.asked) < 12
    # Asked again after a release: a new claim gets an answer (never waits for a dropped one).
    assert engine.generate("m", requests[-1]).text == "echo r19"


def test_unknown_model_and_unpicklable_factory_are_clear_errors(engine) -> None:
    with pytest.raises(KeyError, match="no backend registered"):
        engine.generate("nobody", ask("x"))
    with pytest.raises(TypeError, match="cannot be sent to the inference process"):
        engine.add_model("m", lambda: None)


def _not_importable_there() -> object:
    raise AssertionError("never called")


def test_a_backend_that_raises_fails_that_request_only(engine, server, start, monkeypatch) -> None:
    # A recipe from a module only this process has: a spawned interpreter cannot import it, whatever
    # name pytest's import mode gave this test module (under importlib mode the child can import that).
    only_here = types.ModuleType("benchaudit_tests_only_in_this_process")
    monkeypatch.setattr(_not_importable_there, "__module__", only_here.__name__)
    monkeypatch.setattr(only_here, "_not_importable_there", _not_importable_there, raising=False)
    monkeypatch.setitem(sys.modules, only_here.__name__, only_here)
    engine.add_model("broken", functools.partial(int, "backend bug"))  # raises when built
    engine.add_model("unknown", _not_importable_there)
    engine.add_model("m", endpoint_recipe(spec_for(server), 2, 20))
    with pytest.raises(RuntimeError, match="ValueError: .*'backend bug'"):
        engine.generate("broken", ask("x"))
    if start == "spawn":  # a forked child has this module too
        with pytest.raises(RuntimeError, match="cannot build the backend of 'unknown'.*No module named"):
            engine.generate("unknown", ask("x"))
    assert engine.generate("m", ask("y")).text == "echo y"


def test_the_key_travels_with_the_recipe(server, echo, monkeypatch, start) -> None:
    eng = ProcessEngine(window=4, start=start)
    try:
        # Set after the child started: only the hand-over can bring it there.
        monkeypatch.setenv("BENCHAUDIT_TEST_KEY", "sk-handed-over")
        spec = spec_for(server).model_copy(update={"api_key_env": "BENCHAUDIT_TEST_KEY"})
        eng.add_model("m", endpoint_recipe(spec, 2, 20), env={"BENCHAUDIT_TEST_KEY": "sk-handed-over"})
        assert eng.generate("m", ask("k")).error is None
    finally:
        eng.close()
    assert echo.auth == ["Bearer sk-handed-over"]


def test_the_cache_lives_in_the_child_and_answers_the_next_run(server, echo, tmp_path, start) -> None:
    spec = spec_for(server)
    for run in range(2):
        eng = ProcessEngine(window=4, cache_dir=tmp_path, start=start)
        try:
            eng.add_model("m", endpoint_recipe(spec, 2, 20))
            gen = eng.generate("m", ask("cached"))
            stats = eng.cache_stats()
        finally:
            eng.close()
        assert gen.text == "echo cached" and gen.from_cache is (run == 1)
        assert stats["enabled"] and stats["hits"] == run
    assert echo.asked == ["cached"]  # the second run was answered from the cache
    assert eng.cache_stats()["hits"] == 1  # read back at close


def test_models_share_one_cost_meter_in_the_child(server, echo, start) -> None:
    eng = ProcessEngine(window=4, start=start)
    meter = CostMeter(0.01)  # 1,000 completion tokens at 10 USD per million: each answer costs 0.01
    price = {"input": 0.0, "output": 10.0}  # USD per million tokens
    try:
        for label in ("a", "b"):
            spec = spec_for(server).model_copy(update={"label": label})
            eng.add_model(label, budgeted_recipe(endpoint_recipe(spec, 1, 20), meter, price, 1))
        assert eng.generate("a", ask("1")).error is None
        # The budget is spent: the other model's request is not sent either (one meter, not two).
        assert eng.generate("b", ask("2")).error is not None
    finally:
        eng.close()
    assert echo.asked == ["1"]


def test_a_child_that_dies_is_one_clear_error(server, start) -> None:
    eng = ProcessEngine(window=4, start=start)
    try:
        eng.add_model("m", endpoint_recipe(spec_for(server), 2, 20))
        assert eng.generate("m", ask("before")).text == "echo before"
        os.kill(eng._proc.pid, signal.SIGKILL)
        with pytest.raises(InferenceProcessError, match="exited with status -9.*--resume"):
            eng.generate("m", ask("after"))
    finally:
        eng.close()  # nothing left to stop: no error


def test_close_stops_the_child_even_with_requests_in_flight(server, echo, start) -> None:
    # The server holds every request until the test opens the gate: close() returning at all shows
    # that in-flight requests are cancelled, not waited for (a wall-clock bound depended on the load).
    echo.gate = threading.Event()
    eng = ProcessEngine(window=8, start=start)
    try:
        eng.add_model("m", endpoint_recipe(spec_for(server), 4, 20))
        eng.prefetch_many([("m", ask(f"slow{i}")) for i in range(8)])
        assert echo.arrived.wait(120)  # requests in flight (a bound against a hang, not a timing)
        eng.close()
        assert eng._proc.returncode == 0
        eng.close()  # twice is fine
    finally:
        echo.gate.set()


def test_close_soon_lets_the_child_stop_while_this_process_goes_on(server, echo, tmp_path, start) -> None:
    eng = ProcessEngine(window=4, cache_dir=tmp_path, start=start)
    try:
        eng.add_model("m", endpoint_recipe(spec_for(server), 2, 20))
        assert eng.generate("m", ask("one")).text == "echo one"
        eng.close_soon()
        eng.close_soon()  # twice is fine
        # The child's last word carries its cache stats: read after close_soon, and again after close.
        stats = eng.cache_stats()
        assert stats["enabled"] and stats["misses"] == 1
        assert eng.cache_stats() == stats
    finally:
        eng.close()
    assert eng._proc.returncode == 0 and eng.cache_stats() == stats


def test_close_soon_of_a_dead_child_says_nothing(server, start) -> None:
    eng = ProcessEngine(window=4, start=start)
    eng.add_model("m", endpoint_recipe(spec_for(server), 2, 20))
    eng.generate("m", ask("before"))
    os.kill(eng._proc.pid, signal.SIGKILL)
    eng._proc.wait()
    eng.close_soon()  # the socket may still take the message: then the stats are read from a dead child
    assert eng.cache_stats() == {"enabled": False, "hits": 0, "misses": 0}
    eng.close()


def test_ctrl_c_is_left_to_pytest(server, start) -> None:
    eng = ProcessEngine(window=4, start=start)
    try:
        eng.add_model("m", endpoint_recipe(spec_for(server), 2, 20))
        eng.generate("m", ask("warm"))
        os.kill(eng._proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends the whole group
        # A pending signal is delivered before the child can read the next request, so an answer
        # to it means the child has had the SIGINT (no sleep to wait for the delivery).
        assert eng.generate("m", ask("still")).text == "echo still"
        assert eng._proc.poll() is None
    finally:
        eng.close()


def test_recipes_pickle_by_reference() -> None:
    spec = ModelSpec(label="m", kind="endpoint", base_url="http://127.0.0.1:9/v1", model_id="m")
    recipe = endpoint_recipe(spec, 4, 20)
    assert isinstance(recipe, functools.partial)
    import pickle

    assert pickle.loads(pickle.dumps(recipe)).args == recipe.args


def test_an_item_waiting_is_told_which_requests_are_stuck(engine, server, echo) -> None:
    """While generate() waits, on_wait is called about every wait_tick; waiting(N) counts the
    requests sent more than N seconds ago and unanswered (the child's count, as it last said it)."""
    engine.add_model("m", endpoint_recipe(spec_for(server), 4, 20))
    engine.generate("m", ask("warm-up"))
    # The server holds both requests until on_wait has ticked 4 times and the child has counted both
    # (a 2 s answer and a wall-clock bound on the ages depended on the machine's load). The child reads
    # the same system-wide monotonic clock as this process: no age it says can exceed the time since
    # the test asked.
    counted = threading.Event()

    def held(call: Call) -> Reply:
        counted.wait(120)  # a bound against a hang only
        return Reply(content="slow")

    server.script = held
    engine.wait_tick = 0.25
    seen: list[tuple[int, float]] = []
    since_asked: list[float] = []

    def on_wait(eng: ProcessEngine) -> None:
        seen.append(eng.waiting(0.5))
        since_asked.append(time.monotonic() - asked_at)
        if len(seen) >= 4 and seen[-1][0] == 2:
            counted.set()

    engine.on_wait = on_wait
    asked_at = time.monotonic()
    engine.prefetch("m", ask("other"))  # in flight too, not the one waited for
    assert engine.generate("m", ask("stuck")).text == "slow"
    assert len(seen) >= 4
    assert seen[0] == (0, 0.0)  # asked before anything was 0.5 s old
    assert max(n for n, _ in seen) == 2
    assert all(0.5 < longest <= bound for (n, longest), bound in zip(seen, since_asked) if n), (seen, since_asked)
