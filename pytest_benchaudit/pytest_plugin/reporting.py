"""How benchmark answers appear in pytest's terminal: compact, bounded, linear in the run's size.

A wrong or invalid answer is an expected outcome of a benchmark item, not a crash.  Its
report stays a *failed* report (the exit status, JUnit XML, ``--lf``, ``--sw``, ``--maxfail``
and xdist all see it failed), with a one-line ``longrepr`` (see
:meth:`~.collect.BenchItem.repr_failure`), but pytest's own end-of-run sections never
iterate benchmark reports:

* pytest's ``FAILURES`` section (``TerminalReporter.summary_failures``) prints one section
  per failed report and, for each, scans every passed setup/teardown report for teardown
  output (``_get_teardown_reports``): O(failures x reports), pytest issue #13360; at
  16,167 items ~90% wrong that was 380 s after the last answer.
* the short test summary (``-rf``, on by default) prints one line per failed report.

Mechanism: :meth:`AnswerReporting.pytest_terminal_summary` is a hook wrapper that runs
*around* the terminal reporter's own wrapper (``tryfirst``).  Before it, the benchmark
reports are taken out of ``terminalreporter.stats["failed"]``; pytest's sections then
see plain tests only (their output is unchanged); after it they are put back, so the
final ``N failed, M passed`` line still counts them.  In between, the benchaudit summary
lists the first wrong answers of each task (``--show-answers N``, default 5; ``all`` or
``-v`` lists every one).  ``tests/pytest_plugin/test_output.py`` breaks if a pytest release changes
any of what this relies on (the order of the wrapped sections, ``stats`` keyed by
category, the summary line computed after the hook).

In verbose mode (``-v``), pytest's per-item line reads ``WRONG`` or ``INVALID`` rather
than ``FAILED`` for benchmark items (``pytest_report_teststatus``; category ``failed``).

Progress: on a terminal (and at pytest's default verbosity or ``-q``), benchmark items print
no progress letter; one live line (:class:`LiveLine`, redrawn at most 10 times a second with
``TerminalReporter.rewrite``) shows questions done of total, rate, ETA and the running score
and invalid rate per model.  pytest's own ``[NN%]`` column is turned off for such a session
(it would count characters the live line overwrote); plain tests keep their letters.  Not a
terminal (CI logs, pipes): no live line and no letters for benchmark items either, but the same
text as a plain line at each tenth of the run (ten lines, not one letter per question).  Either
way pytest does not start a line with the suite file's path for benchmark items (the reporter's
``showfspath`` is off while they run, on again for plain tests): the path had no letters after
it, came back after each progress line, and cost a path computation per item.
``BENCHAUDIT_PROGRESS=1`` forces the live line, ``=0`` (or ``-v``) pytest's usual per-item output.

Memory (:class:`ReportTrim`, every process): pytest's terminal reporter keeps every report of
the session in ``stats`` (three per item: ~2.8 KiB an item, 450 MiB for 161,670 bare items).
Once every ``pytest_runtest_logreport`` implementation has seen a benchmark item's reports,
the passed set-up and teardown reports without captured output leave ``stats[""]`` (nothing
of pytest's counts or sections reads them: benchmark items never enter the failure sections),
and the call report's ``benchaudit_record`` (the whole record: prompt, raw output) becomes
the small shared ``{"valid", "correct"}`` the end-of-run summary needs, and its
``user_properties`` (the JUnit XML properties) are emptied; the record itself is in
``records.jsonl``.  A plugin that wants the record reads it in ``pytest_runtest_logreport``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from typing import Any

import pytest

from pytest_benchaudit.common.progress import ENV as PROGRESS_ENV
from pytest_benchaudit.dataset.suites import SUITE_FILENAME
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.pytest_plugin import _terminal

__all__ = [
    "AnswerReporting",
    "LiveLine",
    "ReportTrim",
    "add_output_options",
    "is_bench_failure",
    "is_benchmark_report",
    "live_enabled",
    "show_answers",
]

DEFAULT_SHOWN = 5  # wrong answers listed per task by default
DEFAULT_BUDGET = 50  # ... but about this many in all when a run has many tasks (at least one each)


def add_output_options(parser: pytest.Parser) -> None:
    """Options of the terminal output (registered with the other benchaudit options)."""
    group = parser.getgroup("benchaudit")
    group.addoption(
        "--show-answers",
        default=None,
        metavar="N|all",
        help=f"wrong/invalid answers listed per task in the benchaudit summary (default "
        f"{DEFAULT_SHOWN}, fewer per task when a run has many, about {DEFAULT_BUDGET} in all; "
        "'all' lists every one, as -v does; 0 none)",
    )


def show_answers(config: pytest.Config) -> int | None:
    """How many non-correct answers to list per task: ``None`` for all.  A bad value is a usage error."""
    raw = config.getoption("show_answers", None)
    if raw is None:
        return None if config.get_verbosity() >= 1 else DEFAULT_SHOWN
    text = str(raw).strip().lower()
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise pytest.UsageError(f"--show-answers {raw}: expected a number of answers (0 or more) or 'all'")
    return value


def is_bench_failure(report: Any) -> bool:
    """A failed ``call`` report of a benchmark item that carries its record (a wrong or invalid answer).

    A benchmark item that crashed (a bug, not an answer) carries no record and keeps
    pytest's usual traceback and sections.
    """
    return (
        getattr(report, "when", None) == "call"
        and bool(getattr(report, "failed", False))
        and getattr(report, "benchaudit_record", None) is not None
    )


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class LiveLine:
    """Done/total, rate, ETA and the running score and invalid rate per model, as one line."""

    MIN_INTERVAL = 0.1

    def __init__(self, total: int, clock: Any = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.by_model: dict[str, list[int]] = {}  # model -> [answered, correct, invalid]
        self._clock = clock
        self._start = clock()
        self._last = float("-inf")
        self.waiting = ""  # requests stuck while an item waits (common.progress.waiting_text); until the next answer

    def add(self, record: RecordRow) -> None:
        self.done += 1
        self.waiting = ""
        counts = self.by_model.setdefault(str(record.get("model")), [0, 0, 0])
        counts[0] += 1
        counts[1] += bool(record.get("correct"))
        counts[2] += not record.get("valid", True)

    def due(self) -> bool:
        now = self._clock()
        if now - self._last < self.MIN_INTERVAL and self.done < self.total:
            return False
        self._last = now
        return True

    def text(self) -> str:
        elapsed = max(self._clock() - self._start, 1e-9)
        rate = self.done / elapsed
        left = max(self.total - self.done, 0)
        eta = _clock(left / rate) if rate > 0 else "?"
        models = " | ".join(
            f"{m}: {100 * c / n:.1f}% correct, {100 * i / n:.1f}% invalid"
            for m, (n, c, i) in self.by_model.items()
            if n
        )
        return (
            f"benchaudit {self.done:,}/{self.total:,} questions  {rate:,.1f}/s  ETA {eta}"
            + (f"  {self.waiting}" if self.waiting else "")
            + (f"  {models}" if models else "")
        )


def live_enabled(config: pytest.Config, reporter: Any) -> bool:
    """A live line: forced by ``BENCHAUDIT_PROGRESS``, else on a terminal at verbosity <= 0."""
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in ("0", "false", "no", "off") or reporter is None or config.option.collectonly:
        return False
    if config.get_verbosity() > 0:
        return False
    return forced in ("1", "true", "yes", "on") or bool(getattr(reporter, "isatty", False))


def log_lines_enabled(config: pytest.Config, reporter: Any) -> bool:
    """Not a terminal (CI logs, pipes): a plain progress line at each tenth instead of a letter per
    item; ``BENCHAUDIT_PROGRESS=0`` or ``-v`` keeps pytest's own per-item output."""
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    return (
        reporter is not None
        and not config.option.collectonly
        and config.get_verbosity() <= 0
        and forced not in ("0", "false", "no", "off")
    )


class AnswerReporting:
    """pytest plugin object (the process with the terminal: serial run or xdist controller)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.live: LiveLine | None = None
        self.tty = False  # live line redrawn in place (a terminal) or a line per tenth (a log)
        self._drawn = False
        self._user_fspath: bool | None = None
        self._fspath_off = False  # the reporter's showfspath is off (a benchmark item runs)
        self._logged_waiting = 0  # a log: how many stuck requests its last line said

    # -- the live line ---------------------------------------------------------------
    def _reporter(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def _start_live(self, total: int) -> None:
        reporter = self._reporter()
        if self.live is not None or total <= 0:
            return
        if live_enabled(self.config, reporter):
            self.tty = True
        elif log_lines_enabled(self.config, reporter):
            self.tty = False
        else:
            return
        self.live = LiveLine(total)
        # pytest's [NN%] column counts the characters on the current line, which the live line
        # overwrites; with it on, every item would end a line.  (tests/pytest_plugin/test_output.py checks it.)
        _terminal.hide_progress_column(reporter)
        self._user_fspath = _terminal.user_showfspath(reporter)  # the user's setting, for plain tests

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        # Before the terminal reporter's own: no "suites/x/suite.toml " line start for a benchmark
        # item (nothing follows it), the user's setting again for a plain test.
        if self.live is not None:
            bench = _is_bench_nodeid(nodeid)
            if bench is not self._fspath_off:
                self._reporter().showfspath = False if bench else self._user_fspath
                self._fspath_off = bench

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._start_live(sum(1 for i in session.items if getattr(i, "bench", None) is not None))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        self._start_live(sum(1 for nodeid in ids if ".toml::" in nodeid))  # every worker collects the same

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "benchaudit_record", None)
        if self.live is None or record is None or report.when != "call":
            return
        live = self.live
        step = live.done * 10 // live.total
        live.add(record)
        reporter = self._reporter()
        if not self.tty:  # a log: one plain line at each tenth of the run
            if live.done * 10 // live.total > step:
                reporter.write_line(live.text())
            return
        if live.due():
            width = max(_terminal.terminal_width(reporter) - 1, 20)
            reporter.rewrite(live.text()[:width], erase=True)
            self._drawn = True

    def show_waiting(self, count: int, text: str) -> None:
        """An item is still waiting for its answer: the live line says which requests are stuck
        (``count`` of them; ``text``: :func:`~pytest_benchaudit.common.progress.waiting_text`, ``""``
        for none) instead of standing still; a log gets a line each time the count grows."""
        live = self.live
        if live is None or text == live.waiting:
            return
        if not live.waiting:  # an answer came since the last line said anything: a new wait
            self._logged_waiting = 0
        live.waiting = text
        reporter = self._reporter()
        if not self.tty:
            if count > self._logged_waiting:  # not a line per second of one long wait
                reporter.write_line(f"benchaudit: {text}")
            self._logged_waiting = count
            return
        width = max(_terminal.terminal_width(reporter) - 1, 20)
        reporter.rewrite(live.text()[:width], erase=True)
        self._drawn = True

    def pytest_sessionfinish(self) -> None:
        if self.live is not None and self.tty and self._drawn:
            reporter = self._reporter()
            reporter.rewrite(self.live.text()[: max(_terminal.terminal_width(reporter) - 1, 20)], erase=True)
            reporter.write_line("")
            self._drawn = False

    # -- per-item status ---------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        if self.live is not None and report.when == "call" and getattr(report, "benchaudit_record", None) is not None:
            # The live line stands for benchmark items; no letter for each of them.
            return ("failed" if report.failed else "passed"), "", ""
        if not is_bench_failure(report):
            return None
        record = report.benchaudit_record
        if record.get("valid", True):
            return "failed", "F", ("WRONG", {"red": True})
        return "failed", "I", ("INVALID", {"yellow": True})

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, Any, Any]:
        # Benchmark reports out of stats["failed"] for the duration of the summary sections.
        with _terminal.failures_hidden(terminalreporter, is_bench_failure):
            return (yield)


# What a benchmark call report keeps of its record once every logreport hook has seen it
# (shared objects: nothing per report). Keys: (valid, correct).
_OUTCOMES = {
    (valid, correct): {"valid": valid, "correct": correct} for valid in (True, False) for correct in (True, False)
}


def _is_bench_nodeid(nodeid: str) -> bool:
    return "::" in nodeid and nodeid.split("::", 1)[0].endswith(".toml")


def is_benchmark_report(report: Any) -> bool:
    """Whether ``report`` is of an item collected from a suite file: its node id names the suite file,
    or, where the node id does not (pytest >= 9.2 drops the file from the id of an item outside its
    rootdir: a packaged suite named by path from a folder without ``suites/``), the suite file is
    among the keywords every item inherits from its parents."""
    if _is_bench_nodeid(str(getattr(report, "nodeid", ""))):
        return True
    return SUITE_FILENAME in (getattr(report, "keywords", None) or {})


class ReportTrim:
    """pytest plugin object (every process): what the session keeps of benchmark reports (see the
    module docstring, "Memory")."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            self._trim(report)

    def _trim(self, report: Any) -> None:
        record = getattr(report, "benchaudit_record", None)
        if isinstance(record, dict) and len(record) > 2:
            report.benchaudit_record = _OUTCOMES[(bool(record.get("valid", True)), bool(record.get("correct")))]
            report.user_properties.clear()  # read by JUnit XML (from the teardown report) and such, by now
            if report.when == "call":
                return
            # otherwise one repeat's record, handed over in a passed set-up report: forgotten as those are
        if report.when == "call" or not report.passed or report.sections or not is_benchmark_report(report):
            return
        _terminal.forget_passed(self.config.pluginmanager.get_plugin("terminalreporter"), report)
