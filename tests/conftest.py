"""The test suite's own settings: the fixtures of ``pytest_benchaudit.testing`` (a scripted server, the toy
suite, the real data), a timeout for every test and a private cache per test.

Helpers are imported from real modules (``pytest_benchaudit.testing.*``, ``helpers``), never from this file,
so the suite runs under ``--import-mode=importlib`` as under the default mode.
"""

from __future__ import annotations

import pytest

# pytester's in-process runs restore sys.modules afterwards; numpy's C extension cannot be
# imported twice in one process, so the plugin's lazy scipy import must happen out here first.
import scipy.stats  # noqa: F401

# helpers.cli_runs: the toy run fixtures the read commands' tests share (built_toy, toy_root, toy_run)
pytest_plugins = ["pytest_benchaudit.testing.fixtures", "helpers.cli_runs"]

TEST_TIMEOUT_S = 600  # a hung test fails instead of stalling CI (pytest-timeout)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this suite gets the 600 s timeout unless it sets its own (the limit lives here,
    not in pyproject.toml, whose pytest table a suite run from the checkout reads too)."""
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own per-user cache directory (the generation cache lives there), so
    a scripted answer cached by one test never answers another test's request."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
