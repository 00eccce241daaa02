"""``benchaudit audit-gold``: questions where most models agree on one answer against the gold label, for review.

The options and the work live in :mod:`pytest_benchaudit.audit.goldaudit`; this module loads it only when the command runs,
so ``benchaudit --help`` and the other commands never pay for its imports.
"""

from __future__ import annotations

import argparse

from pytest_benchaudit.cli._common import Subparsers

HELP = "questions where most models agree on one answer against gold (for review)"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    from pytest_benchaudit.audit.goldaudit import add_audit_gold_parser

    return add_audit_gold_parser(sub)


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.audit.goldaudit import run_audit_gold

    return run_audit_gold(args)
