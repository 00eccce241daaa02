"""``benchaudit show RUN_DIR``: a run's summary tables, gate verdicts and pipeline cards."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers, run_cards

HELP = "print a run's summary and pipeline cards"

# The card fields a reader checks first; the full card is `benchaudit card RUN_DIR`.
_SHOWN_FIELDS = (
    "prompt.template",
    "prompt.format.mode",
    "inference.max_tokens",
    "inference.stop",
    "extraction.rule",
    "extraction.reasoning",
    "scoring.metric",
    "scoring.denominator",
    "scoring.invalid_credit",
    "aggregation.method",
    "inference.repeats",
    "aggregation.reducer",
)


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("show", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.report.terminal import render_summary
    from pytest_benchaudit.runs.membership import RunMembership
    from pytest_benchaudit.runs.run_meta import not_recorded
    from pytest_benchaudit.runs.store import load_run, read_run_json, read_summary_json, scan_records

    meta = read_run_json(args.run_dir)
    cards = run_cards(args.run_dir)
    summary = read_summary_json(args.run_dir)
    # The stored summary is shown only of records the reading commands would read: each line a record
    # of this run (not another's appended), each item once (two writers of one run count it twice).
    # Keys only, not the whole schema: show stays quick on a paper-scale run.
    n, repeated = scan_records(args.run_dir, belongs=RunMembership(meta.get("models"), meta.get("pipeline_cards")))
    if repeated:
        print(
            f"warning: {repeated} line(s) of records.jsonl repeat an item already recorded; summary.json may count "
            f"them: `benchaudit summarize {args.run_dir} --skip-bad-records` rewrites it keeping the first of each",
            file=sys.stderr,
        )
    if not summary.get("results") or not n:
        load_run(args.run_dir, require_records=True)  # an empty run: say why there is nothing to show
    print(render_summary(summary.get("results", []), summary.get("benchmarks", []), cards, []))
    for gate in summary.get("gates", []):
        print(f"  {'PASS' if gate['passed'] else 'FAIL'}  {gate['gate']}   {gate['detail']}")
    why = not_recorded(meta, "finish_reason")
    if why:  # an imported log without finish reasons: no reply is counted as truncated, which is not "0 truncated"
        print(
            f"truncation: {why} (no finish reason in its samples): a reply cut at the token budget is not told "
            "from one that ended, so none is counted as truncated"
        )
    for key, card in cards.items():
        fields = card.get("fields", {})
        print(f"\n{key}: pipeline '{card.get('pipeline')}' {card.get('hash')}")
        for name in _SHOWN_FIELDS:
            print(f"  {name:<24} {json.dumps(fields.get(name))}")
        for note in card.get("notes", []):
            print(f"  note: {note}")
    return 0
