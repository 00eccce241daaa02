"""Datasets that live only on the Hugging Face hub (RedSage-Bench).

A hub-backed task names its hub dataset and a local export file in its data
mapping::

    [tasks.skills.data]
    file = "cybersecurity_skills-test.jsonl"      # the local export, in the data directory
    hub = { repo = "RISys-Lab/Benchmarks_CyberSec_RedSageMCQ", config = "cybersecurity_skills", split = "test" }

When the export exists it is read like any JSONL file (offline, checksummed).
When it does not, the rows are downloaded once with the ``datasets`` library
(imported lazily: it is an optional extra) and written as that export.  Without
the library or without a network, collection stops with one message saying what
is missing and where to put an export, never a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_benchaudit.common.errors import DataError

__all__ = ["HubUnavailable", "export_hub_dataset"]


class HubUnavailable(DataError, RuntimeError):
    """The hub dataset could not be read; the message says why and what to do."""


def export_hub_dataset(spec: dict[str, Any], target: Path) -> int:
    """Download ``spec`` (repo, config, split) and write it to ``target`` as JSONL; return the row count."""
    repo, config, split = spec.get("repo"), spec.get("config"), spec.get("split", "test")
    where = f"{repo}" + (f" (config {config!r}, split {split!r})" if config else f" (split {split!r})")
    hint = (
        f"RedSage-style data lives only on the Hugging Face hub. Run once with network access, or put a "
        f"JSONL export of {where} at {target}"
    )
    try:
        import datasets  # noqa: PLC0415 - optional, heavy, only needed for hub-only benchmarks
    except ImportError:
        raise HubUnavailable(
            f"{where} is not in the data directory and the 'datasets' package is not "
            f"installed (pip install 'pytest-benchaudit[hub]'). {hint}."
        ) from None
    try:
        rows = datasets.load_dataset(repo, config, split=split)
    except Exception as err:  # the library raises many types for "offline"; all mean the same here
        raise HubUnavailable(f"could not load {where} from the hub: {type(err).__name__}: {err}. {hint}.") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".part")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    os.replace(tmp, target)  # never leave a half-written export behind
    return count
