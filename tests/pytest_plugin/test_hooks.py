"""The hooks of pytest_benchaudit/newhooks.py, implemented by a real conftest.py in real runs.

The conftest is the README's example shape (a tracker that receives each record and the summary):
it writes what it received to files, and the test compares them with the run directory the
controller wrote (records.jsonl line by line, summary.json as a whole), serially and under xdist
(the hooks are called on the controller only, once per record).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.testing.scripted_server import ScriptedServer

from conftest import only_run_dir, read_run

TRACKER = '''
import json, os

def _out(name):
    return os.path.join(os.environ["TRACKER_OUT"], name)

def pytest_benchaudit_record(record, config):
    try:
        record["correct"] = "tampered"
        writable = True
    except TypeError:
        writable = False
    with open(_out("records.jsonl"), "a") as fh:
        fh.write(json.dumps({"record": dict(record), "writable": writable, "has_config": config is not None,
                             "worker": os.environ.get("PYTEST_XDIST_WORKER"), "pid": os.getpid()}) + "\\n")

def pytest_benchaudit_summary(summary, config):
    with open(_out("summary.jsonl"), "a") as fh:
        fh.write(json.dumps({"summary": dict(summary), "pid": os.getpid()}) + "\\n")
'''


def _received(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    summaries = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    return records, summaries


@pytest.fixture
def tracked(pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch) -> Path:
    out = pytester.path / "tracker"
    out.mkdir()
    monkeypatch.setenv("TRACKER_OUT", str(out))
    pytester.makeconftest(TRACKER)
    return out


def test_a_conftest_receives_every_record_and_the_summary(pytester: pytest.Pytester, tracked: Path,
                                                          scripted: ScriptedServer) -> None:
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}",
                                "--model", f"other-model@{scripted.url}", "--report-dir", "out", "--no-cache",
                                "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    run = read_run(only_run_dir(pytester.path / "out"))
    records, summaries = _received(tracked)
    outcomes = result.parseoutcomes()
    assert len(run["records"]) == outcomes.get("passed", 0) + outcomes.get("failed", 0) > 2  # one per item
    # every record of records.jsonl, once each, in the file's order, as the file holds it
    assert [r["record"] for r in records] == run["records"]
    assert not any(r["writable"] for r in records) and all(r["has_config"] for r in records)
    assert len(summaries) == 1 and summaries[0]["summary"] == run["summary"]
    assert {r["pid"] for r in records} == {summaries[0]["pid"]} == {os.getpid()}  # the process that writes


def test_under_xdist_the_controller_receives_each_record_once(pytester: pytest.Pytester, tracked: Path,
                                                              scripted: ScriptedServer) -> None:
    pytest.importorskip("xdist")
    result = pytester.runpytest_subprocess("suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}",
                                           "--report-dir", "out", "--no-cache", "-p", "no:randomly", "-n", "2")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    run = read_run(only_run_dir(pytester.path / "out"))
    records, summaries = _received(tracked)
    outcomes = result.parseoutcomes()
    assert len(run["records"]) == outcomes.get("passed", 0) + outcomes.get("failed", 0) > 2
    assert [r["record"] for r in records] == run["records"]  # the controller's order is the file's
    assert {r["worker"] for r in records} == {None}  # never on a worker
    assert len({r["pid"] for r in records}) == 1 and summaries[0]["pid"] == records[0]["pid"] != os.getpid()
    assert len(summaries) == 1 and summaries[0]["summary"] == run["summary"]


def test_a_resumed_run_hands_over_only_the_records_it_writes(pytester: pytest.Pytester, tracked: Path,
                                                            scripted: ScriptedServer) -> None:
    args = ["suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}", "--no-cache",
            "-p", "no:randomly", "-p", "no:cacheprovider"]
    first = pytester.runpytest(*args, "--report-dir", "out", "-k", "mcq")
    assert first.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    run_dir = only_run_dir(pytester.path / "out")
    before = len(read_run(run_dir)["records"])
    (tracked / "records.jsonl").unlink()
    resumed = pytester.runpytest(*args, "--resume", str(run_dir))
    assert resumed.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), resumed.stdout.str()
    run = read_run(run_dir)
    records, summaries = _received(tracked)
    assert 0 < before < len(run["records"])
    assert [r["record"] for r in records] == run["records"][before:]  # the new ones only
    assert summaries[-1]["summary"] == run["summary"]  # the whole run's summary, once more


FAKE_TRACKER = '''
import json, os

def log(row):
    with open(os.environ["TRACKER_OUT"] + "/logged.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\\n")

def summary(document):
    with open(os.environ["TRACKER_OUT"] + "/summary.json", "w") as fh:
        json.dump(document, fh)
'''


def test_the_readmes_example_conftest_runs_as_documented(pytester: pytest.Pytester, tracked: Path,
                                                         scripted: ScriptedServer) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Hooks:", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makeconftest(example)
    pytester.makepyfile(tracker=FAKE_TRACKER)
    pytester.syspathinsert()
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}",
                                "--report-dir", "out", "--no-cache", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    run = read_run(only_run_dir(pytester.path / "out"))
    logged = [json.loads(line) for line in (tracked / "logged.jsonl").read_text().splitlines()]
    assert logged == [{"model": r["model"], "task": r["task"], "pipeline": r["pipeline"], "question": r["question_id"],
                       "correct": r["correct"], "valid": r["valid"]} for r in run["records"]]
    assert json.loads((tracked / "summary.json").read_text()) == run["summary"]
