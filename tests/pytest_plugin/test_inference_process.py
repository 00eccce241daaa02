"""Runs whose models are asked from the inference process (the default) and from a thread of the
pytest process (``--no-inference-process``): the same records and outcomes; a dead inference
process ends the run with one message and keeps what was recorded; none is left behind; a run
without benchmark items starts none."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.processes import PID_PLUGIN
from pytest_benchaudit.inference.process import available
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.toy import toy_script

pytestmark = pytest.mark.skipif(not available(), reason="the inference process needs a POSIX platform")

# Fields that differ between two runs of the same questions (when, how fast, from where).
VOLATILE = ("timestamp", "latency_s", "from_cache")


def _run(pytester: pytest.Pytester, server: ScriptedServer, out: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        out,
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-p",
        "pidplugin",
        *extra,
    )


def _stable(records: list[dict]) -> list[dict]:
    return sorted(({k: v for k, v in r.items() if k not in VOLATILE} for r in records), key=lambda r: r["item_id"])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_both_engines_record_the_same(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    pytester.makepyfile(pidplugin=PID_PLUGIN)
    pytester.syspathinsert()
    in_child = _run(pytester, scripted, "out-process")
    pid = int((pytester.path / "child.pid").read_text())
    (pytester.path / "child.pid").unlink()
    on_thread = _run(pytester, scripted, "out-thread", "--no-inference-process")
    assert in_child.parseoutcomes() == on_thread.parseoutcomes()
    assert not (pytester.path / "child.pid").exists()  # the thread engine has no child
    a = read_run(only_run_dir(pytester.path / "out-process"))
    b = read_run(only_run_dir(pytester.path / "out-thread"))
    assert a["records"] and not _diff(_stable(a["records"]), _stable(b["records"]))
    # The second run read the generation cache the inference process wrote (one cache, both engines).
    assert not any(r["from_cache"] for r in a["records"]) and any(r["from_cache"] for r in b["records"])
    assert a["summary"]["results"] == b["summary"]["results"]
    assert _gone(pid), "the inference process outlived its run"


@pytest.mark.skipif(not hasattr(os, "fork") or not os.uname().sysname == "Linux", reason="forks on Linux only")
def test_a_single_threaded_pytest_forks_its_inference_process(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, outside_xdist_worker: None
) -> None:
    pytester.makepyfile(pidplugin=PID_PLUGIN)
    in_child = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-p",
        "pidplugin",
        "--no-cache",
    )
    assert (pytester.path / "child.start").read_text() == "Forked early"  # a copy of the process, forked at start-up
    on_thread = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out-thread",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "-p",
        "pidplugin",
        "--no-cache",
        "--no-inference-process",
    )
    assert in_child.parseoutcomes() == on_thread.parseoutcomes()
    a = read_run(only_run_dir(pytester.path / "out"))["records"]
    b = read_run(only_run_dir(pytester.path / "out-thread"))["records"]
    # The scripted server counts attempts across runs: compare what does not depend on them.
    assert [r["item_id"] for r in _stable(a)] == [r["item_id"] for r in _stable(b)]
    assert _gone(int((pytester.path / "child.pid").read_text()))


def test_the_environment_variable_keeps_the_thread(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(pidplugin=PID_PLUGIN)
    pytester.syspathinsert()
    monkeypatch.setenv("BENCHAUDIT_INFERENCE_PROCESS", "0")
    result = _run(pytester, scripted, "out", "-k", "t01")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "child.pid").exists()


def test_a_dead_inference_process_ends_the_run_with_one_message(
    pytester: pytest.Pytester, scripted: ScriptedServer, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(pidplugin=PID_PLUGIN)
    pytester.syspathinsert()
    monkeypatch.setenv("KILL_AT", "4")
    result = _run(pytester, scripted, "out")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the run is incomplete: --resume asks the rest
    assert "benchaudit: the inference process exited with status -9" in out
    assert "--resume RUN_DIR asks them" in out
    assert "Traceback" not in out
    run_dir = only_run_dir(pytester.path / "out")
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    # What was answered before the kill is recorded, each once (answers already read by the pytest
    # process still count); nothing is made up for the rest.
    assert 3 <= len(records) < 13 and len({r["item_id"] for r in records}) == len(records)
    assert not any("inference process" in (r["error"] or "") for r in records)


def test_no_benchmark_items_no_inference_process(pytester: pytest.Pytester, scripted: ScriptedServer) -> None:
    pytester.makepyfile(pidplugin=PID_PLUGIN, test_plain="def test_one():\n    assert True\n")
    pytester.syspathinsert()
    result = pytester.runpytest("test_plain.py", "--model", f"toy-model@{scripted.url}", "-p", "pidplugin")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "child.pid").exists()  # no engine was built, so no pid was written


def test_the_key_reaches_the_endpoint_from_the_child(
    pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    with ScriptedServer(toy_script(), api_key="sk-from-the-environment") as server:
        result = pytester.runpytest(
            "suites/toy", "--data-dir", "data", "--model", f"toy-model@{server.url}", "--report-dir", "out", "-k", "t01"
        )
    result.assert_outcomes(passed=1)
    run_dir = only_run_dir(pytester.path / "out")
    text = "".join(p.read_text(errors="replace") for p in Path(run_dir).rglob("*") if p.is_file())
    assert "sk-from-the-environment" not in text


def _diff(a: list[dict], b: list[dict]) -> list:
    return [(x["item_id"], k, x[k], y[k]) for x, y in zip(a, b) for k in x if x.get(k) != y.get(k)]


def test_a_bad_value_of_the_environment_variable_is_one_usage_error(
    pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHAUDIT_INFERENCE_PROCESS", "maybe")
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", "m@http://127.0.0.1:9/v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "$BENCHAUDIT_INFERENCE_PROCESS='maybe': expected 0" in out and "Traceback" not in out
