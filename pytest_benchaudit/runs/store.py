"""The record schema and the run directory.

A run directory ``<report-dir>/<run-id>/`` holds:

- ``run.json``: run id, start/end time, argv (secrets removed), versions, models
  (spec, endpoint without credentials, served model id), the pipeline card of
  every task, dataset file checksums;
- ``records.jsonl``: one :class:`Record` per item, appended and flushed as items
  finish (append-only, so a crash loses at most the line being written);
- ``summary.json``: ``{"results": [...]}`` from :mod:`pytest_benchaudit.aggregate.results`.

Only the process that owns the run (the pytest controller) writes here.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets as _random
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson  # records.jsonl is read and re-written in bulk by rescore/sweep: ~5x faster than json

from pytest_benchaudit.common.secrets import redact_obj

from pytest_benchaudit.pipeline.record import RECORD_VERSION, Record

__all__ = ["Record", "RunDirectory", "new_run_id", "read_records", "RECORD_VERSION"]

def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    """Sortable and unique enough for concurrent runs: UTC time plus random hex."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + _random.token_hex(3)


class RunDirectory:
    """Writer for one run directory. Every string written is passed through redaction."""

    def __init__(self, root: Path, run_id: str | None = None) -> None:
        self.run_id = run_id or new_run_id()
        self.path = Path(root) / self.run_id
        self.path.mkdir(parents=True, exist_ok=False)
        self.records_path = self.path / "records.jsonl"
        self._records = self.records_path.open("a", encoding="utf-8")
        self._last_flush = time.monotonic()
        self.count = 0
        self.meta: dict[str, Any] = {"run_id": self.run_id, "started": _now(), "ended": None}
        # Filled by reopen(): the records already there, and what reopening had to say.
        self.previous: list[dict[str, Any]] = []
        self.warnings: list[str] = []

    @classmethod
    def reopen(cls, path: Path) -> "RunDirectory":
        """Continue the run in ``path`` (``--resume``): same run id, records appended.

        The records already written are read into :attr:`previous`.  A torn last
        line (no trailing newline, not valid JSON: the run was killed mid-write) is
        dropped, the file truncated to the last complete line, and a message put in
        :attr:`warnings`.  Any other line that does not parse raises ``ValueError``
        naming the file and line.  ``run.json`` keeps its run id and start time and
        gains a ``resumed`` list of timestamps (written at once).
        """
        path = Path(path)
        records_path = path / "records.jsonl"
        if not records_path.is_file():
            raise ValueError(f"{path}: not a run directory (no records.jsonl there)")
        self = cls.__new__(cls)
        self.path = path
        self.records_path = records_path
        self.warnings = []
        self.previous = list(read_records(records_path, on_torn_tail=self.warnings.append))
        if self.warnings:
            _truncate_to_last_line(records_path)
        elif records_path.stat().st_size:
            with records_path.open("rb+") as fh:  # a last record complete but for its newline
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
        meta: dict[str, Any] = {}
        run_json = path / "run.json"
        if run_json.is_file():
            try:
                meta = json.loads(run_json.read_text(encoding="utf-8"))
            except (ValueError, OSError) as err:
                raise ValueError(f"{run_json}: not valid JSON ({err})") from None
            if not isinstance(meta, dict):
                raise ValueError(f"{run_json}: not a JSON object")
        self.run_id = str(meta.get("run_id") or path.name)
        meta["run_id"] = self.run_id
        meta.setdefault("started", _now())
        meta["ended"] = None
        meta["resumed"] = [*meta.get("resumed", []), _now()]
        self.meta = meta
        self.count = len(self.previous)
        self._records = records_path.open("a", encoding="utf-8")
        self._last_flush = time.monotonic()
        self.write_json("run.json", self.meta)
        return self

    # Records reach the disk at most this long after their item finished: flushing every
    # line cost ~0.15 ms per item at hundreds of items/s; a kill loses at most this much,
    # which --resume asks again (and the generation cache usually answers).
    FLUSH_INTERVAL_S = 0.2

    def append(self, record: dict[str, Any]) -> None:
        """Append one record; it is flushed within ``FLUSH_INTERVAL_S`` (and at ``finish``)."""
        self._records.write(orjson.dumps(redact_obj(record)).decode() + "\n")
        self.count += 1
        now = time.monotonic()
        if now - self._last_flush >= self.FLUSH_INTERVAL_S:
            self._records.flush()
            self._last_flush = now

    def flush(self) -> None:
        self._records.flush()
        self._last_flush = time.monotonic()

    def append_many(self, records: Iterable[dict[str, Any]]) -> None:
        """Append many records with one flush at the end (offline re-scoring, imports)."""
        for record in records:
            self._records.write(orjson.dumps(redact_obj(record)).decode() + "\n")
            self.count += 1
        self._records.flush()

    def write_json(self, name: str, data: Any) -> Path:
        """Write ``name`` atomically (temp file + rename) so readers never see half a file."""
        target = self.path / name
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(json.dumps(redact_obj(data), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        return target

    def write_run(self, **fields: Any) -> Path:
        self.meta.update(fields)
        return self.write_json("run.json", self.meta)

    def finish(self, **fields: Any) -> Path:
        self._records.close()
        self.meta["ended"] = _now()
        self.meta["n_records"] = self.count
        return self.write_run(**fields)


def read_records(path: Path, on_torn_tail: Callable[[str], None] | None = None) -> Iterator[dict[str, Any]]:
    """Yield records from ``records.jsonl`` (a run directory or the file itself).

    A last line without its newline that does not parse is a record torn by a
    killed run: it is skipped and reported to ``on_torn_tail``.  Any other line
    that does not parse raises ``ValueError`` naming the file and line.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "records.jsonl"
    with path.open(encoding="utf-8") as fh:
        lines = fh.readlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield orjson.loads(line)
        except json.JSONDecodeError as err:
            if lineno == len(lines) and not line.endswith("\n"):
                if on_torn_tail:
                    on_torn_tail(f"{path}: line {lineno} is incomplete (the run was interrupted); skipped")
                return
            raise ValueError(f"{path}: line {lineno}: invalid JSON ({err.msg})") from None


def _truncate_to_last_line(path: Path) -> None:
    """Cut ``path`` after its last newline (drops a torn final line)."""
    with Path(path).open("rb+") as fh:
        data = fh.read()
        fh.truncate(data.rfind(b"\n") + 1)
        fh.flush()
        os.fsync(fh.fileno())
