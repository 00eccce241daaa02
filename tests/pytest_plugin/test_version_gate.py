"""The light protocol's version gate (pytest_plugin/_fastpath.py) and the xdist adapter's shapes.

The private path runs only for pytest / pytest-xdist releases inside the declared tested range;
outside it pytest's own ``runtestprotocol`` runs every item, automatically, the header says which,
and the run's records, verdicts and JUnit XML are the same.  The gate is forced here by narrowing
the declared range (in process, as a future release would fall outside it).
"""

from __future__ import annotations

import json
import queue
import re
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from pytest_benchaudit.pytest_plugin import _fastpath, _xdist
from pytest_benchaudit.pytest_plugin.protocol import full_protocol_reason
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.toy import toy_script

VARIABLE_RECORD = ("timestamp", "latency_s")


@pytest.mark.parametrize(
    ("pytest_version", "xdist_version", "outside"),
    [
        ("8.0.2", "3.5.0", None),
        ("9.2.0", "3.8.0", None),
        ("8.4.2", None, None),
        ("7.4.4", "3.8.0", "pytest 7.4.4"),
        ("9.3.0", "3.8.0", "pytest 9.3.0"),
        ("10.0.0.dev1", None, "pytest 10.0.0.dev1"),
        ("9.2.0", "3.9.0", "pytest-xdist 3.9.0"),
        ("9.2.0", "3.4.0", "pytest-xdist 3.4.0"),
        ("not-a-version", None, "pytest"),
    ],
)
def test_the_gate_admits_only_the_tested_range(
    pytest_version: str, xdist_version: str | None, outside: str | None
) -> None:
    reason = _fastpath.untested_reason(pytest_version, xdist_version)
    if outside is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(outside) and "outside the range the CI tested" in reason


def test_the_installed_versions_are_in_the_range() -> None:
    """The CI's own venvs: a release the range does not admit is one nobody ran these tests on."""
    assert _fastpath.untested_reason() is None, _fastpath.versions()


def test_the_declared_range_matches_the_package_floor() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    floors = {
        dep.split(">=")[0]: dep.split(">=")[1].split(",")[0]
        for dep in pyproject["project"]["dependencies"]
        if dep.startswith(("pytest>=", "pytest-xdist>="))
    }
    assert floors["pytest"] in _fastpath.PYTEST_TESTED and floors["pytest-xdist"] in _fastpath.XDIST_TESTED


def _narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fastpath, "PYTEST_TESTED", SpecifierSet("<8.0"))


def test_an_untested_pytest_means_pytests_own_protocol(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert full_protocol_reason(pytester.parseconfigure()) is None
    _narrow(monkeypatch)
    reason = full_protocol_reason(pytester.parseconfigure())
    assert reason == f"pytest {pytest.__version__} is outside the range the CI tested (pytest<8.0)"


SPY = '''
import json, os

EVENTS = []

def pytest_runtest_logreport(report):
    EVENTS.append([report.nodeid, report.when, report.outcome, str(report.longrepr or ""),
                   [list(p) for p in report.user_properties]])

def pytest_sessionfinish(session):
    runner = session.config.pluginmanager.get_plugin("benchaudit-runner")
    with open(os.environ["SPY_OUT"], "w") as fh:
        json.dump({"events": EVENTS, "light_items": runner.protocol.items}, fh)
'''


def _run(pytester: pytest.Pytester, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[pytest.RunResult, Any]:
    spy = pytester.path / f"{name}.json"
    monkeypatch.setenv("SPY_OUT", str(spy))
    with ScriptedServer(toy_script()) as fresh:  # its retry and rate-limit replies are stateful
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"toy-model@{fresh.url}",
            "--report-dir",
            name,
            "--junitxml",
            f"{name}.xml",
            "--max-retries",
            "2",
            "--no-cache",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        )
    return result, json.loads(spy.read_text())


def test_both_paths_give_the_same_records_verdicts_and_junit(
    pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(SPY)
    light, seen_light = _run(pytester, "light", monkeypatch)
    _narrow(monkeypatch)
    gated, seen_gated = _run(pytester, "gated", monkeypatch)
    assert seen_light["light_items"] > 0 and seen_gated["light_items"] == 0
    assert "benchaudit: benchmark items run by benchaudit's light protocol (pytest " in light.stdout.str()
    assert (
        f"benchaudit: benchmark items run by pytest's own protocol: pytest {pytest.__version__} is outside "
        "the range the CI tested (pytest<8.0)"
    ) in gated.stdout.str()
    assert light.parseoutcomes() == gated.parseoutcomes() and light.ret == gated.ret
    assert seen_light["events"] == seen_gated["events"]  # every report: outcome, verdict line, properties
    strip = [
        [
            {k: v for k, v in r.items() if k not in VARIABLE_RECORD}
            for r in read_run(only_run_dir(pytester.path / name))["records"]
        ]
        for name in ("light", "gated")
    ]
    assert strip[0] == strip[1] and len(strip[0]) == seen_light["light_items"]
    summaries = [read_run(only_run_dir(pytester.path / name))["summary"] for name in ("light", "gated")]
    assert summaries[0] == summaries[1]
    junit = [
        re.sub(r' (time|timestamp|hostname)="[^"]*"', "", (pytester.path / f"{name}.xml").read_text())
        for name in ("light", "gated")
    ]
    assert junit[0] == junit[1] and junit[0].count("<testcase") == len(strip[0])


def test_collection_without_pytests_private_names_gives_the_same_run(
    pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collection helpers' public fallbacks: with ``Function._fixtureinfo`` unread and
    ``Session._node_location_to_relpath`` gone (as a future pytest may have it), every item still
    runs, through pytest's own fixture set-up, with the same records, verdicts and JUnit XML."""
    pytester.makeconftest(SPY)
    private, seen_private = _run(pytester, "private", monkeypatch)
    monkeypatch.setattr(_fastpath, "fixture_info", lambda item: None)
    monkeypatch.delattr(pytest.Session, "_node_location_to_relpath")
    public, seen_public = _run(pytester, "public", monkeypatch)
    assert public.parseoutcomes() == private.parseoutcomes() and public.ret == private.ret
    assert seen_public["events"] == seen_private["events"]
    records = [
        [
            {k: v for k, v in r.items() if k not in VARIABLE_RECORD}
            for r in read_run(only_run_dir(pytester.path / name))["records"]
        ]
        for name in ("private", "public")
    ]
    assert records[0] == records[1] and records[0]
    junit = [
        re.sub(r' (time|timestamp|hostname)="[^"]*"', "", (pytester.path / f"{name}.xml").read_text())
        for name in ("private", "public")
    ]
    # the location pytest reports (JUnit's file/line/classname come from it) is the same either way
    assert junit[0] == junit[1] and junit[0].count("<testcase") == len(records[0])
    assert [e[0] for e in seen_public["events"]] == [e[0] for e in seen_private["events"]]


class _Interactor:
    """The two attributes the adapter reads, on a queue of either shape xdist has used."""

    def __init__(self, torun: Any, nextitem_index: Any) -> None:
        self.torun, self.nextitem_index = torun, nextitem_index


def _queue_with(config: pytest.Config, interactor: Any) -> _xdist.WorkerQueue:
    config.pluginmanager.register(interactor, "fake-worker-interactor")
    return _xdist.WorkerQueue(config)


def test_the_worker_queue_reads_xdists_queue_shapes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = pytest.importorskip("xdist.remote")
    import execnet

    # pytest-xdist >= 3.7: TestQueue, read under its lock()
    if hasattr(remote, "TestQueue"):
        torun = remote.TestQueue(execnet.gateway_base.get_execmodel("thread"))
        for index in (4, 5, remote.Marker.SHUTDOWN):
            torun.put(index)
        assert _queue_with(pytester.parseconfigure(), _Interactor(torun, 3)).queued_indices() == [3, 4, 5]
    # pytest-xdist 3.5 and 3.6: the execution model's queue.Queue, read under its mutex
    plain: queue.Queue[Any] = queue.Queue()
    for index in (7, 8, "shutdown"):
        plain.put(index)
    config = pytester.parseconfigure()
    assert _queue_with(config, _Interactor(plain, None)).queued_indices() == [7, 8]
    assert plain.qsize() == 3  # read, not consumed
    # another shape, no interactor, an untested release: nothing queued ahead (the public fallback)
    assert _queue_with(pytester.parseconfigure(), _Interactor(object(), 1)).queued_indices() == [1]
    assert _xdist.WorkerQueue(pytester.parseconfigure()).queued_indices() == []
    monkeypatch.setattr(_fastpath, "XDIST_TESTED", SpecifierSet("<3.0"))
    assert _queue_with(pytester.parseconfigure(), _Interactor(plain, 6)).queued_indices() == []
