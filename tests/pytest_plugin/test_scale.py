"""Paper scale in miniature: records go to records.jsonl and are not held (by the controller,
the items, the reports kept by the terminal reporter, the runner's look-ahead or the engine),
and every record is written exactly once, serial and under ``-n 2``.

3,200 items with a look-ahead of 2,048 requests (``--concurrency 1``: the engine's window is its
floor, 256, and the look-ahead 8 x that), so the runner tops its queue up several times while
items run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

QUESTIONS = 1600
MODELS = ("m0", "m1")
ITEMS = QUESTIONS * len(MODELS)

# Inspects the run from inside, after the last item and after the end-of-run summary.
PROBE = '''
import atexit
import gc
import json
import pytest

FOUND = {}


@atexit.register  # registered at start-up: runs after the plugin's exit freeze (registered at collection)
def _at_exit():
    with open("exit.json", "w") as fh:
        json.dump({"tracked": len(gc.get_objects()), "frozen": gc.get_freeze_count()}, fh)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    try:
        return (yield)
    finally:
        runner = session.config.pluginmanager.get_plugin("benchaudit-runner")
        if runner is None or hasattr(session.config, "workerinput"):  # the xdist controller, or a worker
            return
        engine = runner.engine
        FOUND["ahead"] = runner.lookahead.pending
        FOUND["engine_slots"] = engine.held() if engine is not None else 0
        FOUND["items_with_record"] = sum(1 for i in session.items if getattr(i, "record", None) is not None)
        # The records the end-of-run summary has already read from records.jsonl (RecordsDigest).
        digest = session.config.pluginmanager.get_plugin("benchaudit-controller").digest
        FOUND["digested"] = sum(len(g.scores) for g in digest.summary.groups.values()) if digest else 0


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    terminalreporter = config.pluginmanager.get_plugin("terminalreporter")
    controller = config.pluginmanager.get_plugin("benchaudit-controller")
    if controller is None:  # an xdist worker
        return
    sizes = {name: len(value) for name, value in vars(controller).items()
             if isinstance(value, (list, dict, set, tuple))}
    stats = terminalreporter.stats
    FOUND["controller_sizes"] = sizes
    FOUND["bench_setup_teardown_kept"] = sum(1 for r in stats.get("", []) if ".toml::" in r.nodeid)
    FOUND["full_records_on_reports"] = sum(
        1 for key in ("passed", "failed") for r in stats.get(key, [])
        if len(getattr(r, "benchaudit_record", None) or {}) > 2)
    FOUND["counted"] = {key: len(stats.get(key, [])) for key in ("passed", "failed")}
    with open("probe.json", "w") as fh:
        json.dump(FOUND, fh)
'''


@pytest.fixture
def scale(pytester: pytest.Pytester) -> ScriptedServer:
    rows = [
        {
            "id": f"s{i:04d}",
            "question": f"Question number {i}?",
            "options": ["w", "x", "y", "z"],
            "gold": "A" if i % 4 == 0 else "B",
        }
        for i in range(QUESTIONS)
    ]
    write_mcq_suite(pytester.path, "scale", rows)
    pytester.makeconftest(PROBE)
    return ScriptedServer(lambda call: Reply(content="Answer: A"))


def _args(server: ScriptedServer, report_dir: str) -> list[str]:
    args = [
        "suites/scale",
        "--data-dir",
        "data",
        "--report-dir",
        report_dir,
        "--concurrency",
        "1",
        "-p",
        "no:randomly",
        "--no-cache",
    ]
    for label in MODELS:
        args += ["--model", f"{label}@{server.url}"]
    return args


def _records_once(run_dir: Path) -> list[dict]:
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    keys = Counter((r["question_id"], r["model"]) for r in records)
    assert len(records) == ITEMS and set(keys.values()) == {1}, "every item recorded exactly once"
    return records


def test_serial_run_holds_no_records(pytester: pytest.Pytester, scale: ScriptedServer) -> None:
    with scale as server:
        result = pytester.runpytest_subprocess(*_args(server, "out"))
    result.assert_outcomes(passed=QUESTIONS // 4 * len(MODELS), failed=ITEMS - QUESTIONS // 4 * len(MODELS))
    run_dir = only_run_dir(pytester.path / "out")
    _records_once(run_dir)
    found = json.loads((pytester.path / "probe.json").read_text())
    # The runner's look-ahead is empty and the engine keeps no answer once every item consumed its own.
    assert found["ahead"] == 0 and found["engine_slots"] == 0
    assert found["items_with_record"] == 0
    # At exit what is alive is frozen: the interpreter's last collections have next to nothing to walk.
    at_exit = json.loads((pytester.path / "exit.json").read_text())
    assert at_exit["tracked"] < 1000 < 100 * 1000 < at_exit["frozen"], at_exit
    # Most records were digested for the summary from the file during the run (at its flushes).
    assert ITEMS // 2 < found["digested"] <= ITEMS
    # The controller keeps counters, not one entry per record (nothing near the item count).
    assert max(found["controller_sizes"].values()) < 50, found["controller_sizes"]
    # The terminal reporter keeps the call reports (they count), without records or set-up/teardown reports.
    assert found["full_records_on_reports"] == 0 and found["bench_setup_teardown_kept"] == 0
    assert sum(found["counted"].values()) == ITEMS
    summary = json.loads((run_dir / "summary.json").read_text())
    assert sorted((r["model"], r["n"], r["n_correct"]) for r in summary["results"]) == [
        (m, QUESTIONS, QUESTIONS // 4) for m in MODELS
    ]
    wrong = QUESTIONS - QUESTIONS // 4
    result.stdout.fnmatch_lines(
        [
            f"*scale.mcq ?m0?: {wrong:,} not correct*",
            f"*{ITEMS - 2 * (QUESTIONS // 4)} failed, {2 * (QUESTIONS // 4)} passed*",
        ]
    )


def test_xdist_run_records_each_item_once(pytester: pytest.Pytester, scale: ScriptedServer) -> None:
    with scale as server:
        result = pytester.runpytest_subprocess(*_args(server, "out"), "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run_dir = only_run_dir(pytester.path / "out")
    records = _records_once(run_dir)
    assert sum(r["correct"] for r in records) == QUESTIONS // 4 * len(MODELS)
    found = json.loads((pytester.path / "probe.json").read_text())
    assert max(found["controller_sizes"].values()) < 50, found["controller_sizes"]
    assert found["full_records_on_reports"] == 0 and sum(found["counted"].values()) == ITEMS
    run = json.loads((run_dir / "run.json").read_text())
    assert run["n_records"] == ITEMS
