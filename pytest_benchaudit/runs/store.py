"""The run directory: the one reader and writer of ``run.json``, ``records.jsonl`` and ``summary.json``.

A run directory ``<report-dir>/<run-id>/`` holds:

- ``run.json``: run id, start/end time, argv (secrets removed), versions, models
  (spec, endpoint without credentials, served model id), the pipeline card of
  every task, dataset file checksums;
- ``records.jsonl``: one :class:`Record` per item, appended and flushed as items
  finish (append-only, so a crash loses at most the line being written);
- ``summary.json``: ``{"results": [...]}`` from :mod:`pytest_benchaudit.aggregate.results`.

Only the process that owns the run (the pytest controller) writes a run while it runs;
offline commands write new run directories or replace ``summary.json`` atomically.

Reading: :func:`load_run` (``run.json`` + validated records), :func:`read_run_json`,
:func:`read_summary_json` and :func:`read_records` are what every command uses
(:class:`RecordsFollower` reads a ``records.jsonl`` as the run appends to it).  Each
record line is validated against :class:`Record`: a line that is JSON but not a record
is one :class:`BadRecord` error naming ``file:line`` and the field, unless bad lines are
skipped (``skip_bad=True``, or :func:`skip_bad_records` for a whole command), in which
case the count is reported once.  Every problem is a :class:`RunDirError`, never a
traceback.  Writing: :func:`write_json_atomic` / :func:`write_text_atomic` (temp file in
the same folder + ``os.replace``), so a reader never sees half a file.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import re
import secrets as _random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson  # records.jsonl is read and re-written in bulk by rescore/sweep: ~5x faster than json
from pydantic import ValidationError

from pytest_benchaudit.common.errors import RunDirError, UsageError
from pytest_benchaudit.common.secrets import redact_obj, secret_values

from pytest_benchaudit.pipeline.record import RECORD_VERSION, Record

__all__ = ["BadRecord", "EmptyRun", "NotARunDir", "Record", "RunDirectory", "RECORD_VERSION", "check_record",
           "check_report_dir", "load_run",
           "new_run_id", "run_slug", "read_json", "read_records", "RecordsFollower", "read_run_json", "read_summary_json",
           "skip_bad_records",
           "write_json_atomic", "write_text_atomic"]

def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id(slug: str = "") -> str:
    """Sortable and unique enough for concurrent runs: UTC time plus random hex, then ``slug``
    (which benchmark and model: ``20261201T074856Z-25d115-seceval-gpt-5.4``) when given."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + _random.token_hex(3)
    return f"{stamp}-{slug}" if slug else stamp


def run_slug(benchmarks: Iterable[str], models: Iterable[str]) -> str:
    """``seceval-gpt-5.4``, ``3-benchmarks-2-models``: what a run directory's name says it holds."""
    def part(names: list[str], what: str) -> str:
        if len(names) == 1:
            return re.sub(r"[^A-Za-z0-9._-]+", "_", names[0]).strip("._-")[:40] or what
        return f"{len(names)}-{what}s" if names else ""
    return "-".join(p for p in (part(sorted(set(benchmarks)), "benchmark"), part(list(dict.fromkeys(models)), "model"))
                    if p)


class RunDirectory:
    """Writer for one run directory. Every string written is passed through redaction."""

    def __init__(self, root: Path, run_id: str | None = None) -> None:
        self.run_id = run_id or new_run_id()
        self.path = Path(root) / self.run_id
        try:
            self.path.mkdir(parents=True, exist_ok=False)
        except OSError as err:  # a file in the way, no permission, a read-only disk
            raise RunDirError(f"cannot create the run directory {self.path}: {err.strerror or err}") from None
        self.records_path = self.path / "records.jsonl"
        self._records = self.records_path.open("a", encoding="utf-8", buffering=_BUFFER)
        self._last_flush = time.monotonic()
        self.count = 0
        self.meta: dict[str, Any] = {"run_id": self.run_id, "started": _now(), "ended": None}
        # Filled by reopen(): the records already there, and what reopening had to say.
        self.previous: list[dict[str, Any]] = []
        self.warnings: list[str] = []

    @classmethod
    def reopen(cls, path: Path, on_record: Callable[[dict[str, Any]], None] | None = None) -> "RunDirectory":
        """Continue the run in ``path`` (``--resume``): same run id, records appended.

        The records already written are read into :attr:`previous`, or, with ``on_record``,
        handed to it one by one and not kept (a large run is never held in memory).  A torn last
        line (no trailing newline, not valid JSON: the run was killed mid-write) is
        dropped, the file truncated to the last complete line, and a message put in
        :attr:`warnings`.  Any other line that does not parse raises ``ValueError``
        naming the file and line.  ``run.json`` keeps its run id and start time and
        gains a ``resumed`` list of timestamps (written at once).
        """
        path = Path(path)
        records_path = path / "records.jsonl"
        if not records_path.is_file():
            raise RunDirError(f"{path}: not a run directory (no records.jsonl there)")
        self = cls.__new__(cls)
        self.path = path
        self.records_path = records_path
        self.warnings = []
        self.previous = []
        count = 0
        for record in read_records(records_path, on_torn_tail=self.warnings.append):
            count += 1
            if on_record is None:
                self.previous.append(record)
            else:
                on_record(record)
        if self.warnings:
            _truncate_to_last_line(records_path)
        elif records_path.stat().st_size:
            with records_path.open("rb+") as fh:  # a last record complete but for its newline
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
        meta: dict[str, Any] = read_run_json(path) if (path / "run.json").is_file() else {}
        self.run_id = str(meta.get("run_id") or path.name)
        meta["run_id"] = self.run_id
        meta.setdefault("started", _now())
        meta["ended"] = None
        meta["resumed"] = [*meta.get("resumed", []), _now()]
        self.meta = meta
        self.count = count
        self._records = records_path.open("a", encoding="utf-8", buffering=_BUFFER)
        self._last_flush = time.monotonic()
        self.write_json("run.json", self.meta)
        return self

    # Records reach the disk at most this long after their item finished: flushing every
    # line cost ~0.15 ms per item at hundreds of items/s; a kill loses at most this much,
    # which --resume asks again (and the generation cache usually answers).
    FLUSH_INTERVAL_S = 0.2

    def append(self, record: dict[str, Any]) -> bool:
        """Append one record; it is flushed within ``FLUSH_INTERVAL_S`` (and at ``finish``).
        True when this call flushed (what was appended so far is in the file)."""
        self._records.write(_record_line(record) + "\n")
        self.count += 1
        now = time.monotonic()
        if now - self._last_flush >= self.FLUSH_INTERVAL_S:
            self._records.flush()
            self._last_flush = now
            return True
        return False

    def flush(self) -> None:
        self._records.flush()
        self._last_flush = time.monotonic()

    def abandon(self) -> None:
        """After a failed write (disk full): close records.jsonl keeping what reached the disk (what
        still cannot be written is given up; ``--resume`` asks it again), leave run.json unfinished,
        and release the writer lock as :meth:`finish` does."""
        try:
            self._records.close()
        except OSError:
            pass
        lock = getattr(self, "lock", None)
        if lock is not None:
            lock.release()

    def append_many(self, records: Iterable[dict[str, Any]]) -> None:
        """Append many records with one flush at the end (offline re-scoring, imports)."""
        for record in records:
            self._records.write(_record_line(record) + "\n")
            self.count += 1
        self._records.flush()

    def write_json(self, name: str, data: Any) -> Path:
        """Write ``name`` atomically (temp file + rename) so readers never see half a file."""
        return write_json_atomic(self.path / name, data)

    def write_run(self, **fields: Any) -> Path:
        self.meta.update(fields)
        return self.write_json("run.json", self.meta)

    def finish(self, **fields: Any) -> Path:
        self._records.close()
        self.meta["ended"] = _now()
        self.meta["n_records"] = self.count
        return self.write_run(**fields)


def _record_line(record: dict[str, Any]) -> str:
    """``record`` as one JSON line, secrets masked: the line as ``redact_obj`` would give it, but the
    record is walked only when a known secret appears in the serialised line (or when a secret holds
    a character JSON escapes, so that the line could hide it): one substring search per secret
    instead of a copy of every string of every record."""
    line = orjson.dumps(record).decode()
    values = secret_values()
    if values and any(v in line or not _json_plain(v) for v in values):
        line = orjson.dumps(redact_obj(record)).decode()
    return line


@functools.lru_cache(maxsize=256)  # the same few secrets, asked for every record
def _json_plain(value: str) -> bool:
    """True when JSON writes ``value`` verbatim (no quote, backslash or control character)."""
    return '"' not in value and "\\" not in value and all(ord(c) >= 0x20 for c in value)


# records.jsonl's write buffer: lines reach the file at each flush (FLUSH_INTERVAL_S), not every
# 8 KiB; each write to the file releases the GIL, and getting it back from the engine's busy
# event-loop thread can take up to the interpreter's switch interval (5 ms).
_BUFFER = 1 << 20

# Set by a command's --skip-bad-records: read_records then skips lines that are not records.
_SKIP_BAD = False


def skip_bad_records(enabled: bool = True) -> None:
    """Make :func:`read_records` skip (and count) lines that are not records, for this process."""
    global _SKIP_BAD
    _SKIP_BAD = enabled


class BadRecord(RunDirError, ValueError):
    """A ``records.jsonl`` line that is not valid JSON, or JSON that is not a record."""


class NotARunDir(RunDirError, UsageError):
    """A path given as a run directory that is not one (missing, no ``run.json``): a usage error."""

    exit_code = 2

    exit_code = 2


class EmptyRun(RunDirError):
    """A run directory without a single record: nothing to re-score, compare or export."""


def check_record(obj: Any, where: str) -> dict[str, Any]:
    """``obj`` if it is a record under :class:`Record`'s schema, else :class:`BadRecord` naming the field.

    The dict is returned as it was read (no coercion, extra fields kept): validation only decides.
    """
    if not isinstance(obj, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(obj), "a number")
        raise BadRecord(f"{where}: not a record (a JSON object is expected, this is {kind})")
    try:
        Record.model_validate(obj)
    except ValidationError as err:
        problems = err.errors()
        first = problems[0]
        field = ".".join(str(p) for p in first["loc"]) or "(record)"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadRecord(f"{where}: not a record: field {field!r}: {first['msg']}{more}") from None
    return obj


def read_records(path: Path, on_torn_tail: Callable[[str], None] | None = None, *,
                 skip_bad: bool | None = None, on_skipped: Callable[[str], None] | None = None,
                 validate: bool = True) -> Iterator[dict[str, Any]]:
    """Yield the records of ``records.jsonl`` (a run directory or the file itself), validated.

    A last line without its newline that does not parse is a record torn by a killed
    run: it is skipped and reported to ``on_torn_tail``.  Any other line that is not
    JSON, or is JSON but not a record, raises :class:`BadRecord` naming ``file:line``
    and the field, unless ``skip_bad`` (default: :func:`skip_bad_records`'s setting):
    then such lines are skipped and, at the end, one message with their count and the
    first problem goes to ``on_skipped`` (else ``on_torn_tail``, else stderr).  A file
    that cannot be read is a :class:`RunDirError`.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "records.jsonl"
    skip = _SKIP_BAD if skip_bad is None else skip_bad
    fh = _open_records(path)
    skipped: list[str] = []
    with fh:
        # Line by line, never the whole file at once: a paper-scale run's records.jsonl is
        # hundreds of MiB.  Only the last line can lack its newline.
        for lineno, line in enumerate(_lines(fh, path), 1):
            try:
                record = _record_of(line, path, lineno, validate)
            except _TornTail as torn:
                if on_torn_tail:
                    on_torn_tail(str(torn))
                break
            except BadRecord as err:
                if not skip:
                    raise
                skipped.append(str(err))
                continue
            if record is not None:
                yield record
    _report_skipped(path, skipped, on_skipped or on_torn_tail)


class _TornTail(Exception):
    """The last line of records.jsonl, without its newline and not JSON: a killed run's last write."""


def _record_of(line: str, path: Path, lineno: int, validate: bool) -> dict[str, Any] | None:
    """The record on one line of ``records.jsonl`` (``None`` for a blank line); :class:`BadRecord`
    if it is not one, :class:`_TornTail` if it is a last line cut short (no newline, not JSON)."""
    if not line.strip():
        return None
    try:
        obj = orjson.loads(line)
    except json.JSONDecodeError as err:
        if not line.endswith("\n"):
            raise _TornTail(f"{path}: line {lineno} is incomplete (the run was interrupted); skipped") from None
        raise BadRecord(f"{path}:{lineno}: invalid JSON ({err.msg})") from None
    return check_record(obj, f"{path}:{lineno}") if validate else obj


def _report_skipped(path: Path, skipped: list[str], report: Callable[[str], None] | None) -> None:
    if skipped:
        say = report or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
        say(f"{path}: skipped {len(skipped)} line(s) that are not records (first: {skipped[0]})")


def _open_records(path: Path, mode: str = "r") -> Any:
    """``records.jsonl`` opened for reading; a missing or unreadable file is a :class:`RunDirError`."""
    try:
        return path.open(mode, encoding=None if "b" in mode else "utf-8")
    except FileNotFoundError:
        raise NotARunDir(f"{path}: not found (is {path.parent} a benchaudit run directory?)") from None
    except OSError as err:
        raise RunDirError(f"{path}: cannot be read: {err.strerror or err}") from None


_BLOCK_BYTES = 1 << 20  # what RecordsFollower reads at a time


class RecordsFollower:
    """``records.jsonl`` read while this process appends to it, the way :func:`read_records` reads it.

    :meth:`new` yields the records of the lines completed since the last call (at most about
    ``limit`` bytes of them); :meth:`rest`, once the writer has flushed for the last time, the
    lines left, a last one without its newline included.  Across the calls every line is read
    once and judged as :func:`read_records` judges it (``validate``, ``skip_bad``, a torn last
    line skipped and said to ``on_torn_tail``), so feeding a summary from the two gives what one
    :func:`read_records` pass at the end would.  Why: the end of a run then reads only its last
    few records, the rest having been read while the run waited for answers.

    The file is read as bytes and split at newlines (a flush can cut a line, even a character,
    in two: the piece after the last newline waits for the next call).
    """

    def __init__(self, path: Path, *, validate: bool = False, skip_bad: bool | None = None,
                 on_torn_tail: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.validate = validate
        self.skip = _SKIP_BAD if skip_bad is None else skip_bad
        self.on_torn_tail = on_torn_tail
        self._fh: Any = None
        self._pending = b""  # the start of a line whose newline has not been written yet
        self._lineno = 0
        self._skipped: list[str] = []

    def new(self, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The records of the lines completed since the last call (at most about ``limit`` bytes
        of them; ``None``: all)."""
        if self._fh is None:
            self._fh = _open_records(self.path, "rb")
        left = limit if limit else None
        while left is None or left > 0:
            # In blocks: the end of an xdist run reads all of a 161,670-record file here, and
            # one read of it whole (plus its split) held ~0.5 GB at once.
            size = _BLOCK_BYTES if left is None else min(left, _BLOCK_BYTES)
            try:
                chunk = self._fh.read(size)
            except OSError as err:
                raise RunDirError(f"{self.path}: cannot be read: {err.strerror or err}") from None
            if not chunk:
                return
            if left is not None:
                left -= len(chunk)
            data = self._pending + chunk
            end = data.rfind(b"\n") + 1
            self._pending = data[end:]
            for raw in data[:end].split(b"\n")[:-1]:
                record = self._line(raw + b"\n")
                if record is not None:
                    yield record

    def rest(self) -> Iterator[dict[str, Any]]:
        """The records left (call once the file is complete), then the file is closed."""
        yield from self.new()
        tail, self._pending = self._pending, b""
        try:
            if tail:
                record = self._line(tail)
                if record is not None:
                    yield record
        except _TornTail as torn:
            if self.on_torn_tail:
                self.on_torn_tail(str(torn))
        finally:
            self.close()
        _report_skipped(self.path, self._skipped, self.on_torn_tail)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _line(self, raw: bytes) -> dict[str, Any] | None:
        self._lineno += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise RunDirError(f"{self.path}: cannot be read: {err}") from None
        try:
            return _record_of(line, self.path, self._lineno, self.validate)
        except BadRecord as err:
            if not self.skip:
                raise
            self._skipped.append(str(err))
            return None


def _lines(fh: Any, path: Path) -> Iterator[str]:
    """The lines of an open text file; a decoding error is a :class:`RunDirError` naming the file."""
    try:
        yield from fh
    except (OSError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path}: cannot be read: {getattr(err, 'strerror', None) or err}") from None


def read_json(path: Path, what: str = "") -> dict[str, Any]:
    """A JSON object from ``path``, or a :class:`RunDirError` naming the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{path}: not found{what}") from None
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path}: cannot be read: {getattr(err, 'strerror', None) or err}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: not a JSON object")
    return data


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """``run.json`` of a run directory; its ``pipeline_cards`` and ``models`` checked for shape."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NotARunDir(f"{run_dir}: not a directory (expected a benchaudit run directory)")
    if not (run_dir / "run.json").exists():
        raise NotARunDir(f"{run_dir}: not a benchaudit run directory (no run.json there)")
    meta = read_json(run_dir / "run.json")
    cards = meta.get("pipeline_cards", {})
    if not isinstance(cards, dict) or not all(isinstance(c, dict) and isinstance(c.get("fields", {}), dict)
                                              for c in cards.values()):
        raise RunDirError(f"{run_dir / 'run.json'}: 'pipeline_cards' is not an object of pipeline cards")
    if not isinstance(meta.get("models", []), list):
        raise RunDirError(f"{run_dir / 'run.json'}: 'models' is not a list")
    return meta


def read_summary_json(run_dir: Path) -> dict[str, Any]:
    """``summary.json`` of a run directory (``benchaudit summarize`` writes one from the records)."""
    run_dir = Path(run_dir)
    summary = read_json(run_dir / "summary.json",
                        f" (the run did not finish; `benchaudit summarize {run_dir}` writes it from records.jsonl)")
    for key in ("results", "benchmarks", "gates"):
        if not isinstance(summary.get(key, []), list):
            raise RunDirError(f"{run_dir / 'summary.json'}: {key!r} is not a list")
    return summary


def load_run(run_dir: Path, warn: Callable[[str], None] | None = None, *,
             require_records: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(``run.json``, validated records) of a run directory; a torn last line is skipped with ``warn``.

    ``require_records``: a run without records is an :class:`EmptyRun` error saying why it may be empty.
    """
    run_dir = Path(run_dir)
    meta = read_run_json(run_dir)
    records = list(read_records(run_dir, on_torn_tail=warn))
    if require_records and not records:
        raise EmptyRun(f"{run_dir / 'records.jsonl'}: no records (every item was skipped or deselected, or the "
                       "run was stopped before its first item finished); nothing to work on")
    return meta, records


def check_report_dir(root: Path, option: str = "--report-dir") -> None:
    """Raise a :class:`UsageError` now if run directories cannot be created under ``root`` later:
    a file in the way of it or of a parent, or a folder without write permission.  Creates nothing."""
    root = Path(root)
    probe = root
    while not probe.exists():
        if probe.is_symlink():  # a dangling symlink is in the way as much as a file
            raise UsageError(f"{option} {root}: {probe} is a broken symbolic link; run directories cannot go there")
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UsageError(f"{option} {root}: {probe} is a file, not a folder; run directories cannot go there")
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {root}: no permission to create folders in {probe}")


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename (never half a file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise RunDirError(f"cannot write {path}: {err.strerror or err}") from None
    return path


def write_json_atomic(path: Path, data: Any) -> Path:
    """``data`` as indented JSON, secrets redacted, written atomically."""
    return write_text_atomic(path, json.dumps(redact_obj(data), indent=2, ensure_ascii=False, default=str) + "\n")


def _truncate_to_last_line(path: Path) -> None:
    """Cut ``path`` after its last newline (drops a torn final line)."""
    with Path(path).open("rb+") as fh:
        data = fh.read()
        fh.truncate(data.rfind(b"\n") + 1)
        fh.flush()
        os.fsync(fh.fileno())
