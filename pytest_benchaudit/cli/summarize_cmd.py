"""``benchaudit summarize RUN_DIR``: recompute summary.json from records.jsonl and run.json.

For a run killed before it could write its summary; no model calls.  It writes into the run
directory, so it is one of the run's writers: a run another process is writing now is refused
(:class:`~pytest_benchaudit.runs.store.RunInProgress`, naming that process), and while summary.json
is rewritten the writer lock is held, so a ``pytest --resume`` of the run cannot start meanwhile.
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
    from pytest_benchaudit.runs.store import WriterLock, load_run, read_run_json, write_json_atomic

    run_dir: Path = args.run_dir
    read_run_json(run_dir)  # a run directory, and no other process writing it (else one error saying so)
    lock = WriterLock.acquire(run_dir)
    try:
        meta, records = load_run(run_dir, lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
        cards = meta.get("pipeline_cards", {})
        results = summarize(records, cards)
        out = summary_document(results, benchmark_scores(results, cards), [], cards)
        target = run_dir / "summary.json"
        write_json_atomic(target, out)  # a reader never sees half a summary
    finally:
        lock.release()
    print(f"{target}: {len(results)} results from {len(records)} records")
    return 0
