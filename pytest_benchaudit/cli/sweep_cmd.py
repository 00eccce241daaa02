"""``benchaudit sweep RUN_DIR``: single-field counterfactuals on a run's stored outputs.

Each variant's score, delta, invalid rate and the stage that moved it; downstream fields only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_benchaudit.cli._common import CliError, Subparsers, add_data_dir, add_suites_dir

HELP = "single-field counterfactuals on a run's stored outputs (downstream fields)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("sweep", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="FIELD=V1,V2,...",
        help="each value is a variant changing only FIELD (repeatable)",
    )
    p.add_argument(
        "--toward",
        metavar="LAYER",
        help="one variant per downstream field whose value in LAYER differs from the run's pipeline",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_suites_dir(p)
    add_data_dir(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.pipeline.variants import parse_vary
    from pytest_benchaudit.report.terminal import render_variant_deltas
    from pytest_benchaudit.rescore.run_dirs import sweep_run

    vary = [parse_vary(text) for text in args.vary]
    if not vary and not args.toward:
        raise CliError("nothing to vary: give --vary FIELD=V1,V2,... and/or --toward LAYER")
    rows, _results, _cards = sweep_run(
        args.run_dir, vary, toward=args.toward, suites_dir=args.suites_dir, data_dir=args.data_dir
    )
    print(json.dumps(rows, indent=2) if args.json else render_variant_deltas(rows))
    return 0
