"""Fail fast: the per-endpoint circuit breaker, 401/403, an incomplete run and --resume."""

from __future__ import annotations

import asyncio
import socket

import pytest

from pytest_benchaudit.inference.breaker import BreakerBackend, classify_error
from pytest_benchaudit.pipeline.types import Generation, Question, Request
from pytest_benchaudit.scoring.extract import extract
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

OPTIONS = ["first", "second", "third", "fourth"]


class _Inner:
    """A backend stand-in answering from a list of errors (None: an answer)."""

    spec = None

    def __init__(self, errors: list[str | None]) -> None:
        self.errors = list(errors)
        self.sent = 0

    async def generate(self, request: Request) -> Generation:
        self.sent += 1
        error = self.errors.pop(0) if self.errors else None
        return Generation(error=error) if error else Generation(text="Answer: A")

    async def aclose(self) -> None:
        pass


def _ask(backend: BreakerBackend, n: int) -> list[Generation]:
    request = Request(mode="chat", messages=[{"role": "user", "content": "q"}], params={})

    async def go() -> list[Generation]:
        return [await backend.generate(request) for _ in range(n)]

    return asyncio.run(go())


def test_classify_error() -> None:
    assert classify_error(None) == "ok"
    assert classify_error("timeout: no answer within 5s (TimeoutError) (gave up after 3 attempts)") == "down"
    assert classify_error("connection error: ClientConnectorError: refused") == "down"
    assert classify_error("HTTP 401: Incorrect API key provided") == "auth"
    assert classify_error("HTTP 403: forbidden") == "auth"
    assert classify_error("HTTP 500: overloaded (gave up after 3 attempts)") == "other"
    assert classify_error("HTTP 4011: no") == "other"


def test_trips_after_n_consecutive_connection_failures_and_stops_sending() -> None:
    down = "connection error: refused"
    inner = _Inner([down] * 3 + [None] + [down] * 5)
    breaker = BreakerBackend(inner, threshold=5, label="m")
    out = _ask(breaker, 20)
    # 3 failures, an answer resets the count, then 5 failures trip it; the last 11 are never sent
    assert inner.sent == 9 and breaker.state.tripped and breaker.state.not_asked == 11
    assert all(g.error and g.error.startswith("endpoint_down: 5 consecutive") and g.attempts == 0 for g in out[9:])
    q = Question(benchmark="b", task="t", id="q1", index=0, text="q", choices={"A": "x", "B": "y"}, gold="A")
    assert extract("final_answer_letter", out[-1], q, "strip").invalid_reason == "endpoint_down"
    assert extract("final_answer_letter", out[0], q, "strip").invalid_reason == "inference_error"


def test_auth_failure_trips_at_once_and_threshold_zero_never_counts() -> None:
    inner = _Inner(["HTTP 401: Incorrect API key provided"])
    breaker = BreakerBackend(inner, threshold=0)
    out = _ask(breaker, 4)
    assert inner.sent == 1 and out[0].error == "HTTP 401: Incorrect API key provided"
    assert "Incorrect API key provided" in out[1].error and breaker.state.kind == "auth"
    never = BreakerBackend(_Inner(["timeout: slow"] * 50), threshold=0)
    _ask(never, 50)
    assert never.state.tripped is None and never.inner.sent == 50


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _suite(pytester: pytest.Pytester, n: int) -> None:
    rows = [{"id": f"q{i:03d}", "question": f"Question {i}?", "options": OPTIONS, "gold": "A"} for i in range(n)]
    write_mcq_suite(pytester.path, "deadbench", rows)


def _run(pytester: pytest.Pytester, url: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "suites/deadbench",
        "--data-dir",
        "data",
        "--model",
        f"m@{url}",
        "--report-dir",
        "out",
        "--max-retries",
        "0",
        "-p",
        "no:randomly",
        "--no-cache",
        *extra,
    )


def test_dead_endpoint_is_not_asked_every_question_and_resume_asks_the_rest(pytester: pytest.Pytester) -> None:
    _suite(pytester, 60)
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    result = _run(pytester, dead, "--breaker", "5", "--concurrency", "2")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # incomplete
    text = result.stdout.str()
    assert text.count("endpoint down — 5 consecutive connection failures or timeouts") == 1
    result.stdout.fnmatch_lines(["*INCOMPLETE: model m: * questions not asked (endpoint_down: *--resume out/*"])
    run_dir = only_run_dir(pytester.path / "out")
    out = read_run(run_dir)
    reasons = [r["invalid_reason"] for r in out["records"]]
    assert len(reasons) == 60  # every question recorded
    assert 5 <= reasons.count("inference_error") <= 5 + 2  # the breaker's N, plus those already in flight
    assert reasons.count("endpoint_down") == 60 - reasons.count("inference_error")
    assert out["run"]["incomplete"]["m"]["not_asked"] == reasons.count("endpoint_down")
    (res,) = out["summary"]["results"]
    assert res["invalid_reasons"]["endpoint_down"] == reasons.count("endpoint_down")
    # --resume, endpoint back: the questions not asked are asked now, each key recorded once
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        resumed = _run(pytester, server.url, "--breaker", "5", "--concurrency", "2", "--resume", str(run_dir))
        asked = [c for c in server.calls if c.path.endswith("/completions")]
    # Nothing is left incomplete, but the run still holds the failed requests recorded before the breaker
    # tripped: a resumed run's exit status is the whole run's records' (README, exit status 1).
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED
    assert reasons.count("inference_error") > 0
    again = read_run(run_dir)
    keys = [r["question_id"] for r in again["records"]]
    assert len(keys) == len(set(keys)) == 60
    assert len(asked) == reasons.count("endpoint_down")
    assert not any(r["invalid_reason"] == "endpoint_down" for r in again["records"])
    assert "incomplete" not in again["run"]


def test_401_stops_the_model_at_its_first_answer_with_the_providers_message(pytester: pytest.Pytester) -> None:
    _suite(pytester, 20)
    refuse = Reply(status=401, error_message="Incorrect API key provided: sk-****1234.")
    with ScriptedServer(lambda call: refuse) as server:
        result = _run(pytester, server.url, "--concurrency", "1")
        asked = [c for c in server.calls if c.path.endswith("/completions")]
    assert len(asked) == 1
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*model m: endpoint down — the endpoint refused the credentials (HTTP 401: Incorrect API key provided*"]
    )
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert records[0]["invalid_reason"] == "inference_error" and "Incorrect API key" in records[0]["error"]
    assert [r["invalid_reason"] for r in records[1:]] == ["endpoint_down"] * 19


def test_breaker_option_is_validated(pytester: pytest.Pytester) -> None:
    _suite(pytester, 2)
    result = _run(pytester, f"http://127.0.0.1:{_closed_port()}/v1", "--breaker", "-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--breaker -1: expected 0 (off) or a positive number*"])


def test_endpoint_that_never_answers_trips_on_timeouts(pytester: pytest.Pytester) -> None:
    _suite(pytester, 40)
    with ScriptedServer(lambda call: Reply(content="Answer: A", delay=30)) as server:
        result = _run(pytester, server.url, "--breaker", "3", "--concurrency", "2", "--request-timeout", "0.3")
        asked = [c for c in server.calls if c.path.endswith("/completions")]
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert 3 <= len(asked) <= 3 + 2  # N timeouts, plus what was in flight when it tripped
    result.stdout.fnmatch_lines(["*endpoint down — 3 consecutive connection failures or timeouts (last: timeout*"])
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(records) == 40 and sum(r["invalid_reason"] == "endpoint_down" for r in records) >= 35


def test_endpoint_that_cuts_every_body_trips_the_breaker(pytester: pytest.Pytester) -> None:
    """A connection cut mid-body is a connection failure: consecutive ones trip the breaker as
    refused connections do (they were read as malformed answers, which reset its count)."""
    _suite(pytester, 30)
    with ScriptedServer(lambda call: Reply(content="Answer: A", cut_body_after=10)) as server:
        result = _run(pytester, server.url, "--breaker", "3", "--concurrency", "1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*endpoint down — 3 consecutive connection failures or timeouts (last: connection error: cut mid-body*"]
    )
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert [r["invalid_reason"] for r in records[:3]] == ["inference_error"] * 3
    assert all(r["error"].startswith("connection error: cut mid-body") for r in records[:3])
    assert [r["invalid_reason"] for r in records[3:]] == ["endpoint_down"] * 27


class _Slow:
    """Fails the first ``fast`` requests on the loop's next turn (after every request already started
    was sent: the loop runs its ready tasks in order, whatever the machine's speed); the others hang
    until cancelled (a request going through its retries). :attr:`started` is set once one is sent."""

    spec = None

    def __init__(self, fast: int) -> None:
        self.fast = fast
        self.sent = 0
        self.started = asyncio.Event()

    async def generate(self, request: Request) -> Generation:
        self.sent += 1
        self.started.set()
        if self.sent <= self.fast:
            await asyncio.sleep(0)
        else:
            await asyncio.Event().wait()  # never set: only a cut (a cancel) ends it
        return Generation(error="connection error: refused (gave up after 5 attempts)")

    async def aclose(self) -> None:
        pass


REQUEST = Request(mode="chat", messages=[{"role": "user", "content": "q"}], params={})


def test_requests_in_flight_when_it_trips_are_cut_not_left_to_their_retries() -> None:
    breaker = BreakerBackend(_Slow(fast=3), threshold=3, label="m", concurrency=8)

    async def go() -> list[Generation]:
        # without the cut, the 5 slow ones would hang for ever: the bound only catches that hang
        return await asyncio.wait_for(asyncio.gather(*(breaker.generate(REQUEST) for _ in range(12))), 120)

    out = asyncio.run(go())
    assert breaker.inner.sent == 8  # the gate's 8 were sent; the 4 behind it never were
    assert [g.error.startswith("connection error") for g in out].count(True) == 3
    cut = [g for g in out if g.error.endswith("; cut short: in flight when the breaker tripped")]
    not_asked = [g for g in out if g.error.endswith("; not asked")]
    assert len(cut) == breaker.state.cut == 5 and len(not_asked) == breaker.state.not_asked == 4
    assert all(
        g.error.startswith("endpoint_down: 3 consecutive connection failures") and g.attempts == 0
        for g in cut + not_asked
    )
    q = Question(benchmark="b", task="t", id="q1", index=0, text="q", choices={"A": "x", "B": "y"}, gold="A")
    assert extract("final_answer_letter", cut[0], q, "strip").invalid_reason == "endpoint_down"
    assert not breaker._in_flight and not breaker._cut


def test_a_401_does_not_cut_what_is_in_flight() -> None:
    """A 401/403 is not retried: the requests in flight then end soon on their own, with their answers."""

    class _Refuses:
        spec = None
        sent = 0

        def __init__(self) -> None:
            self.refused = asyncio.Event()

        async def generate(self, request: Request) -> Generation:
            self.sent += 1
            if self.sent == 1:
                await asyncio.sleep(0)  # the next three are sent meanwhile (the loop's next turn)
                self.refused.set()  # the breaker reads the 401 before any waiter of this event runs
                return Generation(error="HTTP 401: Incorrect API key provided")
            await self.refused.wait()  # answered only once the 401 came back: in flight when it tripped
            return Generation(text="Answer: A")

        async def aclose(self) -> None:
            pass

    breaker = BreakerBackend(_Refuses(), threshold=3, label="m", concurrency=4)

    async def go() -> list[Generation]:
        return await asyncio.gather(*(breaker.generate(REQUEST) for _ in range(6)))

    out = asyncio.run(go())
    assert breaker.state.kind == "auth" and breaker.state.cut == 0
    assert [g.text for g in out[1:4]] == ["Answer: A"] * 3  # in flight when it tripped: answered
    assert all(g.error.endswith("; not asked") for g in out[4:])


def test_a_cancel_from_outside_is_not_swallowed() -> None:
    """The engine closing cancels requests in flight: the breaker passes that on, it is not a cut."""
    breaker = BreakerBackend(_Slow(fast=0), threshold=3, label="m")

    async def go() -> None:
        task = asyncio.ensure_future(breaker.generate(REQUEST))
        await breaker.inner.started.wait()  # in flight at the endpoint
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert breaker.state.tripped is None and breaker.state.cut == 0 and not breaker._in_flight


def test_endpoint_down_reason_reads_back_why_it_tripped() -> None:
    from pytest_benchaudit.inference.breaker import endpoint_down_reason

    why = "20 consecutive connection failures or timeouts (last: connection error: a; b)"
    assert endpoint_down_reason(f"endpoint_down: {why}; not asked") == why
    assert endpoint_down_reason(f"endpoint_down: {why}; cut short: in flight when the breaker tripped") == why


def test_dead_endpoint_with_the_default_retries_ends_without_waiting_out_theirs(pytester: pytest.Pytester) -> None:
    """The client's default retries (4, with backoff): the requests in flight when the breaker trips
    are cut (without the cut all 8 in flight end as inference errors, after their whole retry
    schedule); every question is recorded."""
    _suite(pytester, 30)
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    result = pytester.runpytest_subprocess(
        "suites/deadbench",
        "--data-dir",
        "data",
        "--model",
        f"m@{dead}",
        "--report-dir",
        "out",
        "--no-cache",
        "--breaker",
        "3",
        "--concurrency",
        "8",
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    reasons = [r["invalid_reason"] for r in records]
    # the breaker's 3, and perhaps one more that failed in the same instant
    assert len(reasons) == 30 and 3 <= reasons.count("inference_error") <= 5
    assert any(r["error"].endswith("; cut short: in flight when the breaker tripped") for r in records)
    assert reasons.count("endpoint_down") == 30 - reasons.count("inference_error")
    result.stdout.fnmatch_lines(
        [
            "*endpoint down — 3 consecutive connection failures or timeouts (last: *"
            "(gave up after 5 attempts)). Its remaining*"
        ]
    )
