"""The suites that ship with the package, found from any directory.

The wheel carries every ``suite.toml`` (and the shared ``standardized.toml``) as package data under
``pytest_benchaudit/suites/``; in a source checkout that path is a tracked symlink to the
repository's ``suites/``, so both find the same files through one path.  Benchmark data never
ships (the benchmarks' licences are non-commercial): only the configs.

Kept free of heavy imports: ``benchaudit``'s start-up and the pytest plugin's path resolution
read it before anything else is loaded.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["package_version", "packaged_suites_dir"]


def packaged_suites_dir() -> Path | None:
    """The packaged ``suites/`` folder, resolved (a wheel's package data, or a checkout's
    ``suites/`` through the package's symlink); ``None`` when this installation has none."""
    folder = (Path(__file__).resolve().parent.parent / "suites").resolve()
    return folder if folder.is_dir() else None


def package_version() -> str:
    """The installed plugin's version, as headers and ``benchaudit init`` name it."""
    from pytest_benchaudit import __version__

    return __version__
