"""``benchaudit export``: a run's results in another project's format (Every Eval Ever 0.3.0).

The options and the work live in :mod:`pytest_benchaudit.report.export`; this module loads it only when the command runs,
so ``benchaudit --help`` and the other commands never pay for its imports.
"""

from __future__ import annotations

import argparse

HELP = "write a run in another format (Every Eval Ever)"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from pytest_benchaudit.report.export import add_export_parser

    return add_export_parser(sub)


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.report.export import run_export

    return run_export(args)
