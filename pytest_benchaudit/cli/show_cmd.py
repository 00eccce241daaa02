"""``benchaudit show RUN_DIR``: a run's summary tables, gate verdicts and pipeline cards."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers, run_cards

HELP = "print a run's summary and pipeline cards"

# The card fields a reader checks first; the full card is `benchaudit card RUN_DIR`.
_SHOWN_FIELDS = ("prompt.template", "prompt.format.mode", "inference.max_tokens", "inference.stop",
                 "extraction.rule", "extraction.reasoning", "scoring.metric", "scoring.denominator",
                 "scoring.invalid_credit",
                 "aggregation.method", "inference.repeats", "aggregation.reducer")


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("show", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.report.terminal import render_summary
    from pytest_benchaudit.runs.store import check_unique_records, load_run, read_summary_json

    cards = run_cards(args.run_dir)
    summary = read_summary_json(args.run_dir)
    # An item recorded twice (two writers of one run) is counted twice by the stored summary.
    repeated = check_unique_records(args.run_dir)  # an error naming them, or (--skip-bad-records) how many
    if repeated:
        print(f"warning: {repeated} line(s) of records.jsonl repeat an item already recorded; summary.json may count "
              f"them: `benchaudit summarize {args.run_dir} --skip-bad-records` rewrites it keeping the first of each",
              file=sys.stderr)
    if not summary.get("results"):
        load_run(args.run_dir, require_records=True)  # an empty run: say why there is nothing to show
    print(render_summary(summary.get("results", []), summary.get("benchmarks", []), cards, []))
    for gate in summary.get("gates", []):
        print(f"  {'PASS' if gate['passed'] else 'FAIL'}  {gate['gate']}   {gate['detail']}")
    for key, card in cards.items():
        fields = card.get("fields", {})
        print(f"\n{key}: pipeline '{card.get('pipeline')}' {card.get('hash')}")
        for name in _SHOWN_FIELDS:
            print(f"  {name:<24} {json.dumps(fields.get(name))}")
        for note in card.get("notes", []):
            print(f"  note: {note}")
    return 0
