"""The early inference process forked from a hook, not at import; the runner's gc.freeze() undone.

plugin.py forks from ``pytest_load_initial_conftests`` (pytest's arguments, ``$PYTEST_ADDOPTS``
and the ini file's ``addopts`` already merged), never when the entry point is imported, and
registers a cleanup that undoes the runner's ``gc.freeze()`` once pytest's own end-of-session
collections are over, so that a process that goes on after a run (an in-process ``pytester``
run, an IDE's runner) collects the session's objects again.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer

# Seen by a conftest at configure (before the runner can adopt the child): was a child forked?
PROBE = '''
import json, os
from pytest_benchaudit.inference import prestart

def pytest_configure(config):
    with open(os.environ["PROBE_OUT"], "w") as fh:
        json.dump({"forked": prestart._early is not None}, fh)
'''


def test_importing_the_entry_point_forks_nothing(tmp_path: Path) -> None:
    code = (
        "import sys; sys.argv = ['pytest', 'suites/toy', '--model', 'm@http://127.0.0.1:9']; "
        "import pytest_benchaudit.plugin; from pytest_benchaudit.inference import prestart; "
        "print(prestart._early is None)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTEST_ADDOPTS": "--model m@http://127.0.0.1:9"},
    )
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("where", ["argv", "PYTEST_ADDOPTS", "ini addopts"])
def test_the_hook_forks_for_a_run_that_names_a_model(
    pytester: pytest.Pytester,
    toy,
    scripted: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    outside_xdist_worker: None,
) -> None:
    probe = pytester.path / "probe.json"
    monkeypatch.setenv("PROBE_OUT", str(probe))
    monkeypatch.delenv("BENCHAUDIT_INFERENCE_PROCESS", raising=False)
    pytester.makeconftest(PROBE)
    model = f"toy-model@{scripted.url}"
    args = ["suites/toy", "--data-dir", "data", "--report-dir", "out", "--no-cache", "-p", "no:randomly", "-k", "mcq"]
    if where == "argv":
        args += ["--model", model]
    elif where == "PYTEST_ADDOPTS":
        monkeypatch.setenv("PYTEST_ADDOPTS", f"--model {model}")
    else:
        pytester.makeini(f"[pytest]\naddopts = --model {model}\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert json.loads(probe.read_text()) == {"forked": True}
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    outcomes = result.parseoutcomes()
    assert len(records) == outcomes.get("passed", 0) + outcomes.get("failed", 0) > 0  # the child answered them


def test_no_fork_without_a_model_nor_under_collect_only(
    pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = pytester.path / "probe.json"
    monkeypatch.setenv("PROBE_OUT", str(probe))
    pytester.makeconftest(PROBE)
    for args in (
        ["suites/toy", "--data-dir", "data", "--collect-only", "--model", "m@http://127.0.0.1:9"],
        ["suites/toy", "--data-dir", "data", "--collect-only"],
    ):
        result = pytester.runpytest_subprocess(*args, "-p", "no:randomly")
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert json.loads(probe.read_text()) == {"forked": False}, args


FREEZE_PROBE = '''
import gc, json, os

def pytest_sessionfinish(session):
    with open(os.environ["PROBE_OUT"], "w") as fh:
        json.dump({"frozen_during_run": gc.get_freeze_count()}, fh)
'''


def _in_process_run(pytester: pytest.Pytester, scripted: ScriptedServer, name: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        name,
        "--no-cache",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    )


def test_an_in_process_run_leaves_nothing_frozen(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = pytester.path / "probe.json"
    monkeypatch.setenv("PROBE_OUT", str(probe))
    pytester.makeconftest(FREEZE_PROBE)
    assert gc.get_freeze_count() == 0
    result = _in_process_run(pytester, scripted, "out")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert json.loads(probe.read_text())["frozen_during_run"] > 0  # the runner froze the collected items ...
    assert gc.get_freeze_count() == 0  # ... and the session's end undid it


def test_a_freeze_made_before_the_run_is_left_alone(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_OUT", str(pytester.path / "probe.json"))
    pytester.makeconftest(FREEZE_PROBE)
    gc.freeze()  # the host process's own (an application that froze its start-up objects)
    try:
        before = gc.get_freeze_count()
        assert before > 0
        result = _in_process_run(pytester, scripted, "out")
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
        assert gc.get_freeze_count() >= before  # not unfrozen by the plugin: it was not only the plugin's
    finally:
        gc.unfreeze()
