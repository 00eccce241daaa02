"""``benchaudit export RUN_DIR``: a run's results in another project's format (Every Eval Ever 0.3.0).

The mapping of our fields onto the schema is described in :mod:`pytest_benchaudit.report.export`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers, check_out_dir
from pytest_benchaudit.common.errors import did_you_mean
from pytest_benchaudit.report.export import FORMATS, ExportError, export_every_eval_ever, validate_export
from pytest_benchaudit.runs.store import read_run_json

HELP = "write a run in another format (Every Eval Ever)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "export",
        help="write a run in another format (Every Eval Ever: aggregate JSON + per-sample JSONL)",
        description="Write a run directory's results in another project's format. every-eval-ever: one aggregate "
        "JSON per model x benchmark (schema 0.3.0) and, with --samples, a per-sample JSONL. Question "
        "content is withheld unless --include-questions.",
    )
    p.add_argument("run_dir", type=Path, help="a benchaudit run directory (run.json, records.jsonl, summary.json)")
    p.add_argument(
        "--format",
        dest="export_format",
        default="every-eval-ever",
        metavar="FORMAT",
        help=f"output format: {', '.join(FORMATS)} (default: every-eval-ever)",
    )
    p.add_argument("--out", type=Path, help="output folder (default: exports/<run-id>)")
    p.add_argument("--samples", action="store_true", help="also write per-sample JSONL files")
    p.add_argument(
        "--include-questions",
        action="store_true",
        help="put question text, the prompt as sent and option labels into the samples (withheld by default)",
    )
    p.add_argument(
        "--validate",
        type=Path,
        metavar="SCHEMA_DIR",
        help="check the written files against eval.schema.json / instance_level_eval.schema.json in SCHEMA_DIR",
    )
    p.add_argument(
        "--source-org", default="unknown", help="source_metadata.source_organization_name (default: unknown)"
    )
    p.add_argument(
        "--evaluator-relationship",
        default="third_party",
        choices=("first_party", "third_party", "collaborative", "other"),
        help="who ran the evaluation relative to the model's developer (default: third_party)",
    )
    p.add_argument(
        "--suites-dir",
        type=Path,
        default=Path("suites"),
        help="where suites live, to export prompt template text (default: suites/; optional)",
    )
    return p


def run(args: argparse.Namespace) -> int:
    """0 written (and valid), 1 written but invalid, 2 on bad input."""
    fmt = getattr(args, "export_format", None) or getattr(args, "format", None) or "every-eval-ever"
    try:
        if fmt not in FORMATS:
            raise ExportError(f"unknown format {fmt!r}{did_you_mean(fmt, FORMATS)}; formats: {', '.join(FORMATS)}")
        if args.validate is not None and not Path(args.validate).is_dir():
            raise ExportError(f"--validate {args.validate}: not a directory")
        run_dir = Path(args.run_dir)
        out = args.out
        if out is None:
            out = Path("exports") / run_dir.resolve().name
        read_run_json(run_dir)  # what is read is judged first: a path that is not a run directory says so
        check_out_dir(out, "--out" if args.out is not None else "the default output folder", reads=[run_dir])
        suites_dir = getattr(args, "suites_dir", None)
        paths = export_every_eval_ever(
            run_dir,
            Path(out),
            samples=args.samples,
            include_questions=args.include_questions,
            suites_dir=suites_dir if suites_dir and Path(suites_dir).is_dir() else None,
            source_organization=getattr(args, "source_org", "unknown"),
            evaluator_relationship=getattr(args, "evaluator_relationship", "third_party"),
        )
        problems = validate_export(paths, args.validate) if args.validate is not None else []
    except ExportError as err:
        print(f"benchaudit export: {err}", file=sys.stderr)
        return 2
    n_agg = sum(1 for p in paths if p.suffix == ".json")
    print(f"{n_agg} aggregate file(s) and {len(paths) - n_agg} sample file(s) written under {out}")
    if args.validate is not None:
        for message in problems[:20]:
            print(f"invalid: {message}", file=sys.stderr)
        if problems:
            print(f"benchaudit export: {len(problems)} schema violation(s)", file=sys.stderr)
            return 1
        print(f"all {len(paths)} file(s) valid against the schemas in {args.validate}")
    return 0
