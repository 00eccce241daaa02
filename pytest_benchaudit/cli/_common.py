"""What several ``benchaudit`` commands share: reading a run's JSON files and the ``--suites-dir`` option.

Kept free of heavy imports: every command module imports this at start-up.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.common.errors import UsageError, did_you_mean

__all__ = [
    "CliError",
    "Subparsers",
    "add_data_dir",
    "add_suites_dir",
    "check_out_dir",
    "plugin_suite_dirs",
    "records_under",
    "run_cards",
    "suite_file",
]

# What `ArgumentParser.add_subparsers()` returns; each command module adds its parser to it.
# (The class is private, but it is what argparse hands out; only typeshed makes it generic.)
if TYPE_CHECKING:
    from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction


class CliError(UsageError):
    """A problem with the command's input; printed as one line, exit status 2."""


def run_cards(run_dir: Path) -> Cards:
    """The pipeline cards recorded in a run's ``run.json``, keyed ``benchmark.task[|variant]``."""
    from pytest_benchaudit.runs.store import read_run_json

    cards = read_run_json(run_dir).get("pipeline_cards", {})
    if not isinstance(cards, dict):
        raise CliError(f"{run_dir / 'run.json'}: pipeline_cards is not an object")
    return cards


def records_under(records: list[RecordRow], pipeline: str, option: str = "--pipeline") -> list[RecordRow]:
    """The records scored under ``pipeline``; none is one error naming ``option``, the nearest name and
    the pipelines the records hold (a misspelt layer is not an empty population)."""
    mine = [r for r in records if r.get("pipeline") == pipeline]
    if not mine:
        held = sorted({str(r.get("pipeline")) for r in records})
        raise CliError(
            f"{option} {pipeline}: no records under pipeline {pipeline!r}{did_you_mean(pipeline, held)}; "
            f"the runs hold: {', '.join(held) or 'no records'}"
        )
    return mine


def check_out_dir(path: Path, option: str, reads: Iterable[Path] = ()) -> None:
    """``option PATH``, a folder the command writes into, checked before anything is read: one usage
    error naming ``option`` when the folder cannot be made there (a file in the way, no permission),
    or when it is, or is inside, one of the run directories or folders of runs the command reads
    (``reads``): what it writes would land among what it reads, and the next command that reads
    that folder would take the new runs for old ones."""
    from pytest_benchaudit.runs.store import check_report_dir

    check_report_dir(path, option)
    out = Path(path).resolve()
    for source in reads:
        where = Path(source).resolve()
        if out == where or where in out.parents:
            raise CliError(
                f"{option} {path}: {'that is' if out == where else 'inside'} {source}, which this command "
                "reads; what it writes would be mixed with what it reads: give a folder outside it"
            )


def add_suites_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")


def add_data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="data directory, for metrics that read lookup files (default: $BENCHAUDIT_DATA)")


def suite_file(bench: str, suites_dir: Path) -> Path:
    """``suites_dir/bench/suite.toml``; a missing suite is one error listing the suites there are."""
    from pytest_benchaudit.cli.runargs import no_suite_message
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME

    path = suites_dir / bench / SUITE_FILENAME
    if not path.is_file():
        for folder in plugin_suite_dirs():  # a plugin's suite of that name (docs/plugins.md)
            if (folder / bench / SUITE_FILENAME).is_file():
                return folder / bench / SUITE_FILENAME
        known = sorted(
            {p.parent.name for d in (suites_dir, *plugin_suite_dirs()) for p in d.glob(f"*/{SUITE_FILENAME}")}
        )
        raise CliError(no_suite_message(bench, suites_dir, known))
    return path


def plugin_suite_dirs() -> list[Path]:
    """The folders of suites the installed plugins register (not the packaged ones), in load order."""
    from pytest_benchaudit.plugins.plugin_manager import BUILTIN, suite_dirs

    return [folder for plugin, folder in suite_dirs() if plugin != BUILTIN]
