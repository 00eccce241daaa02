"""``benchaudit summarize RUN_DIR``: recompute summary.json from records.jsonl and run.json.

For a run killed before it could write its summary; no model calls.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers

HELP = "recompute summary.json from records.jsonl (no model calls)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("summarize", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
    from pytest_benchaudit.runs.store import load_run, write_json_atomic

    run_dir: Path = args.run_dir
    meta, records = load_run(run_dir, lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
    cards = meta.get("pipeline_cards", {})
    results = summarize(records, cards)
    out = summary_document(results, benchmark_scores(results, cards), [], cards)
    target = run_dir / "summary.json"
    write_json_atomic(target, out)  # a reader never sees half a summary
    print(f"{target}: {len(results)} results from {len(records)} records")
    return 0
