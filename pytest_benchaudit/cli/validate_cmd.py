"""``benchaudit validate [SUITES_DIR]``: check suite configs for benchmark authors.

Every ``*/suite.toml`` under the folder is loaded as a run would load it: the schema (unknown
tables, keys and layers refused, with the nearest valid name), each layer's pipeline fields, the
templates they name, and the extraction rules and metrics they name.  Data files are not read
(a suite can be checked without its data).  Exit 0 when all are valid, 2 with one line per
invalid suite otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import CliError, Subparsers

HELP = "check suite configs (suite.toml) against their schema"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("validate", help=HELP, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suites_dir", nargs="?", type=Path, default=Path("suites"),
                   help="folder with one sub-folder per benchmark (default: suites/)")
    return p


def suite_problems(suites_dir: Path) -> tuple[list[Path], list[str]]:
    """(the suite files found, one message per invalid one)."""
    from pytest_benchaudit.common.errors import BenchauditError
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME, load_suite
    from pytest_benchaudit.scoring.names import check_suite_names

    if not suites_dir.is_dir():
        raise CliError(f"{suites_dir}: no such folder")
    paths = sorted(suites_dir.glob(f"*/{SUITE_FILENAME}"))
    if not paths:
        raise CliError(f"{suites_dir}: no */{SUITE_FILENAME} found")
    problems = []
    for path in paths:
        try:
            check_suite_names(load_suite(path))
        except BenchauditError as err:
            problems.append(str(err))
    return paths, problems


def run(args: argparse.Namespace) -> int:
    paths, problems = suite_problems(args.suites_dir)
    for message in problems:
        print(f"invalid: {message}", file=sys.stderr)
    print(f"{len(paths) - len(problems)} of {len(paths)} suite(s) valid in {args.suites_dir}")
    return 2 if problems else 0
