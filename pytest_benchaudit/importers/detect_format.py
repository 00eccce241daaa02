"""Which importer reads a path: the importers of other harnesses' logs, each one object, and detection.

An importer is an object with ``name`` (what ``benchaudit import NAME`` calls it), ``help`` (one
line), ``detect(path) -> bool`` (is this path in my format?), ``import_logs(paths, options) ->
list[ImportedRun]`` (several logs at once) and ``import_runs(source, report_dir, suites_dir, data_dir, log)``
(one path, the shape of the released-output importers: :class:`.log_samples.LogImporter`)
(:class:`Importer`).  :data:`LOG_IMPORTERS` lists them in the order :func:`detect` tries them; a
bare ``benchaudit import PATH`` takes the first that says yes and prints which (the released-output
importers, AthenaBench's and CTI-Bench's, are detected by their folder's files).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pytest_benchaudit.importers.common import ImportedRun, ImportSourceError
from pytest_benchaudit.importers.eee_log import EVERY_EVAL_EVER
from pytest_benchaudit.importers.imported_runs import ImportOptions
from pytest_benchaudit.importers.inspect_log import INSPECT
from pytest_benchaudit.importers.lm_eval_log import LM_EVAL

__all__ = ["Importer", "LOG_IMPORTERS", "detect", "importer"]


class Importer(Protocol):
    """One format of another harness's logs (see the module docstring)."""

    name: str
    help: str

    def detect(self, path: Path) -> bool: ...

    def import_logs(self, paths: list[Path], options: ImportOptions) -> list[ImportedRun]: ...

    def import_runs(
        self, source: Path, report_dir: Path, suites_dir: Path, data_dir: str | None, log: Callable[[str], object] = ...
    ) -> list[ImportedRun]: ...


LOG_IMPORTERS: tuple[Importer, ...] = (INSPECT, LM_EVAL, EVERY_EVAL_EVER)


def importer(name: str) -> Importer:
    for imp in LOG_IMPORTERS:
        if imp.name == name:
            return imp
    raise ImportSourceError(f"no importer {name!r}; known: {', '.join(i.name for i in LOG_IMPORTERS)}")


def released_source(path: Path) -> str | None:
    """``athenabench-runs`` / ``cti-bench-responses`` when ``path`` is such a released folder, else None."""
    if path.is_dir():
        if any(path.rglob("*-scored.jsonl")):
            return "athenabench-runs"
        if any(path.glob("cti-*-responses.tsv")):
            return "cti-bench-responses"
    return None


def detect(path: Path) -> Importer | None:
    """The first log importer that reads ``path``, or None."""
    if not path.exists():
        raise ImportSourceError(f"{path}: no such file or folder")
    for imp in LOG_IMPORTERS:
        if imp.detect(path):
            return imp
    return None
