"""``benchaudit ledger``: per benchmark and pipeline field, does the documentation match the released code."""

from __future__ import annotations

import argparse

from pytest_benchaudit.cli._common import Subparsers, add_suites_dir

HELP = "documented vs released pipeline, per benchmark and field"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    p = sub.add_parser("ledger", help=HELP, description=HELP)
    p.add_argument("--format", dest="fmt", choices=("table", "json", "markdown"), default="table")
    add_suites_dir(p)
    return p


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.cli._common import plugin_suite_dirs
    from pytest_benchaudit.ledger.ledger_render import render
    from pytest_benchaudit.ledger.ledger_rows import build_ledger

    print(render(build_ledger(args.suites_dir, plugin_suite_dirs()), args.fmt))
    return 0
