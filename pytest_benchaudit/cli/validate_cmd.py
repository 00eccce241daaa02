"""``benchaudit validate [SUITES_DIR]``: check suite configs for benchmark authors.

Every ``*/suite.toml`` under the folder is loaded as a run would load it: the schema (unknown
tables, keys and layers refused, with the nearest valid name), each layer's pipeline fields, the
templates they name, and the extraction rules and metrics they name.  No questions are read (a
suite can be checked without its data); each data file a suite pins in ``[fetch.files]`` that is
in the data directory (--data-dir, else $BENCHAUDIT_DATA) is checksummed, and one that differs
from its pin is a warning line (its scores would not be comparable with runs on the pinned file),
as a run says it at collection.  Exit 0 when all are valid (warnings included), 2 with one line
per invalid suite otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import CliError, Subparsers

HELP = "check suite configs (suite.toml) against their schema"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("validate", help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "suites_dir",
        nargs="?",
        type=Path,
        default=None,
        help="folder with one sub-folder per benchmark (default: suites/, and the plugins' suites)",
    )
    p.add_argument(
        "--data-dir",
        help="data directory whose files are compared with the checksums the suites pin "
        "(default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)",
    )
    return p


def suite_problems(suites_dir: Path, data_dir: str | None = None) -> tuple[list[Path], list[str], list[str]]:
    """(the suite files found, one message per invalid one, one warning per data file in the data
    directory whose checksum differs from the one its suite pins)."""
    from pytest_benchaudit.common.errors import BenchauditError
    from pytest_benchaudit.dataset.materials import pinned_file_warnings
    from pytest_benchaudit.dataset.readers import resolve_data_dir
    from pytest_benchaudit.dataset.suites import SUITE_FILENAME, load_suite
    from pytest_benchaudit.scoring.names import check_suite_names

    if not suites_dir.is_dir():
        raise CliError(f"{suites_dir}: no such folder")
    paths = sorted(suites_dir.glob(f"*/{SUITE_FILENAME}"))
    if not paths:
        raise CliError(f"{suites_dir}: no */{SUITE_FILENAME} found")
    root, origin = resolve_data_dir(data_dir)
    problems: list[str] = []
    warnings: list[str] = []
    for path in paths:
        try:
            suite = load_suite(path)
            check_suite_names(suite)
            warnings += [w["message"] for w in pinned_file_warnings(suite, root, origin)]
        except BenchauditError as err:
            problems.append(str(err))
    return paths, problems, warnings


def run(args: argparse.Namespace) -> int:
    given = args.suites_dir is not None
    if not given:  # suites/ here, else the packaged ones (as locate_suites_dir); and the plugins' suites
        from pytest_benchaudit.cli.runargs import packaged_suites_dir

        args.suites_dir = Path("suites")
        if not args.suites_dir.is_dir():
            args.suites_dir = packaged_suites_dir() or args.suites_dir
    paths, problems, warnings = suite_problems(args.suites_dir, args.data_dir)
    where = str(args.suites_dir)
    if not given:
        from pytest_benchaudit.cli._common import plugin_suite_dirs

        for folder in plugin_suite_dirs():
            more = suite_problems(folder, args.data_dir)
            paths, problems, warnings = paths + more[0], problems + more[1], warnings + more[2]
            where += f" and {folder}"
    for message in problems:
        print(f"invalid: {message}", file=sys.stderr)
    for message in warnings:
        print(f"warning: {message}", file=sys.stderr)
    print(
        f"{len(paths) - len(problems)} of {len(paths)} suite(s) valid in {where}"
        + (f"; {len(warnings)} data file(s) differ from their pinned checksum" if warnings else "")
    )
    return 2 if problems else 0
