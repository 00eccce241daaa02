"""Fixtures for testing benchmark suites with pytest's ``pytester``: a pytest plugin, not loaded by default.

A test suite turns it on in its root ``conftest.py``::

    pytest_plugins = ["pytest_benchaudit.testing.fixtures"]

``scripted``: a :class:`~.scripted_server.ScriptedServer` on 127.0.0.1 answering the toy questions
(:func:`~.toy.toy_script`). ``toy``: the toy suite written into the ``pytester`` directory.
``real_data``: the real benchmark data directory (``BENCHAUDIT_DATA``) or a skip.
``outside_xdist_worker``: the test's pytest subprocesses start as a top-level pytest would, even when the
test itself runs on a pytest-xdist worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_benchaudit.testing.data import real_data_dir
from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.toy import toy_script, write_toy

__all__ = ["data_dir", "outside_xdist_worker", "real_data", "scripted", "toy"]

# What pytest-xdist sets in a worker's environment; a pytest started from a worker inherits it and the
# plugin then takes itself for a worker (it does not fork its inference process at start-up).
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture
def outside_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's pytest subprocesses run as a top-level pytest would, even when this suite itself runs under
    ``-n``: an inherited ``PYTEST_XDIST_WORKER`` would make the plugin take them for workers (no start-up fork)."""
    for name in XDIST_WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    """A scripted server answering the toy questions, for the test's duration."""
    with ScriptedServer(toy_script()) as server:
        yield server


@pytest.fixture
def toy(pytester: pytest.Pytester) -> tuple[Path, Path]:
    """The toy suite under the pytester directory: (``suites/toy``, ``data``)."""
    return write_toy(pytester.path)


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The real benchmark data directory, or a skip."""
    return real_data_dir()


@pytest.fixture(scope="session")
def data_dir(real_data: Path) -> Path:
    """The real benchmark data directory (another name for ``real_data``), or a skip."""
    return real_data
