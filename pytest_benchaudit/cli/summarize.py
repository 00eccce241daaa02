"""``benchaudit summarize RUN_DIR``: recompute summary.json from records.jsonl and run.json.

For a run killed before it could write its summary; no model calls.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import CliError, Subparsers, run_cards

HELP = "recompute summary.json from records.jsonl (no model calls)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("summarize", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
    from pytest_benchaudit.runs.store import read_records

    run_dir: Path = args.run_dir
    try:
        records = list(read_records(run_dir, on_torn_tail=lambda msg: print(f"warning: {msg}", file=sys.stderr)))
    except (OSError, ValueError) as err:
        raise CliError(str(err)) from None
    cards = run_cards(run_dir)
    results = summarize(records, cards)
    out = summary_document(results, benchmark_scores(results, cards), [], cards)
    target = run_dir / "summary.json"
    # Written beside and renamed over: a reader never sees half a summary.
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)
    print(f"{target}: {len(results)} results from {len(records)} records")
    return 0
