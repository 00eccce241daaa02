"""``benchaudit rescore RUN_DIR``: re-score a run's stored outputs under other downstream fields."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers, add_data_dir, add_suites_dir

HELP = "re-score a run's stored outputs under another pipeline (no model calls)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("rescore", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--pipeline", help="apply this layer's downstream stages (extraction, scoring, aggregation)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a downstream field (an upstream one needs new generations and is refused)")
    p.add_argument("--report-dir", type=Path, help="where the new run directory goes (default: beside RUN_DIR)")
    add_suites_dir(p)
    add_data_dir(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.audit.offline import rescore_run
    from pytest_benchaudit.pipeline.stages import parse_override
    from pytest_benchaudit.report.terminal import render_summary

    overrides = [parse_override(text) for text in args.sets]
    out, results, cards = rescore_run(args.run_dir, layer=args.pipeline, overrides=overrides,
                                      report_dir=args.report_dir, suites_dir=args.suites_dir,
                                      data_dir=args.data_dir)
    print(render_summary(results, [], cards, []))
    for skip in out.meta.get("skipped", []):
        print(f"skipped {skip['records']} records: {skip['reason']}")
    print(f"run directory: {out.path}")
    return 0
