"""``benchaudit rescore RUN_DIR``: re-score a run's stored outputs under other downstream fields.

RUN_DIR may also be a folder of run directories (an import, say): each is re-scored into
``--report-dir``, which is then required, so the re-scored runs form a folder of their own that
``benchaudit compare FOLDER NEW_FOLDER`` reads as a second set instead of mixing them into the first.
A ``--report-dir`` that is RUN_DIR or lies inside it is refused for the same reason (one usage error)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers, add_data_dir, add_suites_dir, check_out_dir

HELP = "re-score a run's stored outputs under another pipeline (no model calls)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("rescore", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path, help="a run directory, or a folder of them (then --report-dir is required)")
    p.add_argument("--pipeline", help="apply this layer's downstream stages (extraction, scoring, aggregation)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a downstream field (an upstream one needs new generations and is refused)",
    )
    p.add_argument(
        "--report-dir", type=Path, help="where the new run directories go (default for one run: beside RUN_DIR)"
    )
    add_suites_dir(p)
    add_data_dir(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.compare import expand_runs
    from pytest_benchaudit.pipeline.stages import parse_override
    from pytest_benchaudit.report.terminal import render_summary
    from pytest_benchaudit.rescore.run_dirs import RescoreError, rescore_run
    from pytest_benchaudit.runs.store import read_run_json

    overrides = [parse_override(text) for text in args.sets]
    # a folder holding no run directory is reported as the run directory it is not (one clear error)
    one = (args.run_dir / "run.json").exists() or not (
        args.run_dir.is_dir() and any((child / "run.json").is_file() for child in args.run_dir.iterdir())
    )
    run_dirs = [args.run_dir] if one else expand_runs([args.run_dir])
    if one:
        read_run_json(args.run_dir)  # what is read is judged first (a path that is not a run directory says so)
    if args.report_dir is not None:  # never into the run (or the folder of runs) it reads: a later read would mix them
        check_out_dir(args.report_dir, "--report-dir", reads=[args.run_dir])
    if not one and args.report_dir is None:
        raise RescoreError(
            f"{args.run_dir}: a folder of {len(run_dirs)} run directories; give --report-dir for "
            "the re-scored ones (beside the originals, a later compare of the folder would mix both)"
        )
    for run_dir in run_dirs:
        out, results, cards = rescore_run(
            run_dir,
            layer=args.pipeline,
            overrides=overrides,
            report_dir=args.report_dir,
            suites_dir=args.suites_dir,
            data_dir=args.data_dir,
        )
        if one:
            print(render_summary(results, [], cards, []))
        for skip in out.meta.get("skipped", []):
            print(f"{'' if one else f'{run_dir.name}: '}skipped {skip['records']} records: {skip['reason']}")
        print(f"run directory: {out.path}")
    return 0
