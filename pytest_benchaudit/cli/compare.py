"""``benchaudit compare``: ranks per task, tau-b between tasks, rank shifts and Spearman rho with paired-bootstrap CIs, PCA.

The options and the work live in :mod:`pytest_benchaudit.audit.compare`; this module loads it only when the command runs,
so ``benchaudit --help`` and the other commands never pay for its imports.
"""

from __future__ import annotations

import argparse

from pytest_benchaudit.cli._common import Subparsers

HELP = "ranks, tau-b, rank shifts with bootstrap CIs, PCA; compare.json and an HTML report"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    from pytest_benchaudit.audit.compare import add_compare_parser

    return add_compare_parser(sub)


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.audit.compare import run_compare

    return run_compare(args)
