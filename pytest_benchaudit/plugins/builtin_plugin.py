"""The package's own suites, data formats, rules, metrics, compare analyses and importers, registered
through the plugin hooks (:mod:`.hookspecs`) like any plugin's, under the name ``builtin``.

Each hook imports what it returns when it is called, so loading the plugins costs nothing the command
does not use (``benchaudit ledger`` never imports the compare package).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_benchaudit.plugins.hookspecs import Importer, Reader, hookimpl

if TYPE_CHECKING:
    from pytest_benchaudit.compare.analysis_registry import Analysis

__all__ = [
    "BUILTIN_IMPORTERS",
    "SourceImporter",
    "benchaudit_analyses",
    "benchaudit_importers",
    "benchaudit_metrics",
    "benchaudit_readers",
    "benchaudit_rules",
    "benchaudit_suite_dirs",
]


@hookimpl
def benchaudit_suite_dirs() -> list[Path]:
    from pytest_benchaudit.dataset.shipped import packaged_suites_dir

    shipped = packaged_suites_dir()
    return [shipped] if shipped is not None else []


@hookimpl
def benchaudit_readers() -> Mapping[str, Reader]:
    from pytest_benchaudit.dataset.formats import BUILTIN_READERS

    return BUILTIN_READERS


@hookimpl
def benchaudit_rules() -> Mapping[str, Callable[..., Any]]:
    from pytest_benchaudit.scoring.extract import BUILTIN_RULES

    return BUILTIN_RULES


@hookimpl
def benchaudit_metrics() -> Mapping[str, Callable[..., Any]]:
    from pytest_benchaudit.scoring.metrics import BUILTIN_METRICS

    return BUILTIN_METRICS


@hookimpl
def benchaudit_analyses() -> Sequence[Analysis[Any]]:
    from pytest_benchaudit.compare.builtin_analyses import BUILTIN

    return BUILTIN


@dataclass(frozen=True)
class SourceImporter:
    """A built-in importer (:data:`pytest_benchaudit.importers.SOURCES`) as an :class:`Importer`."""

    name: str
    help: str
    pattern: str  # a glob its source folder matches, for :meth:`detect`

    def detect(self, path: Path) -> bool:
        return path.is_dir() and next(path.glob(self.pattern), None) is not None

    def import_runs(
        self, source: Path, report_dir: Path, suites_dir: Path, data_dir: str | None, log: Callable[[str], object]
    ) -> Sequence[Any]:
        from pytest_benchaudit.importers import SOURCES

        return SOURCES[self.name](source, report_dir, suites_dir, data_dir, log=log)


BUILTIN_IMPORTERS = (
    SourceImporter("athenabench-runs", "AthenaBench runs-mini/ (raw responses + released scores)", "*/*.json*"),
    SourceImporter("cti-bench-responses", "CTI-Bench responses/ (extracted answers only)", "cti-*-responses.tsv"),
)


@hookimpl
def benchaudit_importers() -> Iterable[Importer]:
    # The log importers (Inspect, lm-eval, Every Eval Ever) are imported only when an importer is asked for.
    from pytest_benchaudit.importers.detect_format import LOG_IMPORTERS

    return (*BUILTIN_IMPORTERS, *LOG_IMPORTERS)
