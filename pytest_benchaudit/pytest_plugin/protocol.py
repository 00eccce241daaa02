"""A lighter run protocol for benchmark items: the same reports, without pytest's per-phase machinery.

pytest runs every item through ``runtestprotocol``: for each of setup, call and teardown a
``CallInfo``, the ``pytest_runtest_setup/call/teardown`` hook (output capture started and
stopped, log capture handlers installed and removed, ``PYTEST_CURRENT_TEST`` set), then
``pytest_runtest_makereport`` (``TestReport.from_item_and_call``, the node's keywords walked
again each time) and ``pytest_runtest_logreport``.  For a benchmark item that is most of what
the harness spends per question (~0.8 ms of pytest's ~1 ms on 2 cores), while the item itself
has nothing for those phases to do: a *direct* item (only this plugin's ``question`` /
``pipeline`` / ``model`` fixtures, see :class:`~.collect.BenchItem`) sets up no fixture, prints
nothing, and its call is one runner function.

:class:`LightProtocol` runs such an item as ``pytest_runtest_protocol`` (called by the
runner's ``tryfirst`` hookimpl, returning ``True``) and emits to the reporting hooks exactly
what pytest's own protocol would: ``pytest_runtest_logstart``; a passed ``setup``
:class:`~pytest.TestReport`; the ``call`` report (passed, or failed with the one-line
``longrepr`` of :meth:`~.collect.BenchItem.repr_failure`, ``benchaudit_record`` and the
``user_properties`` attached); a passed ``teardown`` report; ``pytest_runtest_logfinish``,
each through ``item.ihook.pytest_runtest_logreport`` (terminal, JUnit XML, ``--lf``,
``-x``/``--maxfail``, ``--sw``, xdist's worker all read those).  What it does not do per item:
the setup/call/teardown hooks, output and log capture per phase (an item's own output goes
where output between items goes), ``PYTEST_CURRENT_TEST``, ``sys.last_*``.

Anything out of the ordinary goes back to pytest's own code: an outcome other than passed or
a wrong/invalid answer (a ``--max-cost`` skip, a crash, ...) gets its report from
``pytest_runtest_makereport`` with the real ``CallInfo``; ``pytest.exit`` and
``KeyboardInterrupt`` propagate as they do from pytest's protocol; the last item of a task
(or of the run, or any item after which the session fails or stops) tears down the setup
state exactly (``SetupState.teardown_exact``), inside a ``CallInfo``, and reports through
``pytest_runtest_makereport``.

Used when (checked once per session, then per item): no ``--benchaudit-full-protocol`` and no
``BENCHAUDIT_FULL_PROTOCOL=1``; pytest (and pytest-xdist) of a release the CI tested
(:data:`._fastpath.PYTEST_TESTED`, the only module that touches pytest's private internals for
this path; the header says which protocol runs); not ``--pdb``, ``--trace``, ``--setup-only``, ``--setup-show``,
``--setup-plan``, nor live logging (``log_cli``); every plugin implementing
``pytest_runtest_setup/call/teardown``, ``pytest_runtest_makereport``,
``pytest_exception_interact`` or (not as a wrapper) ``pytest_runtest_protocol`` is one whose
work for these items is known to be nothing (:data:`KNOWN_IMPLEMENTERS`: pytest's own,
pytest-timeout, hypothesis); and, per item: a direct :class:`~.collect.BenchItem` with no
``skip`` / ``skipif`` / ``xfail`` marker on it or its parents, whose parents have no ``setup``
of their own.  Any other item (plain tests, conftest overrides, markers) runs pytest's protocol.
``tests/pytest_plugin/test_protocol.py`` compares the reports and the JUnit XML of both paths
and breaks if a pytest release changes what this relies on.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal

import pytest
from typing_extensions import TypedDict

from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.pytest_plugin import _fastpath
from pytest_benchaudit.pytest_plugin.collect import BenchItem, BenchmarkFailure

__all__ = [
    "ENV",
    "KNOWN_IMPLEMENTERS",
    "LightProtocol",
    "add_protocol_options",
    "full_protocol_reason",
    "protocol_header",
]

ENV = "BENCHAUDIT_FULL_PROTOCOL"

# hook -> plugins whose implementation does nothing a benchmark item needs (checked against the
# registered plugin names; an unknown implementer means pytest's own protocol for every item).
KNOWN_IMPLEMENTERS: dict[str, frozenset[str]] = {
    # pytest's runner/skipping/capture/logging, its thread and unraisable-exception collectors
    # (what they collect is reported at the next item or at the end of the session), and
    # pytest-timeout (its per-run timer wraps pytest_runtest_protocol) and hypothesis (its
    # hooks act on @given tests only); pytest < 8.2's "nose" calls a test function's optional
    # `setup` / `teardown` attributes, which a benchmark item's function has none of.
    "pytest_runtest_setup": frozenset(
        {
            "runner",
            "skipping",
            "capturemanager",
            "logging-plugin",
            "threadexception",
            "unraisableexception",
            "timeout",
            "hypothesispytest",
            "nose",
        }
    ),
    "pytest_runtest_call": frozenset(
        {
            "runner",
            "skipping",
            "capturemanager",
            "logging-plugin",
            "threadexception",
            "unraisableexception",
            "timeout",
            "hypothesispytest",
        }
    ),
    "pytest_runtest_teardown": frozenset(
        {
            "runner",
            "capturemanager",
            "logging-plugin",
            "threadexception",
            "unraisableexception",
            "timeout",
            "hypothesispytest",
        }
    ),
    # skipping: xfail only; tmpdir: tmp_path retention (no such fixture here); unittest: TestCase items
    "pytest_runtest_makereport": frozenset(
        {"runner", "skipping", "unittest", "tmpdir", "hypothesispytest", "benchaudit-runner"}
    ),
    # both cancel a timer; --pdb's "pdbinvoke" is not here: it needs the real exception
    "pytest_exception_interact": frozenset({"faulthandler", "timeout"}),
    "pytest_runtest_protocol": frozenset({"runner", "benchaudit-runner"}),  # wrappers are fine: they wrap us
}
_MARKS = ("skip", "skipif", "xfail")  # evaluated by pytest_runtest_setup / makereport


def add_protocol_options(parser: pytest.Parser) -> None:
    parser.getgroup("benchaudit").addoption(
        "--benchaudit-full-protocol",
        action="store_true",
        default=False,
        help="run benchmark items through pytest's full per-item protocol (setup/call/teardown hooks, "
        f"capture) instead of benchaudit's lighter one, which emits the same reports; also {ENV}=1",
    )


def full_protocol_reason(config: pytest.Config) -> str | None:
    """Why this session runs benchmark items through pytest's own protocol, or ``None``."""
    if config.getoption("benchaudit_full_protocol", False):
        return "--benchaudit-full-protocol"
    untested = _fastpath.untested_reason()  # the private internals used only where the CI ran them
    if untested is not None:
        return untested
    if os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return f"{ENV}={os.environ[ENV]}"
    for option, flag in (
        ("usepdb", "--pdb"),
        ("trace", "--trace"),
        ("setupplan", "--setup-plan"),
        ("setuponly", "--setup-only"),
        ("setupshow", "--setup-show"),
    ):
        if config.getoption(option, False):
            return flag
    if _fastpath.log_cli_enabled(config):
        return "live logging (log_cli)"
    hook = config.pluginmanager.hook
    for name, known in KNOWN_IMPLEMENTERS.items():
        for impl in getattr(hook, name).get_hookimpls():
            if name == "pytest_runtest_protocol" and (impl.wrapper or impl.hookwrapper):
                continue
            if impl.plugin_name not in known:
                return f"plugin {impl.plugin_name!r} implements {name}"
    return None


def protocol_header(config: pytest.Config) -> str:
    """The header's line: which protocol runs this session's benchmark items, and why."""
    reason = full_protocol_reason(config)
    if reason is not None:
        return f"benchmark items run by pytest's own protocol: {reason}"
    pytest_version, xdist_version = _fastpath.versions()
    tested = f"pytest {pytest_version}" + (f", pytest-xdist {xdist_version}" if xdist_version else "")
    return f"benchmark items run by benchaudit's light protocol ({tested}: in the range the CI tested)"


def _trivial_setup(node: Any) -> bool:
    """True when ``node`` (a collector) does nothing when set up or torn down."""
    cls = type(node)
    return cls.setup is pytest.Collector.setup and cls.teardown is pytest.Collector.teardown


class _RecordAttributes(TypedDict, total=False):
    """What a call report carries beside pytest's fields (the controller writes the records)."""

    benchaudit_record: RecordRow
    benchaudit_handed_over: bool  # inference.repeats: every record already reported, this one shown only


class LightProtocol:
    """``pytest_runtest_protocol`` for benchmark items (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reason: str | None = None  # why not (None: not yet decided, or used)
        self._enabled: bool | None = None
        # id(parent) -> (parent, usable, ihook, the parent chain's keywords)
        self._parents: dict[int, tuple[Any, bool, Any, dict[str, Literal[1]]]] = {}
        self._reraise = (pytest.exit.Exception, KeyboardInterrupt)  # never --pdb here (it takes the full path)
        self.items = 0  # items run this way (tests and diagnostics)

    def enabled(self) -> bool:
        if self._enabled is None:
            self.reason = full_protocol_reason(self.config)
            self._enabled = self.reason is None
        return self._enabled

    def _parent(self, item: BenchItem) -> tuple[bool, Any, dict[str, Literal[1]]]:
        parent = item.parent
        entry = self._parents.get(id(parent))
        if entry is None or entry[0] is not parent:
            chain = parent.listchain() if parent is not None else []
            usable = all(_trivial_setup(n) and not any(m.name in _MARKS for m in n.own_markers) for n in chain)
            inherited: dict[str, Literal[1]] = dict.fromkeys(parent.keywords, 1) if parent is not None else {}
            entry = self._parents[id(parent)] = (parent, usable, item.ihook, inherited)
        return entry[1], entry[2], entry[3]

    def run(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """Run ``item`` and report it; ``None`` (pytest's protocol runs it) when it is not for this path."""
        if type(item) is not BenchItem or not item.direct or not self.enabled():
            return None
        if any(m.name in _MARKS for m in item.own_markers):
            return None
        usable, ihook, inherited = self._parent(item)
        if not usable:
            return None
        self.items += 1
        nodeid, location = item.nodeid, item.location
        ihook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        try:
            self._phases(item, nextitem, ihook, location, inherited)
        finally:
            _fastpath.release_fixtures(item)  # as runtestprotocol does once the item has run
        ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        return True

    def _phases(
        self, item: BenchItem, nextitem: pytest.Item | None, ihook: Any, location: Any, inherited: dict[str, Literal[1]]
    ) -> None:
        node_id = item.id if hasattr(type(item), "id") else item.nodeid  # pytest >= 9.2: the structured id
        # pytest's {x: 1 for x in item.keywords}: the item's own keywords, then its parents' (walked
        # once per parent here, not once per item; test_protocol compares the reports).
        own = _fastpath.own_keywords(item)
        keywords: dict[str, Literal[1]] = {**dict.fromkeys(own, 1), **{k: 1 for k in inherited if k not in own}}
        report, sections = _fastpath.make_report, _fastpath.report_sections
        now = time.time()
        ihook.pytest_runtest_logreport(
            report=report(
                node_id,
                location,
                keywords,
                "passed",
                None,
                "setup",
                sections(item),
                0.0,
                now,
                now,
                user_properties=item.user_properties,
            )
        )

        call = pytest.CallInfo.from_call(item.runtest, when="call", reraise=self._reraise)
        excinfo = call.excinfo
        if excinfo is None or isinstance(excinfo.value, BenchmarkFailure):
            extra: _RecordAttributes = {} if item.record is None else {"benchaudit_record": item.record}
            if item.records_handed_over:  # inference.repeats: each repeat's record was reported as it came
                extra["benchaudit_handed_over"] = True
            rep = report(
                node_id,
                location,
                dict(keywords),
                "passed" if excinfo is None else "failed",
                None if excinfo is None else item.repr_failure(excinfo),
                "call",
                sections(item),
                call.duration,
                call.start,
                call.stop,
                user_properties=item.user_properties,
                **extra,
            )
        else:  # a skip (--max-cost), a crash: pytest's own report for it
            rep = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=rep)
        item.record, item.records_handed_over = (
            None,
            False,
        )  # the report carries it; the item (kept until the session ends) does not
        # A wrong answer is an expected outcome: its known implementers (they cancel a timer the
        # protocol's end cancels anyway) are not called for it; a crash goes to them as in pytest.
        if excinfo is not None and not isinstance(excinfo.value, BenchmarkFailure) and _interactive(call, rep):
            ihook.pytest_exception_interact(node=item, call=call, report=rep)

        session = item.session
        if session.shouldfail or session.shouldstop:
            nextitem = None  # as runtestprotocol: the session ends, tear everything down
        if nextitem is not None and nextitem.parent is item.parent:
            # Nothing to tear down: this path set nothing up, and what pytest's protocol set up
            # (at most this item's parents) the next item needs too.
            now = time.time()
            rep = report(
                node_id,
                location,
                dict(keywords),
                "passed",
                None,
                "teardown",
                sections(item),
                0.0,
                now,
                now,
                user_properties=item.user_properties,
            )
            ihook.pytest_runtest_logreport(report=rep)
            item.user_properties.clear()  # each report holds its own copy (JUnit reads the teardown one)
            return
        teardown = pytest.CallInfo.from_call(
            lambda: _fastpath.teardown_exact(session, nextitem), when="teardown", reraise=self._reraise
        )
        rep = ihook.pytest_runtest_makereport(item=item, call=teardown)
        ihook.pytest_runtest_logreport(report=rep)
        if teardown.excinfo is not None and _interactive(teardown, rep):
            ihook.pytest_exception_interact(node=item, call=teardown, report=rep)


def _interactive(call: pytest.CallInfo[Any], report: Any) -> bool:
    """pytest's ``check_interactive_exception``: a real exception, not a skip or an expected failure."""
    if call.excinfo is None or hasattr(report, "wasxfail"):
        return False
    import bdb
    import unittest

    return not isinstance(call.excinfo.value, (pytest.skip.Exception, bdb.BdbQuit, unittest.SkipTest))
