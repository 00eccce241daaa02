"""``benchaudit import``: published model outputs as run directories, one per model, scored with the released layer.

The options and the work live in :mod:`pytest_benchaudit.audit.importers`; this module loads it only when the command runs,
so ``benchaudit --help`` and the other commands never pay for its imports.
"""

from __future__ import annotations

import argparse

HELP = "published model outputs as run directories (one per model)"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from pytest_benchaudit.audit.importers import add_import_parser

    return add_import_parser(sub)


def run(args: argparse.Namespace) -> int:
    from pytest_benchaudit.audit.importers import run_import

    return run_import(args)
