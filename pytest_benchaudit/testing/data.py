"""The real benchmark data in tests: the directory ``BENCHAUDIT_DATA`` names, or a skip saying why there is none.

Benchmark data is not shipped (non-commercial licences); a test that needs it skips with the reason
rather than failing on a machine without it.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

__all__ = ["data_file", "read_tsv", "real_data_dir"]


def real_data_dir() -> Path:
    """The real benchmark data directory, or a skip saying why there is none."""
    value = os.environ.get("BENCHAUDIT_DATA")
    if not value or not Path(value).expanduser().is_dir():
        pytest.skip(
            "real benchmark data not available: set BENCHAUDIT_DATA to the datasets directory "
            "(make test does this when ../shared/datasets exists)"
        )
    return Path(value).expanduser()


def data_file(*parts: str) -> Path:
    """One real data file (e.g. ``data_file("cti-bench", "cti-mcq.tsv")``), or a skip."""
    path = real_data_dir().joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"real-data file missing: {path}")
    return path


def read_tsv(path: Path) -> list[dict[str, str]]:
    """A tab-separated file with a header row, one dict per row."""
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))
