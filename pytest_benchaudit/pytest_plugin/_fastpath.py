"""The one place the light run protocol (:mod:`.protocol`) touches pytest's private internals,
and the version range it is allowed to.

Private names used (all of ``_pytest``):

- ``Session._setupstate`` (``SetupState.teardown_exact``): tear the setup stack down to what the
  next item needs, as ``runtestprotocol`` does after the call;
- ``Item._request`` and ``Item.funcargs``: dropped once the item has run, as ``runtestprotocol`` does;
- ``NodeKeywords._markers``: the item's own keywords, walked without its parents' (pytest's
  ``{x: 1 for x in item.keywords}`` walks the whole chain for every report);
- ``Item._report_sections``: the ``Captured ...`` sections ``TestReport.from_item_and_call`` copies;
- ``LoggingPlugin._log_cli_enabled()``: live logging, which needs pytest's per-phase hooks;
- ``TestReport(...)`` built directly, with keywords (public class, its constructor undocumented);
- ``Function._fixtureinfo``: the fixture closure of a task's first item, handed to its siblings
  (``Function.from_parent(fixtureinfo=...)``) and read for where an overriding fixture is defined;
- ``Session._node_location_to_relpath``: the path pytest reports, computed once per task.

The collection helpers (:func:`fixture_info`, :func:`fixture_defs`, :func:`location_relpath`) are
used on both paths; each falls back to public API when the private name is gone.

Checked on pytest 8.0.2 and 9.2.0 (``make test-pytest-matrix``: ``tests/pytest_plugin/test_protocol.py``
compares the reports and JUnit XML of both paths on each) and pytest-xdist 3.5.0 and 3.8.0
(:mod:`._xdist`).  :data:`PYTEST_TESTED` / :data:`XDIST_TESTED` declare that range; outside it
:func:`untested_reason` says why and the public fallback runs instead: pytest's own
``runtestprotocol`` for every item (the runner's hook returns ``None``) and no read of xdist's queue.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = [
    "PYTEST_TESTED",
    "XDIST_TESTED",
    "fixture_defs",
    "fixture_info",
    "location_relpath",
    "log_cli_enabled",
    "make_report",
    "own_keywords",
    "release_fixtures",
    "report_sections",
    "teardown_exact",
    "untested_reason",
    "versions",
]

# The releases `make test-pytest-matrix` runs the plugin's pytest-facing tests against (the lowest
# the package allows and the newest); widen a bound only with a CI run on that release.
PYTEST_TESTED = SpecifierSet(">=8.0,<9.3")
XDIST_TESTED = SpecifierSet(">=3.5,<3.9")


def versions() -> tuple[str, str | None]:
    """pytest's version and pytest-xdist's (``None`` when xdist is not loaded)."""
    xdist = sys.modules.get("xdist")  # loaded by its entry point when installed and not disabled
    return pytest.__version__, getattr(xdist, "__version__", None) if xdist is not None else None


def _outside(version: str, tested: SpecifierSet) -> bool:
    try:
        return Version(version) not in tested
    except InvalidVersion:
        return True


def untested_reason(pytest_version: str | None = None, xdist_version: str | None = None) -> str | None:
    """Why the private path may not run with these versions (the installed ones by default), or ``None``."""
    installed = versions()
    pytest_version = pytest_version or installed[0]
    xdist_version = xdist_version or installed[1]
    if _outside(pytest_version, PYTEST_TESTED):
        return f"pytest {pytest_version} is outside the range the CI tested (pytest{PYTEST_TESTED})"
    if xdist_version is not None and _outside(xdist_version, XDIST_TESTED):
        return f"pytest-xdist {xdist_version} is outside the range the CI tested (pytest-xdist{XDIST_TESTED})"
    return None


def fixture_info(item: pytest.Item) -> Any:
    """The item's fixture closure (``FuncFixtureInfo``) to give its siblings, or ``None`` (each
    sibling then computes its own, as pytest does)."""
    return getattr(item, "_fixtureinfo", None)


def fixture_defs(item: pytest.Item) -> dict[str, Sequence[Any]]:
    """Fixture name -> its definitions as the item resolved them (empty when pytest no longer says)."""
    info = getattr(item, "_fixtureinfo", None)
    return dict(getattr(info, "name2fixturedefs", None) or {})


def location_relpath(session: pytest.Session, path: Path) -> str:
    """``path`` relative to the root directory, as pytest writes it in a report's location."""
    relpath = getattr(session, "_node_location_to_relpath", None)
    if callable(relpath):
        return str(relpath(path))
    return os.path.relpath(path, session.config.rootpath)


def log_cli_enabled(config: pytest.Config) -> bool:
    """Whether live logging (``log_cli``) is on."""
    enabled = getattr(config.pluginmanager.get_plugin("logging-plugin"), "_log_cli_enabled", None)
    return bool(callable(enabled) and enabled())


def own_keywords(item: pytest.Item) -> Iterable[str]:
    """The item's own keywords, without those it inherits from its parents."""
    return item.keywords._markers  # type: ignore[attr-defined]


def report_sections(item: pytest.Item) -> list[tuple[str, str]]:
    """``Captured ...`` sections as ``TestReport.from_item_and_call`` builds them (none, as a rule)."""
    return [(f"Captured {key} {when}", content) for when, key, content in item._report_sections]


def release_fixtures(item: Any) -> None:
    """As ``runtestprotocol`` does once an item (a ``pytest.Function``) has run: its fixture
    request goes away."""
    if hasattr(item, "_request"):
        item._request = False
        item.funcargs = None


def teardown_exact(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear the setup stack down to what ``nextitem`` needs (everything when ``None``)."""
    session._setupstate.teardown_exact(nextitem)


def make_report(
    nodeid: Any,
    location: Any,
    keywords: dict[str, Literal[1]],
    outcome: Any,
    longrepr: Any,
    when: Any,
    sections: list[tuple[str, str]],
    duration: float,
    start: float,
    stop: float,
    user_properties: list[tuple[str, object]],
    **extra: Any,
) -> pytest.TestReport:
    """A :class:`~pytest.TestReport` as ``from_item_and_call`` makes it, from values already known."""
    return pytest.TestReport(
        nodeid=nodeid,
        location=location,
        keywords=keywords,
        outcome=outcome,
        longrepr=longrepr,
        when=when,
        sections=sections,
        duration=duration,
        start=start,
        stop=stop,
        user_properties=user_properties,
        **extra,
    )
