"""The lighter run protocol of benchmark items (pytest_plugin/protocol.py) against pytest's own.

Each comparison runs the same items twice, once through benchaudit's protocol and once with
``--benchaudit-full-protocol`` (pytest's ``runtestprotocol``), and asserts that every reporting
hook saw the same thing: the order of logstart / logreport / logfinish, each report's type,
attributes and serialised fields (when, outcome, longrepr, sections, user_properties, location,
keywords, the record), the JUnit XML, the terminal counts.  If a pytest release changes what a
report holds or how its protocol reports, these tests fail.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.pytest_plugin.protocol import KNOWN_IMPLEMENTERS, full_protocol_reason
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.toy import toy_script

SPY = '''
import json, os
import pytest

EVENTS = []
CONFIG = []

def pytest_configure(config):
    CONFIG.append(config)

def pytest_runtest_logstart(nodeid, location):
    EVENTS.append({"event": "logstart", "nodeid": nodeid, "location": list(location)})

def pytest_runtest_logfinish(nodeid, location):
    EVENTS.append({"event": "logfinish", "nodeid": nodeid, "location": list(location)})

def pytest_runtest_logreport(report):
    config = CONFIG[0]
    data = config.hook.pytest_report_to_serializable(config=config, report=report)
    EVENTS.append({"event": "logreport", "type": type(report).__name__, "attrs": sorted(vars(report)),
                   "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
                   "data": data, "user_properties": [[k, v] for k, v in report.user_properties],
                   "keywords": sorted(report.keywords), "sections": [list(s) for s in report.sections]})

def pytest_sessionfinish(session):
    runner = session.config.pluginmanager.get_plugin("benchaudit-runner")
    light = runner.protocol.items if runner is not None else None
    with open(os.environ["SPY_OUT"], "w") as fh:
        json.dump({"events": EVENTS, "light_items": light}, fh, default=str)
'''

PLAIN = '''
import pytest

@pytest.fixture(scope="module")
def resource():
    print("module set-up")
    yield 1
    print("module teardown")

def test_plain_passes(resource):
    print("plain output")
    assert resource == 1

def test_plain_fails():
    assert 41 == 42, "plain failure keeps its traceback"
'''

VARIABLE = ("duration", "start", "stop")  # timings differ from run to run
VARIABLE_RECORD = ("timestamp", "latency_s")


def _normal(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for event in events:
        event = json.loads(json.dumps(event))
        data = event.get("data")
        if data:
            for key in VARIABLE:
                data.pop(key, None)
            record = data.get("benchaudit_record")
            if isinstance(record, dict):
                for key in VARIABLE_RECORD:
                    record.pop(key, None)
        out.append(event)
    return out


def _run(
    pytester: pytest.Pytester, server: ScriptedServer, out: Path, *extra: str, full: bool = False
) -> tuple[pytest.RunResult, dict[str, Any]]:
    """One in-process run against a fresh toy server (its retry and rate-limit replies are stateful)."""
    spy = out.with_suffix(".json")
    os.environ["SPY_OUT"] = str(spy)  # the spied fixture restores it
    with ScriptedServer(toy_script()) as fresh:
        args = [
            "suites/toy",
            *extra,
            "--data-dir",
            "data",
            "--model",
            f"toy-model@{fresh.url}",
            "--report-dir",
            str(out),
            "--max-retries",
            "2",
            "--no-cache",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        ]
        if full:
            args.append("--benchaudit-full-protocol")
        result = pytester.runpytest(*args)
    return result, json.loads(spy.read_text())


def _junit(path: Path) -> str:
    text = path.read_text()
    return re.sub(r' (time|timestamp|hostname)="[^"]*"', "", text)


@pytest.fixture
def spied(pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("SPY_OUT", "")
    pytester.makeconftest(SPY)
    pytester.makepyfile(test_plain=PLAIN)
    return pytester


def test_reports_equal_pytests_own_protocol(spied: pytest.Pytester, scripted: ScriptedServer) -> None:
    """Passing, wrong, invalid (and HTTP-error) answers, next to plain tests with output and a
    module fixture: the reporting hooks see the same events and reports on both paths."""
    root = spied.path
    light, seen_light = _run(
        spied, scripted, root / "light", "test_plain.py", "-k", "mcq or plain", "--junitxml", str(root / "light.xml")
    )
    full, seen_full = _run(
        spied,
        scripted,
        root / "full",
        "test_plain.py",
        "-k",
        "mcq or plain",
        "--junitxml",
        str(root / "full.xml"),
        full=True,
    )
    assert seen_light["light_items"] == 12 and seen_full["light_items"] == 0
    a, b = _normal(seen_light["events"]), _normal(seen_full["events"])
    assert [(e["event"], e["nodeid"], e.get("when")) for e in a] == [
        (e["event"], e["nodeid"], e.get("when")) for e in b
    ]
    for x, y in zip(a, b):
        assert x == y, f"{x['nodeid']} {x.get('when')}: the two protocols reported differently"
    calls = [e for e in a if e.get("when") == "call" and e["nodeid"].startswith("suites/")]
    assert {e["outcome"] for e in calls} == {"passed", "failed"}
    failed = [e for e in calls if e["outcome"] == "failed"]
    assert all(isinstance(e["data"]["longrepr"], str) and "\n" not in e["data"]["longrepr"] for e in failed)
    assert all(e["data"]["benchaudit_record"] for e in calls)
    assert any(k == "invalid_reason" for e in failed for k, _ in e["user_properties"])
    plain = [e for e in a if e.get("when") == "call" and e["nodeid"] == "test_plain.py::test_plain_passes"]
    assert ["Captured stdout call", "plain output\n"] in plain[0]["sections"]  # plain tests: pytest's protocol
    assert _junit(root / "light.xml") == _junit(root / "full.xml")
    light.assert_outcomes(passed=7, failed=7)
    full.assert_outcomes(passed=7, failed=7)
    records = [read_run(only_run_dir(root / d))["records"] for d in ("light", "full")]
    strip = [[{k: v for k, v in r.items() if k not in VARIABLE_RECORD} for r in rs] for rs in records]
    assert strip[0] == strip[1] and len(strip[0]) == 12


@pytest.mark.parametrize("option", [["-x"], ["--maxfail", "2"]])
def test_stopping_early_is_the_same(spied: pytest.Pytester, scripted: ScriptedServer, option: list[str]) -> None:
    root = spied.path
    runs = [
        _run(spied, scripted, root / name, "test_plain.py", "-k", "mcq or plain", *option, full=full)
        for name, full in (("light", False), ("full", True))
    ]
    (light, seen_light), (full, seen_full) = runs
    assert _normal(seen_light["events"]) == _normal(seen_full["events"])
    assert light.parseoutcomes() == full.parseoutcomes()
    assert light.ret == full.ret == 1
    assert "stopping after" in light.stdout.str()


def test_plain_tests_around_benchmark_items_keep_their_set_up(spied: pytest.Pytester, scripted: ScriptedServer) -> None:
    """Module fixtures before and after a block of benchmark items are set up and torn down once
    (the setup state stays consistent when the lighter path hands back to pytest's)."""
    spied.makepyfile(test_after=PLAIN.replace("test_plain_", "test_after_"))
    root = spied.path
    result, seen = _run(
        spied, scripted, root / "light", "test_plain.py", "test_after.py", "-s", "-k", "mcq or plain or after"
    )
    result.assert_outcomes(passed=8, failed=8)
    assert seen["light_items"] == 12
    # _run puts suites/toy first: bench items, then test_plain.py, then test_after.py
    spied.makepyfile(test_after=PLAIN.replace("test_plain_", "test_after_"))
    again = spied.runpytest(
        "test_plain.py",
        "suites/toy",
        "test_after.py",
        "-s",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        str(root / "again"),
        "--no-cache",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-k",
        "mcq or plain or after",
    )
    again.assert_outcomes(passed=8, failed=8)
    text = again.stdout.str()
    assert text.count("module set-up") == 2 and text.count("module teardown") == 2
    assert "INTERNALERROR" not in text and "previous item was not torn down" not in text


def test_xdist_workers_forward_every_record_once(spied: pytest.Pytester, scripted: ScriptedServer) -> None:
    pytest.importorskip("xdist")
    root = spied.path
    os.environ["SPY_OUT"] = str(root / "spy.json")
    result = spied.runpytest_subprocess(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        str(root / "x"),
        "--max-retries",
        "2",
        "--no-cache",
        "-p",
        "no:randomly",
        "-n",
        "2",
        "--junitxml",
        str(root / "x.xml"),
    )
    outcomes = result.parseoutcomes()
    records = read_run(only_run_dir(root / "x"))["records"]
    keys = [(r["task"], r["question_id"], r["model"]) for r in records]
    assert len(keys) == len(set(keys)) == outcomes.get("passed", 0) + outcomes.get("failed", 0)
    xml = (root / "x.xml").read_text()
    assert xml.count("<testcase") == len(keys) and xml.count('name="valid"') == len(keys)
    # the controller saw each benchmark item's three reports once, from the workers
    events = json.loads((root / "spy.json").read_text())["events"]
    reports = [(e["nodeid"], e["when"]) for e in events if e["event"] == "logreport"]
    assert len(reports) == len(set(reports)) == 3 * len(keys)


def test_a_plugin_with_its_own_phase_hooks_gets_pytests_protocol(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPY_OUT", "")
    pytester.makeconftest(
        SPY
        + '''
MADE = []

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    MADE.append(call.when)
    return report

def pytest_unconfigure(config):
    assert MADE, "the conftest's makereport never ran"
'''
    )
    result, seen = _run(pytester, scripted, pytester.path / "out", "-k", "mcq")
    assert seen["light_items"] == 0
    result.assert_outcomes(passed=6, failed=6)


def test_keyboard_interrupt_and_exit_propagate_as_from_pytests_protocol(
    pytester: pytest.Pytester, toy, scripted: ScriptedServer
) -> None:
    pytester.makeconftest('''
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    runner = config.pluginmanager.get_plugin("benchaudit-runner")
    original = runner.run_item
    def run_item(node, *args):
        if node.name.startswith("q0004"):
            raise KeyboardInterrupt
        return original(node, *args)
    runner.run_item = run_item
''')
    outs = []
    for name, full in (("light", []), ("full", ["--benchaudit-full-protocol"])):
        # (a subprocess: pytester re-raises an in-process run's KeyboardInterrupt in the outer run)
        result = pytester.runpytest_subprocess(
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
            "-k",
            "mcq",
            *full,
        )
        assert result.ret == pytest.ExitCode.INTERRUPTED
        assert "KeyboardInterrupt" in result.stdout.str()
        outs.append((result.parseoutcomes(), len(read_run(only_run_dir(pytester.path / name))["records"])))
    assert outs[0] == outs[1] and outs[0][1] == 3


def test_when_pytests_protocol_is_used(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    config = pytester.parseconfigure()
    assert full_protocol_reason(config) is None
    for args, reason in (
        (["--benchaudit-full-protocol"], "--benchaudit-full-protocol"),
        (["--pdb"], "--pdb"),
        (["--setup-plan"], "--setup-plan"),
        (["--setup-only"], "--setup-only"),
        (["--setup-show"], "--setup-show"),
        (["--trace"], "--trace"),
        (["-o", "log_cli=true"], "live logging (log_cli)"),
    ):
        assert full_protocol_reason(pytester.parseconfigure(*args)) == reason, args
    monkeypatch.setenv("BENCHAUDIT_FULL_PROTOCOL", "1")
    assert full_protocol_reason(pytester.parseconfigure()) == "BENCHAUDIT_FULL_PROTOCOL=1"


def test_known_implementers_are_the_ones_installed_here(pytester: pytest.Pytester) -> None:
    """Every plugin of this environment that implements a phase hook is listed (or the lighter
    path would silently never run here); a pytest release that adds one breaks this test."""
    config = pytester.parseconfigure("-p", "no:randomly")
    for name, known in KNOWN_IMPLEMENTERS.items():
        for impl in getattr(config.pluginmanager.hook, name).get_hookimpls():
            if name == "pytest_runtest_protocol" and (impl.wrapper or impl.hookwrapper):
                continue
            assert impl.plugin_name in known, (name, impl.plugin_name)


def test_option_is_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--benchaudit-full-protocol*"])
