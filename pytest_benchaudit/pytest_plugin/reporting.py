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
``-v`` lists every one).  ``tests/test_output.py`` breaks if a pytest release changes
any of what this relies on (the order of the wrapped sections, ``stats`` keyed by
category, the summary line computed after the hook).

In verbose mode (``-v``), pytest's per-item line reads ``WRONG`` or ``INVALID`` rather
than ``FAILED`` for benchmark items (``pytest_report_teststatus``; category ``failed``).
"""

from __future__ import annotations

from typing import Any, Generator

import pytest

__all__ = ["AnswerReporting", "add_output_options", "is_bench_failure", "show_answers"]

DEFAULT_SHOWN = 5  # wrong answers listed per task by default


def add_output_options(parser: pytest.Parser) -> None:
    """Options of the terminal output (registered with the other benchaudit options)."""
    group = parser.getgroup("benchaudit")
    group.addoption("--show-answers", default=None, metavar="N|all",
                    help=f"wrong/invalid answers listed per task in the benchaudit summary (default "
                         f"{DEFAULT_SHOWN}; 'all' lists every one, as -v does; 0 none)")


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
    return getattr(report, "when", None) == "call" and bool(getattr(report, "failed", False)) \
        and getattr(report, "benchaudit_record", None) is not None


class AnswerReporting:
    """pytest plugin object (the process with the terminal: serial run or xdist controller)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        if not is_bench_failure(report):
            return None
        record = report.benchaudit_record  # type: ignore[attr-defined]
        if record.get("valid", True):
            return "failed", "F", ("WRONG", {"red": True})
        return "failed", "I", ("INVALID", {"yellow": True})

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, Any, Any]:
        stats = getattr(terminalreporter, "stats", None)
        failed = stats.get("failed") if isinstance(stats, dict) else None
        if not failed:
            return (yield)
        kept = [r for r in failed if not is_bench_failure(r)]
        if len(kept) == len(failed):
            return (yield)
        # The same list object, emptied of benchmark reports for the duration of the summary
        # sections, then restored in its original order (the final stats line counts it).
        original = list(failed)
        failed[:] = kept
        try:
            return (yield)
        finally:
            failed[:] = original
