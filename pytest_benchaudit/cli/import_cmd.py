"""``benchaudit import SOURCE DIR``: published model outputs as run directories, one per model.

Each is scored with the suite's released layer and compared with the released scores; see
:mod:`pytest_benchaudit.importers` for the sources and what a record keeps.
"""

from __future__ import annotations

import argparse

from pytest_benchaudit.cli._common import Subparsers
from pathlib import Path

HELP = "published model outputs as run directories (one per model)"
# The sources, named here so that parsing the command does not import the importers.
SOURCE_HELP = {
    "athenabench-runs": "AthenaBench runs-mini/ (raw responses + released scores)",
    "cti-bench-responses": "CTI-Bench responses/ (extracted answers only)",
}


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "import", help="turn published model outputs into run directories (one per model), scored with the "
                       "released layer",
        description="Turn a benchmark's published model outputs into benchaudit run directories, one per model, "
                    "scored with the suite's released layer and compared with the released scores.")
    p.add_argument("source", help="; ".join(f"{name}: {text}" for name, text in SOURCE_HELP.items())
                                  + "; or a plugin's importer (benchaudit plugins lists them)")
    p.add_argument("dir", type=Path, help="the source folder, e.g. $BENCHAUDIT_DATA/athenabench/runs-mini")
    p.add_argument("--report-dir", type=Path, default=Path("reports"), help="where run directories go (default: reports/)")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="benchmark data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)")
    return p


def run(args: argparse.Namespace) -> int:
    """0 when every run directory was written; bad input raises (one line, exit 2)."""
    from pytest_benchaudit.cli._common import CliError
    from pytest_benchaudit.common.errors import did_you_mean
    from pytest_benchaudit.plugins.plugin_manager import importers

    known = importers()
    if args.source not in known:
        raise CliError(f"no importer {args.source!r}{did_you_mean(args.source, list(known))}; "
                       f"importers: {', '.join(sorted(known))}")
    runs = known[args.source].import_runs(args.dir, args.report_dir, args.suites_dir, args.data_dir, log=print)
    print(f"{len(runs)} run directories written under {args.report_dir}")
    return 0
