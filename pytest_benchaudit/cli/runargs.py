"""Options every ``benchaudit`` command that reads run directories shares.

``--skip-bad-records``: lines of ``records.jsonl`` that are not records (not JSON, or JSON
that fails the record schema) are skipped and counted in one warning instead of stopping
the command with an error naming ``file:line`` and the field (the default).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["RUN_READING_COMMANDS", "add_skip_bad_records"]

# Commands that read records.jsonl of one or more run directories.
RUN_READING_COMMANDS = ("show", "summarize", "rescore", "sweep", "compare", "export", "audit-gold",
                        "judge-agreement")


def add_skip_bad_records(subparsers: Any) -> None:
    """Add ``--skip-bad-records`` to each run-reading command registered in ``subparsers``."""
    for name, parser in subparsers.choices.items():
        if name in RUN_READING_COMMANDS and isinstance(parser, argparse.ArgumentParser):
            parser.add_argument("--skip-bad-records", action="store_true",
                                help="skip lines of records.jsonl that are not records (counted in one warning) "
                                     "instead of stopping at the first with its file:line and field")
