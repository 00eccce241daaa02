"""``benchaudit audit-gold RUN...``: questions where most models agree on one answer against the gold label.

And ``audit-gold --confirm SAMPLE.csv``: the confirmed label-error rate among the flags people checked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.annotation.gold_audit import GoldAuditError, audit_gold, render, write_csv
from pytest_benchaudit.cli._common import Subparsers, records_under
from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.compare import CompareError, expand_runs
from pytest_benchaudit.runs.store import load_run

if TYPE_CHECKING:
    from pytest_benchaudit.pipeline.record_documents import RecordRow

HELP = "questions where most models agree on one answer against gold (for review)"


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "audit-gold",
        help="questions where several models agree on the same answer that differs from the gold "
        "(candidates for manual review)",
        description="Flag questions where at least K models give the same valid answer (case-insensitive; multi-answer "
        "MCQ as sorted letter sets), scored incorrect, that differs from the gold. Default K: a strict "
        "majority of the models that have a record for the question (invalid answers count in that "
        "total but never agree). Tasks with continuous metrics (VSP/CVSS, F1, ...) and judge-graded "
        "tasks are skipped. Prints flags per task; flags are candidates for review, not label errors.",
    )
    p.add_argument(
        "runs",
        nargs="*",
        type=Path,
        metavar="RUN",
        help="run directories, or folders of run directories (e.g. an import's --report-dir)",
    )
    p.add_argument(
        "--confirm",
        type=Path,
        metavar="CSV",
        help="instead of runs: a sample from `benchaudit sample --for gold` with the annotators' verdicts "
        "(error / ok / unclear) filled; prints the confirmed label-error rate among the checked flags "
        "with its Wilson CI (not a benchmark-wide rate)",
    )
    p.add_argument(
        "--rule",
        choices=["all", "any"],
        default="all",
        help="with --confirm: a flag is confirmed when all (default) or any of its annotators say 'error'",
    )
    p.add_argument("--json", action="store_true", help="with --confirm: print the result as JSON")
    p.add_argument(
        "--min-models",
        type=int,
        default=None,
        metavar="K",
        help="flag when at least K models agree (default: strict majority of the models with a record)",
    )
    p.add_argument("--pipeline", default=None, metavar="P", help="only records under pipeline P")
    p.add_argument("--out", type=Path, default=None, metavar="CSV", help="write the flags for manual review to CSV")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``benchaudit audit-gold``: 0 when the audit ran (flags or not), 2 on bad input."""
    if getattr(args, "confirm", None) is not None:
        return _run_confirm(args)
    if not args.runs:
        print("benchaudit audit-gold: give run directories (or --confirm CSV)", file=sys.stderr)
        return 2
    try:
        records: list[RecordRow] = []
        for path in expand_runs(args.runs):
            _meta, recs = load_run(
                path, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True
            )
            records += recs
        if getattr(args, "pipeline", None) is not None:
            records_under(records, args.pipeline)  # a pipeline the runs do not hold: one error naming the nearest
        result = audit_gold(records, min_models=args.min_models, pipeline=getattr(args, "pipeline", None))
    except (CompareError, GoldAuditError) as err:
        print(f"benchaudit audit-gold: {err}", file=sys.stderr)
        return 2
    print(render(result, args.min_models))
    if args.out:
        write_csv(result.flags, args.out)
        print(f"\n{len(result.flags)} flags for review: {args.out}")
    return 0


def _run_confirm(args: argparse.Namespace) -> int:
    """``audit-gold --confirm CSV``: the confirmed label-error rate among the flags people checked."""
    import json

    from pytest_benchaudit.annotation.sample import (
        SampleError,
        gold_confirm_report,
        read_sample,
        render_gold_confirm,
    )

    if args.runs:
        print("benchaudit audit-gold: give either runs or --confirm CSV, not both", file=sys.stderr)
        return 2
    try:
        rows, verdicts = read_sample(args.confirm, "gold")
        doc = gold_confirm_report(rows, verdicts, rule=args.rule)
    except (SampleError, BenchauditError) as err:
        print(f"benchaudit audit-gold: {err}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2) if args.json else render_gold_confirm(doc))
    return 0
