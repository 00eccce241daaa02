"""``benchaudit show RUN_DIR``: a run's summary tables, gate verdicts and pipeline cards."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_benchaudit.cli._common import Subparsers, run_cards

HELP = "print a run's summary and pipeline cards"

# The card fields a reader checks first; the full card is `benchaudit card RUN_DIR`.
_SHOWN_FIELDS = ("prompt.template", "prompt.format.mode", "inference.max_tokens", "inference.stop",
                 "extraction.rule", "extraction.reasoning", "scoring.metric", "scoring.denominator",
                 "scoring.invalid_credit",
                 "aggregation.method")


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("show", help=HELP, description=HELP)
    p.add_argument("run_dir", type=Path)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.report.terminal import render_summary
    from pytest_benchaudit.runs.store import load_run, read_summary_json

    cards = run_cards(args.run_dir)
    summary = read_summary_json(args.run_dir)
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
