"""``benchaudit judge-agreement``: agreement, Cohen's kappa, confusion table and strata of two judges.

The options and the work live in :mod:`pytest_benchaudit.audit.judgeagree`; this module loads it only when the command runs,
so ``benchaudit --help`` and the other commands never pay for its imports.
"""

from __future__ import annotations

import argparse

from pytest_benchaudit.cli._common import Subparsers

HELP = "agreement, Cohen's kappa, confusion table and strata of two judges"


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    from pytest_benchaudit.audit.judgeagree import add_judge_agreement_parser

    return add_judge_agreement_parser(sub)


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.audit.judgeagree import run_judge_agreement

    return run_judge_agreement(args)
