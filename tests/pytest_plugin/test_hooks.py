"""The hooks of pytest_benchaudit/newhooks.py, implemented by a real conftest.py in real runs.

The conftest is the example shape of docs/hooks.md (a tracker that receives each record and the summary):
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

from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer

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


def test_a_conftest_receives_every_record_and_the_summary(
    pytester: pytest.Pytester, tracked: Path, scripted: ScriptedServer
) -> None:
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--model",
        f"other-model@{scripted.url}",
        "--report-dir",
        "out",
        "--no-cache",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    )
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


def test_under_xdist_the_controller_receives_each_record_once(
    pytester: pytest.Pytester, tracked: Path, scripted: ScriptedServer, outside_xdist_worker: None
) -> None:
    pytest.importorskip("xdist")
    result = pytester.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--no-cache",
        "-p",
        "no:randomly",
        "-n",
        "2",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    run = read_run(only_run_dir(pytester.path / "out"))
    records, summaries = _received(tracked)
    outcomes = result.parseoutcomes()
    assert len(run["records"]) == outcomes.get("passed", 0) + outcomes.get("failed", 0) > 2
    assert [r["record"] for r in records] == run["records"]  # the controller's order is the file's
    assert {r["worker"] for r in records} == {None}  # never on a worker
    assert len({r["pid"] for r in records}) == 1 and summaries[0]["pid"] == records[0]["pid"] != os.getpid()
    assert len(summaries) == 1 and summaries[0]["summary"] == run["summary"]


def test_a_resumed_run_hands_over_only_the_records_it_writes(
    pytester: pytest.Pytester, tracked: Path, scripted: ScriptedServer
) -> None:
    args = [
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--no-cache",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
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


def test_the_readmes_example_conftest_runs_as_documented(
    pytester: pytest.Pytester, tracked: Path, scripted: ScriptedServer
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "hooks.md").read_text(encoding="utf-8")
    example = page.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makeconftest(example)
    pytester.makepyfile(tracker=FAKE_TRACKER)
    pytester.syspathinsert()
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--no-cache",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    run = read_run(only_run_dir(pytester.path / "out"))
    logged = [json.loads(line) for line in (tracked / "logged.jsonl").read_text().splitlines()]
    assert logged == [
        {
            "model": r["model"],
            "task": r["task"],
            "pipeline": r["pipeline"],
            "question": r["question_id"],
            "correct": r["correct"],
            "valid": r["valid"],
        }
        for r in run["records"]
    ]
    assert json.loads((tracked / "summary.json").read_text()) == run["summary"]


# ----------------------------------------------------------------------------- issue 33, item 14
# A hook that raises is one line naming its conftest.py (or plugin) and the line that raised; the run
# directory is finished all the same (records, summary.json, run.json); exit status 3, as pytest counts
# an exception in a plugin's hook.  The documents the hooks get are read-only all the way down.

RUN = ["suites/toy", "--data-dir", "data", "--no-cache", "-p", "no:randomly", "-p", "no:cacheprovider"]


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]


def test_a_summary_hook_that_raises_is_one_line_and_the_run_directory_is_finished(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer
) -> None:
    pytester.makeconftest("def pytest_benchaudit_summary(summary, config):\n    raise ValueError('tracker down')\n")
    result = pytester.runpytest(*RUN, "--model", f"toy-model@{scripted.url}", "--report-dir", "out")
    text = result.stdout.str() + result.stderr.str()
    _no_traceback(text)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    line = (
        "benchaudit: the pytest_benchaudit_summary hook of conftest.py raised ValueError: tracker down "
        "(conftest.py:2); it is not called again in this run. The run directory is finished"
    )
    assert line in text
    run = read_run(only_run_dir(pytester.path / "out"))
    assert run["run"]["ended"] and run["run"]["n_records"] == len(run["records"]) == 13  # finished, nothing lost
    assert {w["kind"] for w in run["run"]["warnings"]} >= {"hook_failed"}
    assert [r["n"] for r in run["summary"]["results"]] == [12, 1]  # the summary of every record, kept
    assert "toy.mcq" in text and "benchaudit summary" in text  # the score table still printed


def test_a_record_hook_that_raises_stops_the_run_keeping_and_summarising_what_it_wrote(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer
) -> None:
    pytester.makeconftest(
        "def pytest_benchaudit_record(record, config):\n"
        "    if record['question_id'] == 't03':\n"
        "        raise RuntimeError('tracker refused ' + record['question_id'])\n"
    )
    args = [*RUN, "--model", f"toy-model@{scripted.url}"]
    result = pytester.runpytest(*args, "--report-dir", "out")
    text = result.stdout.str()
    _no_traceback(text + result.stderr.str())
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert (
        "STOPPED: the pytest_benchaudit_record hook of conftest.py raised RuntimeError: tracker refused t03 "
        "(conftest.py:3), at the record of toy.mcq t03 [toy-model]; the records written before it are kept; "
        "exit status 3"
    ) in text
    run_dir = only_run_dir(pytester.path / "out")
    run = read_run(run_dir)
    ids = [r["question_id"] for r in run["records"]]
    assert ids[:3] == ["t01", "t02", "t03"] and len(ids) < 13  # the run stopped; t03's record was written
    assert run["run"]["ended"] and sum(r["n"] for r in run["summary"]["results"]) == len(ids)
    # The command printed continues it: the rest is asked, the hook (now quiet) called for the new records only.
    pytester.makeconftest("")
    resumed = pytester.runpytest(*args, "--resume", str(run_dir))
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED, resumed.stdout.str()
    assert len(read_run(run_dir)["records"]) == 13


def test_under_xdist_a_record_hook_that_raises_stops_the_run_on_the_controller(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer
) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(
        "def pytest_benchaudit_record(record, config):\n    raise KeyError('no such run in the tracker')\n"
    )
    result = pytester.runpytest_subprocess(
        *RUN, "--model", f"toy-model@{scripted.url}", "--report-dir", "out", "-n", "2"
    )
    text = result.stdout.str() + result.stderr.str()
    _no_traceback(text)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert (
        "STOPPED: the pytest_benchaudit_record hook of conftest.py raised KeyError: 'no such run in the tracker' "
        "(conftest.py:2)" in text
    )
    run = read_run(only_run_dir(pytester.path / "out"))
    assert (
        run["records"] and run["run"]["ended"] and sum(r["n"] for r in run["summary"]["results"]) == len(run["records"])
    )


def test_a_plugin_that_raises_is_named_by_its_registered_name(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer
) -> None:
    pytester.makepyfile(acme_tracker="def pytest_benchaudit_summary(summary, config):\n    1 / 0\n")
    pytester.syspathinsert()
    result = pytester.runpytest(
        *RUN, "-p", "acme_tracker", "--model", f"toy-model@{scripted.url}", "--report-dir", "out"
    )
    _no_traceback(result.stdout.str())
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert (
        "the pytest_benchaudit_summary hook of plugin 'acme_tracker' raised ZeroDivisionError: division by zero "
        "(acme_tracker.py:2)"
    ) in result.stdout.str()


VANDAL = '''
import copy, json, os

def _try(change):
    try:
        change()
        return "changed"
    except TypeError as err:
        return str(err)

def pytest_benchaudit_record(record, config):
    if record["question_id"] != "t01":
        return
    out = {"nested_dict": _try(lambda: record["request"].clear()),
           "nested_list": _try(lambda: record["request"]["messages"].append({"role": "user"})),
           "item": _try(lambda: record["request"]["messages"][0].update(content="x")),
           "is_dict": isinstance(record, dict), "as_json": json.loads(json.dumps(record)) == record}
    mine = copy.deepcopy(record)
    mine["request"]["messages"].append({"role": "user"})  # a deep copy is the hook's own
    out["copy"] = type(mine).__name__
    with open(os.path.join(os.environ["TRACKER_OUT"], "record.json"), "w") as fh:
        json.dump(out, fh)

def pytest_benchaudit_summary(summary, config):
    out = {"clear": _try(lambda: summary["results"].clear()),
           "score": _try(lambda: summary["results"][0].__setitem__("score", 1.0)),
           "pop": _try(lambda: summary.pop("results"))}
    with open(os.path.join(os.environ["TRACKER_OUT"], "summary.json"), "w") as fh:
        json.dump(out, fh)
'''


def test_the_documents_are_read_only_all_the_way_down(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = pytester.path / "tracker"
    out.mkdir()
    monkeypatch.setenv("TRACKER_OUT", str(out))
    pytester.makeconftest(VANDAL)
    result = pytester.runpytest(*RUN, "--model", f"toy-model@{scripted.url}", "--report-dir", "runs")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    record = json.loads((out / "record.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    for refused in (record["nested_dict"], record["nested_list"], record["item"], *summary.values()):
        assert "is read-only" in refused and "copy.deepcopy()" in refused, refused
    assert record["is_dict"] and record["as_json"] and record["copy"] == "dict"
    run = read_run(only_run_dir(pytester.path / "runs"))
    assert run["records"][0]["request"]["messages"][0]["content"] != "x"
    # The terminal's score table is the summary's: the hook emptied nothing.
    table = result.stdout.str().split("benchaudit summary", 1)[1]
    assert "toy.mcq" in table and "toy.extra" in table
    mcq = [r for r in run["records"] if r["task"] == "mcq"]
    assert run["summary"]["results"][0]["score"] == pytest.approx(sum(r["correct"] for r in mcq) / len(mcq))
