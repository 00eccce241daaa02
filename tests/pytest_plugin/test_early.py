"""Asking during collection (pytest_plugin/early.py) and forking the inference process at start-up
(inference/prestart.py).

A serial run queues the requests of its first items (at most 2 x the concurrency) while the rest
is still collected, but only when nothing can take an item out of the run; what a later
conftest deselects is released, a usage error found later costs at most those requests, and a
child forked at start-up that no engine takes is gone when pytest ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from pytest_benchaudit.inference import prestart
from pytest_benchaudit.inference.process import available
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

pytestmark = pytest.mark.skipif(not available(), reason="the inference process needs a POSIX platform")

CONCURRENCY = 3  # so at most 6 requests are asked during collection
OPTIONS = ["first", "second", "third", "fourth"]


def _rows(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "question": f"{prefix} question {i}?", "options": OPTIONS, "gold": "A"}
        for i in range(1, n + 1)
    ]


def _completions(server: ScriptedServer) -> list[Any]:
    return [c for c in server.calls if c.path.endswith("/chat/completions")]


class Probe:
    """At the end of collection: which items were asked, and (waiting up to 30 s for the inference
    process to start) how many of those requests the server had received before the run loop."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.asked: list[str] = []
        self.seen = 0
        self.held_at_end: int | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        runner = session.config.pluginmanager.get_plugin("benchaudit-runner")
        self.asked = runner.lookahead.asked_during_collection
        deadline = time.monotonic() + 120  # a bound against a hang only
        while len(_completions(self.server)) < len(self.asked) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.seen = len(_completions(self.server))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        engine = session.config.pluginmanager.get_plugin("benchaudit-runner").engine
        self.held_at_end = engine.held() if engine is not None else None


@pytest.fixture
def answers() -> Any:
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        yield server


@pytest.fixture
def two_suites(pytester: pytest.Pytester) -> None:
    write_mcq_suite(pytester.path, "alpha", _rows("a", 20))
    write_mcq_suite(pytester.path, "beta", _rows("b", 20))


def _run(pytester: pytest.Pytester, server: ScriptedServer, probe: Probe, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites",
        "--data-dir",
        "data",
        "--model",
        f"m@{server.url}",
        "--report-dir",
        "out",
        "--concurrency",
        str(CONCURRENCY),
        "--no-cache",
        "-p",
        "no:randomly",
        *extra,
        plugins=[probe],
    )


def test_the_first_items_are_asked_while_the_rest_is_collected(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None
) -> None:
    probe = Probe(answers)
    result = _run(pytester, answers, probe)
    assert result.ret == 0, result.stdout.str()  # every answer is A, every gold A
    first = [f"suites/alpha/suite.toml::mcq::q{i:04d}[m]" for i in range(1, 2 * CONCURRENCY + 1)]
    assert probe.asked == first
    assert probe.seen >= len(first)  # sent before the run loop began
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(records) == 40 and len({r["item_id"] for r in records}) == 40
    # Each question asked once: the early requests were not asked again by the look-ahead.
    assert len(_completions(answers)) == 40
    assert probe.held_at_end == 0


@pytest.mark.parametrize(
    "extra",
    [["-k", "alpha"], ["-m", "not slow"], ["--deselect", "suites/beta/suite.toml::mcq::q0001[m]"], ["--collect-only"]],
    ids=["-k", "-m", "--deselect", "--collect-only"],
)
def test_nothing_is_asked_during_collection_when_an_option_may_deselect(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None, extra: list[str]
) -> None:
    probe = Probe(answers) if extra != ["--collect-only"] else None
    result = pytester.runpytest(
        "suites",
        "--data-dir",
        "data",
        "--model",
        f"m@{answers.url}",
        "--report-dir",
        "out",
        "--concurrency",
        str(CONCURRENCY),
        "--no-cache",
        *extra,
        plugins=[probe] if probe else [],
    )
    if probe is None:
        assert result.ret == 0 and not _completions(answers)
        return
    assert probe.asked == [] and probe.seen == 0
    assert result.ret in (0, 1) and _completions(answers)  # the run itself asks as usual


@pytest.mark.parametrize(
    "selected", ["suites/alpha/suite.toml::mcq::q0003[m]", "suites/beta/suite.toml::mcq"], ids=["item", "task"]
)
def test_a_node_id_asks_only_what_it_selects(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None, selected: str
) -> None:
    # A node id selects after its task made every item: asking during collection would pay for
    # the first 2 x concurrency questions of the task (the item) or of the suites before it (the task).
    probe = Probe(answers)
    result = pytester.runpytest(
        selected,
        "--data-dir",
        "data",
        "--model",
        f"m@{answers.url}",
        "--report-dir",
        "out",
        "--concurrency",
        str(CONCURRENCY),
        "--no-cache",
        "-p",
        "no:randomly",
        plugins=[probe],
    )
    n = 1 if selected.endswith("]") else 20
    result.assert_outcomes(passed=n)
    assert probe.asked == []
    asked = sorted(c.last_user_text.split("?")[0] for c in _completions(answers))
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(asked) == len(records) == n  # each selected question asked once, nothing else
    if n == 1:
        assert asked == ["a question 3"] and records[0]["question_id"] == "a3"


def test_exitfirst_stops_asking_during_collection(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None
) -> None:
    # -x: the first wrong answer ends the run; answers asked for the items after it are paid for nothing.
    probe = Probe(answers)
    _run(pytester, answers, probe, "-x")
    assert probe.asked == []


def test_an_unknown_collection_modifier_stops_asking_during_collection(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None
) -> None:
    pytester.makeconftest("""
        def pytest_collection_modifyitems(items):
            items.reverse()
    """)
    probe = Probe(answers)
    _run(pytester, answers, probe)
    assert probe.asked == []


def test_what_a_later_conftest_deselects_is_released(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None
) -> None:
    # suites/beta/conftest.py loads only when collection reaches beta, after alpha's first items were asked.
    (pytester.path / "suites" / "beta" / "conftest.py").write_text(
        "def pytest_collection_modifyitems(config, items):\n"
        "    kept = [i for i in items if 'alpha' not in i.nodeid]\n"
        "    config.hook.pytest_deselected(items=[i for i in items if 'alpha' in i.nodeid])\n"
        "    items[:] = kept\n"
    )
    probe = Probe(answers)
    result = _run(pytester, answers, probe)
    assert len(probe.asked) == 2 * CONCURRENCY and all("alpha" in n for n in probe.asked)
    result.assert_outcomes(passed=20, deselected=20)
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert sorted(r["benchmark"] for r in records) == ["beta"] * 20
    assert probe.held_at_end == 0  # the released requests hold nothing


def test_a_suite_that_fails_to_collect_later_costs_at_most_the_early_requests(
    pytester: pytest.Pytester, answers: ScriptedServer
) -> None:
    write_mcq_suite(pytester.path, "alpha", _rows("a", 20))
    write_mcq_suite(pytester.path, "beta", _rows("b", 20))
    bad = pytester.path / "suites" / "beta" / "suite.toml"
    bad.write_text(bad.read_text().replace('rule = "final_answer_letter"', 'rule = "no_such_rule"'))
    result = pytester.runpytest(
        "suites",
        "--data-dir",
        "data",
        "--model",
        f"m@{answers.url}",
        "--report-dir",
        "out",
        "--concurrency",
        str(CONCURRENCY),
        "--no-cache",
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'no_such_rule' is not a known rule*"])
    assert len(_completions(answers)) <= 2 * CONCURRENCY


def test_a_run_that_would_be_refused_asks_nothing_during_collection(
    pytester: pytest.Pytester, answers: ScriptedServer, two_suites: None
) -> None:
    # A gate naming no collected task is a usage error once collection ends: nothing is paid for before.
    result = pytester.runpytest(
        "suites",
        "--data-dir",
        "data",
        "--model",
        f"m@{answers.url}",
        "--report-dir",
        "out",
        "--concurrency",
        str(CONCURRENCY),
        "--no-cache",
        "--gate",
        "gamma>=0.5",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gamma*"])
    assert not _completions(answers)


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["suites/seceval", "--model", "m@http://h/v1"], {}, True),
        (["suites/seceval", "--model=m@http://h/v1"], {}, True),
        (["suites/seceval"], {"PYTEST_ADDOPTS": "--model m@http://h/v1"}, True),
        (["suites/seceval"], {}, False),  # no model: nothing to ask
        (["suites/seceval", "--model", "m", "-n", "2"], {}, False),  # xdist: its workers ask
        (["suites/seceval", "--model", "m", "-n2"], {}, False),
        (["suites/seceval", "--model", "m", "--dist=load"], {}, False),
        (["suites/seceval", "--model", "m", "--co"], {}, False),
        (["--model", "m", "--help"], {}, False),
        (["suites/seceval", "--model", "m", "--no-inference-process"], {}, False),
        (["suites/seceval", "--model", "m"], {"BENCHAUDIT_INFERENCE_PROCESS": "off"}, False),
        (["suites/seceval"], {"PYTEST_ADDOPTS": "--model 'unbalanced"}, False),
    ],
)
def test_which_command_lines_fork_at_start_up(argv: list[str], env: dict[str, str], expected: bool) -> None:
    assert prestart.looks_like_a_run(argv, env) is expected


CHILD_PID = """
from pytest_benchaudit.inference import prestart

def pytest_configure(config):
    early = prestart._early
    with open("early.pid", "w") as fh:
        fh.write(str(early[0].pid) if early else "")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks at start-up on Linux only")
def test_a_child_forked_at_start_up_that_no_engine_takes_is_gone(
    pytester: pytest.Pytester, outside_xdist_worker: None
) -> None:
    # --model names a model but the run collects no suite: the runner never makes an engine.
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n", childpid=CHILD_PID)
    env = {**os.environ, "PYTHONPATH": f"{pytester.path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_plain.py",
            "--model",
            "m@http://127.0.0.1:9/v1",
            "-p",
            "childpid",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        cwd=pytester.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pid = (pytester.path / "early.pid").read_text()
    assert pid, "the plugin did not fork at start-up for a command line with --model"
    deadline = time.monotonic() + 120  # a bound against a hang only: the child ends once its parent has
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"the child forked at start-up (pid {pid}) outlived its pytest process")
