"""Options and look-ups ``benchaudit`` commands share.

``--suites-dir`` left at its default finds the suites that ship beside the package when the
current directory has no ``suites/`` (and an unknown benchmark says where it looked).

``--skip-bad-records``: lines of ``records.jsonl`` that are not records (not JSON, or JSON
that fails the record schema) or not this run's (a model, task or pipeline its run.json does not
declare: :mod:`pytest_benchaudit.runs.membership`) are skipped and counted in one warning instead
of stopping the command with an error naming ``file:line`` and why (the default).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_benchaudit.common.errors import did_you_mean

__all__ = [
    "RUN_READING_COMMANDS",
    "add_skip_bad_records",
    "locate_suites_dir",
    "no_suite_message",
    "packaged_suites_dir",
]

# Commands that read records.jsonl of one or more run directories.
RUN_READING_COMMANDS = (
    "show",
    "summarize",
    "rescore",
    "sweep",
    "compare",
    "export",
    "audit-gold",
    "plan",
    "judge-agreement",
    "diagnose",
    "sample",
    "audit",
)


def add_skip_bad_records(subparsers: Any) -> None:
    """Add ``--skip-bad-records`` to each run-reading command registered in ``subparsers``."""
    for name, parser in subparsers.choices.items():
        if name in RUN_READING_COMMANDS and isinstance(parser, argparse.ArgumentParser):
            parser.add_argument(
                "--skip-bad-records",
                action="store_true",
                help="skip lines of records.jsonl that are not records, or not this run's "
                "(counted in one warning) "
                "instead of stopping at the first with its file:line and field",
            )


def packaged_suites_dir() -> Path | None:
    """The ``suites/`` folder that ships with the package (a wheel's package data, or a source
    checkout's suites/; see :mod:`pytest_benchaudit.dataset.shipped`)."""
    from pytest_benchaudit.dataset.shipped import packaged_suites_dir as shipped

    return shipped()


def locate_suites_dir(args: argparse.Namespace) -> None:
    """``--suites-dir`` left at its default (``suites``) and no such folder here: use the suites that
    ship with the package, so ``benchaudit card seceval`` works from any directory."""
    given = getattr(args, "suites_dir", None)
    if given is None or Path(given) != Path("suites") or Path(given).is_dir():
        return
    shipped = packaged_suites_dir()
    if shipped is not None:
        args.suites_dir = shipped


def no_suite_message(bench: str, suites_dir: Path, known: list[str]) -> str:
    """What ``card`` / ``fetch`` say for an unknown benchmark: where they looked and what is there."""
    where = Path(suites_dir).resolve()
    if not where.is_dir():
        shipped = packaged_suites_dir()
        return (
            f"no suite {bench!r}: {where} is not a folder; "
            + (
                f"the suites shipped with the package are in {shipped}"
                if shipped
                else "this installation ships no suites/ folder (reinstall pytest-benchaudit)"
            )
            + "; pass --suites-dir DIR"
        )
    return f"no suite {bench!r} in {where}{did_you_mean(bench, known)}; suites: {', '.join(known) or 'none'}"
