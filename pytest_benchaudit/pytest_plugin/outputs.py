"""Paths the run writes after its last question, checked at start-up by doing what will be done.

pytest writes ``--junitxml`` at the end of the session (``os.makedirs`` of its folder, then the
file); benchaudit creates the run directory under ``--report-dir`` at the first benchmark report
and the generation cache under ``--cache-dir`` at the first answer.  A path that cannot be
written would otherwise cost every question of the run and then end in a traceback (or stop after
the first answer).  Looking at permission bits is not enough (``root`` passes ``os.access`` on
``/proc``, where nothing can be created), so :func:`check_output_folder` *tries*: it creates the
folders that are missing and a file in the deepest, as the end of the run will, and removes what
it created.  The folders that were there are left as they were; a run that ends with a usage
error leaves nothing behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

__all__ = ["check_output_file", "check_output_folder"]


def check_output_file(path: Path, option: str) -> None:
    """Raise a usage error now if ``path`` cannot be written at the end of the run: it is a folder,
    a file that cannot be written, or its folder cannot be created (a file in the way, no
    permission, a file system that takes no new entries).  Leaves nothing behind."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        raise pytest.UsageError(f"{option} {path}: is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise pytest.UsageError(f"{option} {path}: no permission to write this file")
    check_output_folder(path.parent, option, shown=path)


def check_output_folder(folder: Path, option: str, shown: Path | None = None) -> None:
    """Raise a usage error now if files cannot be created in ``folder`` later: a file (or a broken
    symbolic link) in the way of it or of a parent, no permission, or creating it or a file in it
    fails (:func:`_try_creating`).  Leaves nothing behind.  ``shown``: the path the message
    names (the option's value)."""
    probe = Path(os.path.abspath(folder))
    shown = shown or probe
    missing: list[Path] = []
    while not probe.exists():
        if probe.is_symlink():  # a dangling symlink is in the way as much as a file
            raise pytest.UsageError(f"{option} {shown}: {probe} is a broken symbolic link")
        missing.append(probe)
        probe = probe.parent
    if not probe.is_dir():
        raise pytest.UsageError(f"{option} {shown}: {probe} is a file, not a folder; nothing can be written there")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{option} {shown}: no permission to create files in {probe}")
    problem = _try_creating(list(reversed(missing)), Path(os.path.abspath(folder)))
    if problem:
        raise pytest.UsageError(f"{option} {shown}: {problem}; nothing can be written there")


def _try_creating(missing: list[Path], folder: Path) -> str | None:
    """Create ``missing`` (parents first) and a file in ``folder``, then remove all of it; what
    failed, or ``None``.  Only folders this call created are removed, and only while empty."""
    created: list[Path] = []
    try:
        for path in missing:
            try:
                path.mkdir()
            except OSError as err:
                return f"cannot create {path}: {err.strerror or err}"
            created.append(path)
        try:
            handle, name = tempfile.mkstemp(prefix=".benchaudit-probe-", dir=folder)
        except OSError as err:
            return f"cannot create a file in {folder}: {err.strerror or err}"
        os.close(handle)
        os.unlink(name)
    finally:
        for path in reversed(created):
            try:
                path.rmdir()
            except OSError:  # something else put a file there meanwhile: it stays
                pass
    return None
