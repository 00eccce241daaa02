"""``benchaudit fetch BENCH...``: download a benchmark's files from its public origin, sha256-verified."""

from __future__ import annotations

import argparse
import sys

from pytest_benchaudit.cli._common import Subparsers, add_suites_dir, suite_file

HELP = "download benchmark files from their public origin, sha256-verified"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("fetch", help=HELP, description=HELP)
    p.add_argument("benches", nargs="+", metavar="BENCH", help="benchmark (suite folder) names, e.g. seceval")
    p.add_argument("--data-dir", help="data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)")
    p.add_argument("--origin", metavar="URL", help="replace the suite's base_url (a mirror, or a test server)")
    p.add_argument("--force", action="store_true", help="replace existing files whose checksum differs")
    add_suites_dir(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.dataset.fetch import fetch_suite
    from pytest_benchaudit.dataset.readers import resolve_data_dir
    from pytest_benchaudit.dataset.suites import load_suite

    suites = [load_suite(suite_file(bench, args.suites_dir)) for bench in args.benches]
    root, chosen_by = resolve_data_dir(args.data_dir)
    print(f"data directory: {root} (from {chosen_by})", file=sys.stderr)
    errors: list[str] = []
    for suite in suites:
        errors += fetch_suite(suite, root, origin=args.origin, force=args.force)
    for message in errors:
        print(f"benchaudit fetch: {message}", file=sys.stderr)
    return 1 if errors else 0
