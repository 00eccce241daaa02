"""The one place :mod:`.reporting` touches pytest's ``TerminalReporter`` beyond its public methods.

Private names used (``_pytest.terminal.TerminalReporter``):

- ``_tw.fullwidth``: the terminal's width, to cut the live line to one row;
- ``_show_progress_info``: pytest's ``[NN%]`` column, turned off while the live line owns the row;
- ``_showfspath``: the user's own ``showfspath`` setting (``None``: pytest's default), restored
  for plain tests after benchmark items turned the public ``showfspath`` off;
- ``stats``: the reports by category (``"failed"``, ``""``), which benchmark reports leave for the
  end-of-run sections (:func:`failures_hidden`) or once counted (:func:`forget_passed`).

Checked on pytest 8.0.2 and 9.2.0 (``make test-pytest-matrix``: ``tests/pytest_plugin/test_output.py``
and ``test_progress.py``).  Public fallback for each, when a release renames it: the width of
``shutil.get_terminal_size()``; pytest's progress column left on; ``showfspath``'s resolved value;
``stats`` left as it is (pytest's own sections then list benchmark failures too, more slowly).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["failures_hidden", "forget_passed", "hide_progress_column", "terminal_width", "user_showfspath"]


def terminal_width(reporter: Any) -> int:
    """The terminal's width in columns."""
    width = getattr(getattr(reporter, "_tw", None), "fullwidth", None)
    return width if isinstance(width, int) else shutil.get_terminal_size().columns


def hide_progress_column(reporter: Any) -> None:
    """Turn pytest's ``[NN%]`` column off: it counts characters on a row the live line overwrites."""
    if hasattr(reporter, "_show_progress_info"):
        reporter._show_progress_info = False


def user_showfspath(reporter: Any) -> bool | None:
    """The user's ``showfspath`` setting, as the reporter's public property accepts it back."""
    if hasattr(reporter, "_showfspath"):
        value = reporter._showfspath
        return value if value is None or isinstance(value, bool) else bool(value)
    return bool(reporter.showfspath)


def _stats(reporter: Any) -> dict[str, list[Any]] | None:
    stats = getattr(reporter, "stats", None)
    return stats if isinstance(stats, dict) else None


@contextlib.contextmanager
def failures_hidden(reporter: Any, hidden: Callable[[Any], bool]) -> Iterator[None]:
    """While the end-of-run sections run, the failed reports for which ``hidden`` is true are out of
    ``stats["failed"]`` (the same list object, emptied of them), then back in their original order
    (the final ``N failed`` line counts them)."""
    stats = _stats(reporter)
    failed = stats.get("failed") if stats is not None else None
    kept = [r for r in failed if not hidden(r)] if failed else None
    if not failed or kept is None or len(kept) == len(failed):
        yield
        return
    original = list(failed)
    failed[:] = kept
    try:
        yield
    finally:
        failed[:] = original


def forget_passed(reporter: Any, report: Any) -> None:
    """Drop ``report`` (a passed set-up or teardown report, just counted) from ``stats[""]``."""
    stats = _stats(reporter) if reporter is not None else None
    kept = stats.get("") if stats is not None else None
    if kept and kept[-1] is report:
        kept.pop()
