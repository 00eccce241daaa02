"""``--model vllm:HF_ID`` (one launched server per run, shared by xdist workers) and
``--model ID@URL1,URL2`` (one model balanced over several endpoints).

A stand-in ``vllm`` executable (a shell script that execs
``pytest_benchaudit.testing.fake_vllm``) is put first on PATH; it serves the scripted
server under the requested model id and logs each launch to ``$FAKE_VLLM_LAUNCH_LOG``.
No real vLLM here (no GPU on the machines these tests run on).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_benchaudit.inference.backend import ModelSpec, parse_model_spec
from pytest_benchaudit.inference.balanced import BalancedBackend
from pytest_benchaudit.pipeline.types import Message, Request
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.toy import TOY_QUESTIONS
from pytest_benchaudit.testing.virtual_time import VirtualClock

MCQ = len(TOY_QUESTIONS)  # the toy mcq task; the fake answers "Answer: A" to all of them
GOLD_A = sum(1 for _, _, gold in TOY_QUESTIONS if gold == "A")


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``vllm`` first on PATH that runs the fake; returns the launch log."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest_benchaudit.testing.fake_vllm "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    log = tmp_path / "launches.jsonl"
    monkeypatch.setenv("FAKE_VLLM_LAUNCH_LOG", str(log))
    monkeypatch.delenv("BENCHAUDIT_VLLM_ARGS", raising=False)
    return log


def launches(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def vllm_args(*extra: str) -> list[str]:
    return [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        "vllm:org/tiny",
        "--report-dir",
        "out",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        *extra,
    ]


# -- spec parsing -----------------------------------------------------------------------------


def test_vllm_spec_and_extra_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHAUDIT_VLLM_ARGS", "--max-model-len 2048 --dtype 'half'")
    spec = parse_model_spec("vllm:Qwen/Qwen3-0.6B")
    assert (spec.kind, spec.label, spec.model_id) == ("vllm", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B")
    assert spec.launch_args == ("--max-model-len", "2048", "--dtype", "half")
    named = {
        "qwen": {
            "launch": "vllm",
            "model": "Qwen/Qwen3-0.6B",
            "args": ["--enforce-eager"],
            "startup_timeout": 60,
            "concurrency": 8,
        }
    }
    spec = parse_model_spec("qwen", named)
    assert (spec.kind, spec.label, spec.model_id, spec.concurrency) == ("vllm", "qwen", "Qwen/Qwen3-0.6B", 8)
    assert spec.launch_args == ("--enforce-eager", "--max-model-len", "2048", "--dtype", "half")
    assert spec.public()["launch"][:3] == ["vllm", "serve", "Qwen/Qwen3-0.6B"]


def test_balanced_spec() -> None:
    spec = parse_model_spec("m@http://127.0.0.1:1/v1/,http://127.0.0.1:2/v1")
    assert spec.kind == "endpoint" and spec.base_url == "http://127.0.0.1:1/v1"
    assert spec.endpoints == ("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1")
    assert spec.public()["endpoints"] == list(spec.endpoints)
    assert parse_model_spec("m@http://127.0.0.1:1/v1").endpoints == ()  # one URL: the plain client
    named = {"dp": {"endpoint": ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], "model": "x"}}
    assert parse_model_spec("dp", named).endpoints == spec.endpoints


# -- vllm: launched once, shared, stopped ------------------------------------------------------


def test_vllm_serial_run_launches_one_server(
    pytester: pytest.Pytester, toy, fake_vllm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHAUDIT_VLLM_ARGS", "--max-model-len 2048")
    result = pytester.runpytest(*vllm_args())
    result.assert_outcomes(passed=GOLD_A, failed=MCQ - GOLD_A)
    (launch,) = launches(fake_vllm)
    assert launch["model"] == "org/tiny" and launch["host"] == "127.0.0.1"
    assert launch["extra"] == ["--max-model-len", "2048"]
    assert not alive(launch["pid"])  # stopped at the end of the run
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) == MCQ
    assert all(r["error"] is None and r["served_model"] == "org/tiny" for r in out["records"])
    (model,) = out["run"]["models"]
    assert model["kind"] == "vllm" and model["endpoint"] == f"http://127.0.0.1:{launch['port']}/v1"
    assert model["launch"] == ["vllm", "serve", "org/tiny", "--max-model-len", "2048"]
    assert model["served_model_ids"] == ["org/tiny"]


def test_vllm_shared_by_xdist_workers(pytester: pytest.Pytester, toy, fake_vllm: Path) -> None:
    result = pytester.runpytest_subprocess(*vllm_args("-n", "2"))
    result.assert_outcomes(passed=GOLD_A, failed=MCQ - GOLD_A)
    (launch,) = launches(fake_vllm)  # the controller launched it; no worker did
    assert not alive(launch["pid"])
    out = read_run(only_run_dir(pytester.path / "out"))
    assert sorted(r["question_id"] for r in out["records"]) == sorted(q for q, _, _ in TOY_QUESTIONS)
    assert all(r["error"] is None and r["served_model"] == "org/tiny" for r in out["records"])
    assert out["run"]["models"][0]["endpoint"] == f"http://127.0.0.1:{launch['port']}/v1"


def test_named_vllm_model_with_args(pytester: pytest.Pytester, toy, fake_vllm: Path) -> None:
    pytester.makepyprojecttoml(
        '[tool.benchaudit.models.tiny]\nlaunch = "vllm"\nmodel = "org/tiny"\n'
        'args = ["--dtype", "half"]\nstartup_timeout = 60\n'
    )
    result = pytester.runpytest(
        "suites/toy", "--data-dir", "data", "--model", "tiny", "--report-dir", "out", "-k", "mcq and t01"
    )
    result.assert_outcomes(failed=1)
    (launch,) = launches(fake_vllm)
    assert launch["model"] == "org/tiny" and launch["extra"] == ["--dtype", "half"]
    (rec,) = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert rec["model"] == "tiny" and rec["served_model"] == "org/tiny"


def test_missing_vllm_is_one_usage_error(
    pytester: pytest.Pytester, toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_benchaudit.inference.launch import vllm

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(vllm, "_fallback_dirs", list)  # nor one in this virtual environment
    result = pytester.runpytest(*vllm_args())
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    expected = "*--model vllm:org/tiny: the vllm executable was not found: install the vllm extra*or put vllm on PATH*"
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "out").exists() or not any((pytester.path / "out").iterdir())


def test_vllm_that_exits_during_startup_is_one_usage_error(
    pytester: pytest.Pytester, toy, fake_vllm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_EXIT", "3")
    result = pytester.runpytest(*vllm_args())
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--model vllm:org/tiny: `vllm serve org/tiny` exited with status 3 during start-up*",
            "*fake vllm: failing on purpose*",
        ]
    )
    assert len(launches(fake_vllm)) == 1  # not retried per item


def test_reserved_launch_arguments_are_refused(
    pytester: pytest.Pytester, toy, fake_vllm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHAUDIT_VLLM_ARGS", "--port 9999")
    result = pytester.runpytest(*vllm_args())
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--port is set by the launcher*"])
    assert launches(fake_vllm) == []


# -- balanced endpoints -------------------------------------------------------------------------

N_BALANCED = 40


def write_many(root: Path) -> None:
    """Replace the toy mcq data by N_BALANCED plain questions (gold A)."""
    options = ["first", "second", "third", "fourth"]
    with (root / "data" / "toy" / "toy.jsonl").open("w") as fh:
        for i in range(N_BALANCED):
            fh.write(
                json.dumps(
                    {
                        "id": f"b{i:02d}",
                        "question": f"Plain question {i}?",
                        "options": options,
                        "gold": "A",
                        "topic": ["alpha"],
                    }
                )
                + "\n"
            )


def completions(server: ScriptedServer) -> list[Call]:
    return [c for c in server.calls if c.path.endswith("completions")]


def balanced_args(*urls: str) -> list[str]:
    return [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        "m@" + ",".join(urls),
        "--report-dir",
        "out",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        "--max-retries",
        "2",
    ]


def test_balanced_spreads_requests_over_endpoints(pytester: pytest.Pytester, toy) -> None:
    write_many(pytester.path)
    answer = Reply(content="Answer: A")
    with (
        ScriptedServer(lambda c: answer, latency=0.05, model_id="m") as one,
        ScriptedServer(lambda c: answer, latency=0.05, model_id="m") as two,
    ):
        result = pytester.runpytest(*balanced_args(one.url, two.url))
        result.assert_outcomes(passed=N_BALANCED)
        first, second = len(completions(one)), len(completions(two))
        urls = [one.url, two.url]
    assert first + second == N_BALANCED
    assert N_BALANCED * 0.3 <= first <= N_BALANCED * 0.7, (first, second)  # roughly half each
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) == N_BALANCED
    (model,) = out["run"]["models"]
    assert model["endpoints"] == urls


def test_balanced_survives_an_endpoint_stopped_mid_run(pytester: pytest.Pytester, toy) -> None:
    write_many(pytester.path)
    answer = Reply(content="Answer: A")
    stopped = threading.Event()
    holder: dict[str, ScriptedServer] = {}

    def doomed(call: Call) -> Reply:
        if len(completions(holder["two"])) == 5 and not stopped.is_set():
            stopped.set()
            threading.Thread(target=holder["two"].stop, daemon=True).start()  # not from its own handler
        return answer

    with (
        ScriptedServer(lambda c: answer, latency=0.05, model_id="m") as one,
        ScriptedServer(doomed, latency=0.05, model_id="m") as two,
    ):
        holder["two"] = two
        result = pytester.runpytest(*balanced_args(one.url, two.url))
        assert stopped.is_set()
        result.assert_outcomes(passed=N_BALANCED)
    out = read_run(only_run_dir(pytester.path / "out"))
    ids = [r["question_id"] for r in out["records"]]
    assert sorted(ids) == [f"b{i:02d}" for i in range(N_BALANCED)]  # every question, exactly once
    assert all(r["error"] is None for r in out["records"])
    assert any(r["attempts"] > 1 for r in out["records"])  # some were failed over from the stopped one
    assert len(completions(one)) >= N_BALANCED - 5


def _request(i: int = 0) -> Request:
    return Request(mode="chat", messages=(Message(role="user", content=f"q{i}"),), params={"max_tokens": 4})


def test_pick_fewest_in_flight_ties_round_robin() -> None:
    async def go() -> None:
        spec = ModelSpec(
            label="m",
            kind="endpoint",
            model_id="m",
            base_url="http://127.0.0.1:9/v1",
            endpoints=("http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1", "http://127.0.0.1:11/v1"),
        )
        backend = BalancedBackend(spec, concurrency=4)
        try:
            assert [backend.pick() for _ in range(6)] == [0, 1, 2, 0, 1, 2]  # all idle: round-robin
            backend.endpoints[0].in_flight = 2
            backend.endpoints[1].in_flight = 1
            assert backend.pick() == 2
            backend.endpoints[2].in_flight = 1
            assert [backend.pick() for _ in range(2)] == [1, 2]  # tie between 1 and 2: in turn
            assert backend.pick(avoid={1, 2}) == 0
        finally:
            await backend.aclose()

    asyncio.run(go())


def test_all_endpoints_refusing_is_an_error_after_retries() -> None:
    from pytest_benchaudit.inference.launch.local import _free_port

    async def go() -> None:
        urls = tuple(f"http://127.0.0.1:{_free_port()}/v1" for _ in range(2))  # nothing listens there
        spec = ModelSpec(
            label="m",
            kind="endpoint",
            model_id="m",
            base_url=urls[0],
            endpoints=urls,
            max_retries=1,
            retry_base=0.01,
            api_key_env=None,
        )
        backend = BalancedBackend(spec, concurrency=2)
        try:
            gen = await backend.generate(_request())
        finally:
            await backend.aclose()
        assert gen.error and gen.error.startswith("connection error") and "gave up after 4 attempts" in gen.error
        assert gen.attempts == 4  # two rounds (first try + one retry) over both endpoints
        assert all(s["connection_errors"] == 2 for s in backend.stats().values())

    asyncio.run(go())


def test_failover_to_a_live_endpoint_costs_no_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_benchaudit.inference import balanced
    from pytest_benchaudit.inference.launch.local import _free_port

    # The balancer's "avoided for DOWN_FOR_S" and the endpoints' pauses read one virtual clock: time passes
    # only by a wait the code asks for, so the dead endpoint stays avoided however slow the machine is (a
    # wall-clock bound under DOWN_FOR_S stood for that).
    clock = VirtualClock()
    monkeypatch.setattr(balanced, "time", SimpleNamespace(monotonic=clock.now, perf_counter=time.perf_counter))

    async def go(url: str) -> None:
        dead = f"http://127.0.0.1:{_free_port()}/v1"
        spec = ModelSpec(
            label="m",
            kind="endpoint",
            model_id="m",
            base_url=dead,
            endpoints=(dead, url),
            max_retries=0,
            api_key_env=None,
        )
        backend = BalancedBackend(spec, concurrency=2)
        for endpoint in backend.endpoints:
            endpoint.backend.limiter.clock = clock
        try:
            gens = [await backend.generate(_request(i)) for i in range(4)]
        finally:
            await backend.aclose()
        assert all(g.error is None and g.text == "Answer: B" for g in gens)
        assert gens[0].attempts == 2  # refused by the dead one, answered by the live one
        assert all(g.attempts == 1 for g in gens[1:])  # the dead one is avoided for a while
        assert [wait for wait in clock.sleeps if wait > 0] == []  # the fail-over waited for nothing

    with ScriptedServer(lambda c: Reply(content="Answer: B"), model_id="m") as live:
        asyncio.run(go(live.url))


# -- log-probabilities: vLLM's --max-logprobs against MMLU's released 100 -------------------------------


def test_launcher_raises_max_logprobs_when_a_selected_layer_needs_more(
    pytester: pytest.Pytester, toy, fake_vllm: Path
) -> None:
    result = pytester.runpytest(*vllm_args("--set", "inference.decoding.top_logprobs=100"))
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    (launch,) = launches(fake_vllm)
    assert launch["extra"][-2:] == ["--max-logprobs", "100"]
    # a layer that asks for none (or for vLLM's default 20 or fewer) changes nothing
    pytester.runpytest(*vllm_args("--report-dir", "out2"))
    assert "--max-logprobs" not in launches(fake_vllm)[1]["extra"]


def test_with_max_logprobs_keeps_a_larger_value_and_raises_a_smaller_one() -> None:
    from pytest_benchaudit.inference.launch.vllm import with_max_logprobs

    assert with_max_logprobs(("--dtype", "half"), None) == ("--dtype", "half")
    assert with_max_logprobs(("--dtype", "half"), 20) == ("--dtype", "half")
    assert with_max_logprobs(("--max-logprobs", "50", "--dtype", "half"), 100) == (
        "--dtype",
        "half",
        "--max-logprobs",
        "100",
    )
    assert with_max_logprobs(("--max-logprobs=200",), 100) == ("--max-logprobs", "200")


def vllm_refusing(allowed: int = 20):
    """A completions endpoint that refuses more log-probabilities than ``allowed``, as vLLM does."""

    def script(call: Call) -> Reply:
        asked = call.body.get("logprobs") if "messages" not in call.body else call.body.get("top_logprobs")
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > allowed:
            return Reply(
                status=400,
                error_message=f"Requested sample logprobs of {asked}, which is greater than max allowed: {allowed}",
            )
        return Reply(content=" B", top_logprobs={" B": -0.1, " A": -2.0})

    return script


def test_mmlu_released_against_a_refusing_endpoint_is_one_clear_message(
    pytester: pytest.Pytester, real_data: Path
) -> None:
    from helpers import SUITES

    if not (real_data / "mmlu-computer-security" / "computer_security_test.csv").is_file():
        pytest.skip("real MMLU computer_security data missing under $BENCHAUDIT_DATA")
    with ScriptedServer(vllm_refusing()) as server:
        result = pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "released",
            "--limit",
            "20",
            "--report-dir",
            "out",
            "--no-cache",
            "--max-retries",
            "0",
        )
        asked = [c for c in server.calls if c.path.endswith("/completions")]
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert ("this endpoint allows 20 log-probabilities; the layer needs 100: start vLLM with --max-logprobs 100") in out
    assert out.count("this endpoint allows 20") == 1 and "Traceback" not in out
    assert asked  # (the engine asks ahead, so the other questions' requests may have gone out too)
    # the run stops at the first refusal instead of recording 20 inference errors
    runs = list((pytester.path / "out").iterdir())
    records = (runs[0] / "records.jsonl") if runs else None
    assert records is None or not records.is_file() or records.read_text() == ""


def test_mmlu_released_counts_the_bare_except_a_quirk(pytester: pytest.Pytester, real_data: Path) -> None:
    """An endpoint that answers without log-probabilities for some questions: released MMLU reads
    'A' for each (evaluate.py's bare except), and the records say how often."""
    from helpers import SUITES
    from pytest_benchaudit.scoring.extract import MMLU_FALLBACK

    if not (real_data / "mmlu-computer-security" / "computer_security_test.csv").is_file():
        pytest.skip("real MMLU computer_security data missing under $BENCHAUDIT_DATA")
    seen: list[int] = []

    def script(call: Call) -> Reply:
        seen.append(1)
        if len(seen) % 4 == 0:  # every 4th request: no logprobs in the answer
            return Reply(content=" B", top_logprobs=None)
        return Reply(content=" B", top_logprobs={" B": -0.1, " A": -2.0, " C": -3.0, " D": -4.0})

    with ScriptedServer(script) as server:
        pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "released",
            "--limit",
            "20",
            "--report-dir",
            "out",
            "--no-cache",
        )
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    fallback = [r for r in records if (r["extraction_detail"] or "").startswith(MMLU_FALLBACK)]
    assert len(records) == 20 and len(fallback) == 5
    assert all(r["prediction"] == "A" and r["valid"] for r in fallback)
    assert {r["prediction"] for r in records if r not in fallback} == {"B"}
