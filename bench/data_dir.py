"""The benchmark data directory every bench reads, taken from ``$BENCHAUDIT_DATA``."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def require_data_dir() -> Path:
    """``$BENCHAUDIT_DATA`` as an absolute path, written back to ``os.environ``; exits with a message
    when it is unset or not a directory.

    Absolute because the benches run pytest in temporary directories: the README's
    ``BENCHAUDIT_DATA=../shared/datasets`` would resolve there, not where the user typed it."""
    value = os.environ.get("BENCHAUDIT_DATA")
    if not value:
        sys.exit("set BENCHAUDIT_DATA to the benchmark data directory")
    path = Path(value).resolve()
    if not path.is_dir():
        sys.exit(f"BENCHAUDIT_DATA={value}: not a directory")
    os.environ["BENCHAUDIT_DATA"] = str(path)
    return path
