"""The run directory: the one reader and writer of ``run.json``, ``records.jsonl`` and ``summary.json``.

A run directory ``<report-dir>/<run-id>/`` holds:

- ``run.json``: run id, start/end time, argv (secrets removed), versions, models
  (spec, endpoint without credentials, served model id), the pipeline card of
  every task, dataset file checksums;
- ``records.jsonl``: one :class:`Record` per item, appended and flushed as items
  finish (append-only, so a crash loses at most the line being written);
- ``summary.json``: ``{"results": [...]}`` from :mod:`pytest_benchaudit.aggregate.results`.

Only the process that owns the run (the pytest controller) writes a run while it runs, and
the store makes that so: a :class:`RunDirectory` holds an advisory lock (``fcntl.flock`` on
``.writer.lock`` in the run directory) from creation or :meth:`RunDirectory.reopen` to
:meth:`RunDirectory.finish`; a second writer (two ``--resume`` of one run at once) is refused
with :class:`RunLocked`, naming the holder (pid, host, start time, command).  The kernel drops
the lock when its process ends, killed or not, so a crashed run never stays locked.  xdist
workers never open the run directory (their records reach the controller with their reports).
Offline commands write new run directories or replace ``summary.json`` atomically (``summarize``
under the writer lock).  Readers ask the lock too: :func:`read_run_json`, which every command
calls first, refuses a run another process is writing now (:class:`RunInProgress`, naming it);
a killed writer's lock is gone with it, so its run reads as what it recorded.

Reading: :func:`load_run` (``run.json`` + validated records), :func:`read_run_json`,
:func:`read_summary_json` and :func:`read_records` are what every command uses
(:class:`RecordsFollower` reads a ``records.jsonl`` as the run appends to it).  Each
record line is validated against :class:`Record`: a line that is JSON but not a record
is one :class:`BadRecord` error naming ``file:line`` and the field, and a record that its
run.json says is not the run's (:mod:`.membership`: another model, task or pipeline) one
:class:`ForeignRecord`, unless bad lines are skipped (``skip_bad=True``, or a
:func:`skipping_bad_records` block around a whole command), in which case the count is reported
once.  Files are opened and read within bounds (:mod:`.files`: a FIFO, a device or a directory in
a file's place, NUL bytes, a line or a document too long: one :class:`RunDirError`).  A record whose (benchmark, task, question_id, model,
variant) an earlier line already holds is a :class:`DuplicateRecords` error naming the
duplicated ids (two writers wrote one run), unless bad lines are skipped: then the first of each
is kept and the others are counted in that message.  Every problem is a :class:`RunDirError`,
never a traceback.  Writing: :func:`write_json_atomic` / :func:`write_text_atomic` (temp file in
the same folder + ``os.replace``), so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import functools
import hashlib
import json
import math
import os
import re
import secrets as _random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import orjson  # records.jsonl is read and re-written in bulk by rescore/sweep: ~5x faster than json
from pydantic import TypeAdapter, ValidationError

from pytest_benchaudit.common.errors import RunDirError, UsageError
from pytest_benchaudit.common.secrets import redact, redact_obj, secret_values, strip_url_credentials_in
from pytest_benchaudit.pipeline.record import RECORD_VERSION, Record
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.runs.files import bounded_lines, open_regular, read_regular
from pytest_benchaudit.runs.membership import RunMembership

if TYPE_CHECKING:
    from pytest_benchaudit.aggregate.summary_documents import SummaryDocument
    from pytest_benchaudit.runs.run_meta import RunMeta

__all__ = [
    "BadRecord",
    "DuplicateRecords",
    "EmptyRun",
    "ForeignRecord",
    "LOCK_NAME",
    "NotARunDir",
    "Record",
    "RunDirectory",
    "RunInProgress",
    "RunLocked",
    "check_not_in_progress",
    "run_in_progress",
    "RECORD_VERSION",
    "WriterLock",
    "check_record",
    "check_report_dir",
    "check_unique_records",
    "load_run",
    "new_run_id",
    "record_key",
    "run_slug",
    "read_document",
    "read_json",
    "read_records",
    "RecordsFollower",
    "read_run_json",
    "read_summary_json",
    "scan_records",
    "skipping_bad_records",
    "write_document",
    "write_json_atomic",
    "write_text_atomic",
]

_Doc = TypeVar("_Doc")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def new_run_id(slug: str = "") -> str:
    """Sortable and unique enough for concurrent runs: UTC time plus random hex, then ``slug``
    (which benchmark and model: ``20261201T074856Z-25d115-seceval-gpt-5.4``) when given."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + _random.token_hex(3)
    return f"{stamp}-{slug}" if slug else stamp


def run_slug(benchmarks: Iterable[str], models: Iterable[str]) -> str:
    """``seceval-gpt-5.4``, ``3-benchmarks-2-models``: what a run directory's name says it holds."""

    def part(names: list[str], what: str) -> str:
        if len(names) == 1:
            return re.sub(r"[^A-Za-z0-9._-]+", "_", names[0]).strip("._-")[:40] or what
        return f"{len(names)}-{what}s" if names else ""

    return "-".join(
        p for p in (part(sorted(set(benchmarks)), "benchmark"), part(list(dict.fromkeys(models)), "model")) if p
    )


LOCK_NAME = ".writer.lock"  # in the run directory; kept after the run (unlinking it would race a waiting writer)


class RunLocked(RunDirError):
    """The run directory is being written by another process (it holds the writer lock)."""


# The writer locks this process holds, by file descriptor: a child forked while one is held
# (the inference process) closes its copy at once, so that only the writer itself holds it.
_HELD: set[int] = set()


def _close_inherited_locks() -> None:
    for fd in list(_HELD):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_locks)


class WriterLock:
    """One writer per run directory: ``fcntl.flock`` on ``<run dir>/.writer.lock``.

    :meth:`acquire` takes the lock without waiting, then writes who holds it (pid, host, start
    time, the command with its secrets removed) into the file; a process that finds it taken gets
    :class:`RunLocked` with those facts.  :meth:`release` removes the file and unlocks, so a
    finished run directory holds only its run files; a killed writer's file stays, unlocked by the
    kernel, and the next writer takes it over.  Because the file can be removed, a lock is held
    only once the locked file is still the one at the path (else the lock is taken again).  The
    lock is advisory: only run writers (:class:`RunDirectory`) take it.  Where ``fcntl`` is
    missing (Windows) no lock is taken.
    """

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> WriterLock:
        path = Path(run_dir) / LOCK_NAME
        try:
            import fcntl
        except ImportError:  # no advisory locks on this platform
            return cls(path, None)
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise RunDirError(
                    f"{run_dir}: cannot open its writer lock {path.name}: {err.strerror or err}"
                ) from None
            if not _lock_exclusive(fcntl, fd):
                holder = _read_holder(fd)
                os.close(fd)
                raise RunLocked(
                    f"another process is writing the run directory {run_dir} ({holder}); a run "
                    "directory has one writer: wait for that one to end (or stop it), then --resume"
                ) from None
            if _same_file(fd, path):
                break
            os.close(fd)  # the writer that held it removed it as we locked it: lock the new file
        _HELD.add(fd)
        holder_info = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now(), "command": _command_line()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder_info) + "\n").encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Remove the lock file, then unlock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        _HELD.discard(fd)
        try:
            import fcntl

            self.path.unlink(missing_ok=True)  # before unlocking: whoever locks it next sees it gone
            fcntl.flock(fd, fcntl.LOCK_UN)  # unlocked even where a forked child still has the file open
        except OSError:
            pass
        os.close(fd)


# A reader (:func:`run_in_progress`) holds a shared lock for the instant it takes to ask; a writer
# that meets one tries again this many times, this long apart, before it calls the run taken.
_LOCK_TRIES, _LOCK_PAUSE_S = 20, 0.005


def _lock_exclusive(fcntl: Any, fd: int) -> bool:
    """Take the writer's lock on ``fd`` without waiting on a writer; ``False`` when another holds it."""
    for attempt in range(_LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:  # held: by a writer, or for an instant by a reader asking
            if attempt + 1 < _LOCK_TRIES:
                time.sleep(_LOCK_PAUSE_S)
        except OSError:  # a file system without flock: refused as before, not waited on
            return False
    return False


class RunInProgress(RunDirError):
    """A run directory read while another process is writing it (it holds the writer lock)."""


def run_in_progress(run_dir: Path) -> str | None:
    """Who is writing ``run_dir`` now (``pid 123 on host h since T: pytest ...``), or ``None``.

    Asks the writer lock without taking it for longer than the asking: the lock file is opened
    read-only (never created) and locked shared without waiting, then unlocked.  ``None`` when
    there is no lock file (a finished run removes it; run directories from before the lock have
    none), when its lock is free (a writer that was killed or crashed: the kernel dropped its lock
    with it, so such a run is finished as far as readers are concerned: ``benchaudit summarize``
    is for it), or when this process is the writer.  Under pytest-xdist the controller is the
    one writer; workers never open the run directory.  Where ``fcntl`` is missing, ``None``.
    """
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform
        return None
    try:
        fd = os.open(Path(run_dir) / LOCK_NAME, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if any(_same_fd_file(fd, held) for held in _HELD):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # a writer holds it
            return _read_holder(fd)
        except OSError:  # a file system without flock: nothing to tell, nothing refused
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_not_in_progress(run_dir: Path) -> None:
    """Raise :class:`RunInProgress` naming the writer when another process is writing ``run_dir``."""
    holder = run_in_progress(run_dir)
    if holder is not None:
        raise RunInProgress(
            f"{run_dir}: another process is writing this run now ({holder}); its records and "
            "summary are not complete until it ends: run this again then (a run killed before its "
            f"end holds no lock; `benchaudit summarize {run_dir}` writes the summary it could not)"
        )


def _same_fd_file(a: int, b: int) -> bool:
    try:
        x, y = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino)


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path``."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _command_line() -> str:
    """This process's command line as a lock holder names it: URL credentials and known secrets removed."""
    return redact(strip_url_credentials_in(" ".join(sys.argv)))[:500]


def _read_holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it: ``pid 123 on host h since T: pytest ...``."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info.get("pid"):
        return "it has not said which yet"
    return (
        f"pid {info.get('pid')} on host {info.get('host', '?')} since {info.get('started', '?')}: "
        f"{info.get('command', '?')}"
    )


# benchmark, task, question id, model, variant, repeat (as text: the key is hashed joined).
RecordKey = tuple[str, str, str, str, str, str]


def record_key(record: Mapping[str, object]) -> RecordKey:
    """What identifies a record within a run: benchmark, task, question id, model, variant and
    ``repeat`` (``inference.repeats`` asks a question K times: repeats 0..K-1 are K items; a record
    from before the field is repeat 0)."""
    return (
        str(record.get("benchmark")),
        str(record.get("task")),
        str(record.get("question_id")),
        str(record.get("model")),
        str(record.get("variant") or ""),
        str(record.get("repeat") or 0),
    )


def _key_text(key: RecordKey) -> str:
    """``toy.mcq m03 [m]`` (``[m|variant]`` with a variant, `` repeat 2`` past the first): a record
    key as messages name it."""
    bench, task, qid, model, variant, repeat = key
    return f"{bench}.{task} {qid} [{model}{'|' + variant if variant else ''}]" + (
        f" repeat {repeat}" if repeat != "0" else ""
    )


class RunDirectory:
    """Writer for one run directory. Every string written is passed through redaction."""

    def __init__(self, root: Path, run_id: str | None = None) -> None:
        self.run_id = run_id or new_run_id()
        self.path = Path(root) / self.run_id
        try:
            self.path.mkdir(parents=True, exist_ok=False)
        except OSError as err:  # a file in the way, no permission, a read-only disk
            raise RunDirError(f"cannot create the run directory {self.path}: {err.strerror or err}") from None
        self.lock = WriterLock.acquire(self.path)
        self.records_path = self.path / "records.jsonl"
        self._records = self.records_path.open("a", encoding="utf-8", buffering=_BUFFER)
        self._start_flusher()
        self.count = 0
        self.meta: dict[str, Any] = {"run_id": self.run_id, "started": _now(), "ended": None}
        # Filled by reopen(): the records already there, and what reopening had to say.
        self.previous: list[RecordRow] = []
        self.warnings: list[str] = []

    @classmethod
    def reopen(
        cls,
        path: Path,
        on_record: Callable[[RecordRow], None] | None = None,
        prepare: Callable[[Path], None] | None = None,
    ) -> RunDirectory:
        """Continue the run in ``path`` (``--resume``): same run id, records appended.

        The writer lock is taken first (:class:`RunLocked` when another process writes the run),
        then ``prepare(path)`` runs (the controller's rewrite of records.jsonl), then the records
        are read: a record key written twice is a :class:`DuplicateRecords` error.

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
        self.lock = WriterLock.acquire(path)
        try:
            self._continue(prepare, on_record)
        except BaseException:  # refused: the run is left as it was, and unlocked
            self.lock.release()
            raise
        return self

    def _continue(self, prepare: Callable[[Path], None] | None, on_record: Callable[[RecordRow], None] | None) -> None:
        """:meth:`reopen`'s work once the lock is held: read the records, mend the tail, mark run.json."""
        path, records_path = self.path, self.records_path
        if prepare is not None:
            prepare(path)
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
        meta: dict[str, Any] = {**read_run_json(path)} if (path / "run.json").is_file() else {}
        self.run_id = str(meta.get("run_id") or path.name)
        meta["run_id"] = self.run_id
        meta.setdefault("started", _now())
        meta["ended"] = None
        meta["resumed"] = [*meta.get("resumed", []), _now()]
        self.meta = meta
        self.count = count
        self._records = records_path.open("a", encoding="utf-8", buffering=_BUFFER)
        self._start_flusher()
        self.write_json("run.json", self.meta)

    # Records reach the disk at most this long after their item finished: flushing every
    # line cost ~0.15 ms per item at hundreds of items/s; a kill loses at most this much,
    # which --resume asks again (and the generation cache usually answers).
    FLUSH_INTERVAL_S = 0.2

    # What arms the flush of a record left in the buffer (``threading.Timer``'s signature); a test
    # swaps in one it fires itself, so that no test waits on a clock.
    timer_factory: Callable[[float, Callable[[], None]], Any] = threading.Timer

    def _start_flusher(self) -> None:
        self._last_flush = time.monotonic()
        # The item loop appends; a timer thread flushes what the last append left in the buffer
        # when no further append comes (a slow answer, a long xdist wait): without it a record
        # stayed in memory until the next one, and a kill in between lost it.
        self._flush_lock = threading.Lock()
        self._timer: Any = None
        self._unflushed = False
        self._flush_error: OSError | None = None

    def append(self, record: Mapping[str, Any]) -> bool:
        """Append one record; it is flushed within ``FLUSH_INTERVAL_S`` (and at ``finish``), by
        this call or a later one, or else by a timer thread when no other append comes.
        True when this call flushed (what was appended so far is in the file).  A failed timed
        flush (disk full) raises its ``OSError`` here, at the next append."""
        line = _record_line(record) + "\n"
        with self._flush_lock:
            self._raise_flush_error()
            self._records.write(line)
            self.count += 1
            now = time.monotonic()
            if now - self._last_flush >= self.FLUSH_INTERVAL_S:
                self._records.flush()
                self._last_flush = now
                self._unflushed = False
                return True
            self._unflushed = True
            if self._timer is None:
                self._timer = self.timer_factory(self.FLUSH_INTERVAL_S, self._timed_flush)
                self._timer.daemon = True
                self._timer.start()
            return False

    def _timed_flush(self) -> None:
        """The timer's end: flush what is still in the buffer (nothing when an append did)."""
        with self._flush_lock:
            self._timer = None
            if not self._unflushed or self._records.closed:
                return
            try:
                self._records.flush()
            except OSError as err:  # raised at the next append or flush, where the run handles it
                self._flush_error = err
            self._last_flush = time.monotonic()
            self._unflushed = False

    def _raise_flush_error(self) -> None:
        if self._flush_error is not None:
            err, self._flush_error = self._flush_error, None
            raise err

    def _stop_timer(self) -> None:
        with self._flush_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def flush(self) -> None:
        with self._flush_lock:
            self._raise_flush_error()
            self._records.flush()
            self._last_flush = time.monotonic()
            self._unflushed = False

    def abandon(self) -> None:
        """After a failed write (disk full): close records.jsonl keeping what reached the disk (what
        still cannot be written is given up; ``--resume`` asks it again), leave run.json unfinished,
        and release the writer lock as :meth:`finish` does."""
        if hasattr(self, "_flush_lock"):
            self._stop_timer()
        try:
            self._records.close()
        except OSError:
            pass
        lock = getattr(self, "lock", None)
        if lock is not None:
            lock.release()

    def append_many(self, records: Iterable[Mapping[str, Any]]) -> None:
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
        """Close records.jsonl, write run.json's end, then release the writer lock."""
        try:
            self._stop_timer()
            self._records.close()
            self.meta["ended"] = _now()
            self.meta["n_records"] = self.count
            return self.write_run(**fields)
        finally:
            self.lock.release()


def _record_line(record: Mapping[str, Any]) -> str:
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

# What a reader does with lines that are not records when its caller does not say (``skip_bad=None``):
# set for the duration of one command by :func:`skipping_bad_records` (the CLI's --skip-bad-records),
# never for the process: a context variable, reset when the command returns or raises, so two
# commands run in one process (tests, a notebook) cannot leak it to each other.
_SKIP_BAD: contextvars.ContextVar[bool] = contextvars.ContextVar("benchaudit_skip_bad_records", default=False)


@contextlib.contextmanager
def skipping_bad_records(enabled: bool = True) -> Iterator[None]:
    """Within the block, readers called without ``skip_bad`` (:func:`read_records`, :func:`load_run`,
    :func:`check_unique_records`, :class:`RecordsFollower`) skip and count the lines that are not
    records (``enabled``) or stop at the first (not ``enabled``); the setting before the block comes
    back after it.  What ``benchaudit --skip-bad-records`` wraps its command in."""
    token = _SKIP_BAD.set(enabled)
    try:
        yield
    finally:
        _SKIP_BAD.reset(token)


def _skip(skip_bad: bool | None) -> bool:
    """The caller's ``skip_bad``, else the enclosing :func:`skipping_bad_records` block's setting."""
    return _SKIP_BAD.get() if skip_bad is None else skip_bad


class BadRecord(RunDirError, ValueError):
    """A ``records.jsonl`` line that is not valid JSON, or JSON that is not a record."""


class NotARunDir(RunDirError, UsageError):
    """A path given as a run directory that is not one (missing, no ``run.json``): a usage error."""

    exit_code = 2


class EmptyRun(RunDirError):
    """A run directory without a single record: nothing to re-score, compare or export."""


def check_record(obj: Any, where: str) -> RecordRow:
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
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            # A key the schema does not declare: a newer benchaudit's field, or a hand edit.
            raise BadRecord(
                f"{where}: not a record: unknown key {field!r} (not a field of {RECORD_VERSION}; "
                f"written by a newer benchaudit, or edited by hand?){more}"
            ) from None
        raise BadRecord(f"{where}: not a record: field {field!r}: {first['msg']}{more}") from None
    # Record decided it is one (no per-record TypeAdapter: Record's validation is the check).
    return cast(RecordRow, obj)


def read_records(
    path: Path,
    on_torn_tail: Callable[[str], None] | None = None,
    *,
    skip_bad: bool | None = None,
    on_skipped: Callable[[str], None] | None = None,
    validate: bool = True,
    belongs: RunMembership | None = None,
) -> Iterator[RecordRow]:
    """Yield the records of ``records.jsonl`` (a run directory or the file itself), validated.

    A last line without its newline that does not parse is a record torn by a killed
    run: it is skipped and reported to ``on_torn_tail``.  Any other line that is not
    JSON, or is JSON but not a record, raises :class:`BadRecord` naming ``file:line``
    and the field; with ``belongs`` (what the run's run.json declares, :class:`.membership.RunMembership`),
    a record of another run raises :class:`ForeignRecord` naming ``file:line`` and why;
    unless ``skip_bad`` (default: :func:`skipping_bad_records`'s setting):
    then such lines are skipped and, at the end, one message with their count and the
    first problem goes to ``on_skipped`` (else ``on_torn_tail``, else stderr).  A file
    that cannot be read is a :class:`RunDirError`.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "records.jsonl"
    skip = _skip(skip_bad)
    fh = _open_records(path)
    skipped: list[str] = []
    seen = _KeysSeen()
    with fh:
        # Line by line, never the whole file at once: a paper-scale run's records.jsonl is
        # hundreds of MiB.  Only the last line can lack its newline.
        lines = enumerate(_lines(fh, path), 1)
        for lineno, line in lines:
            try:
                record = _record_of(line, path, lineno, validate)
                why = belongs.why_not(record) if belongs is not None and record is not None else None
                if why:
                    raise ForeignRecord(f"{path}:{lineno}: not a record of this run: {why}")
            except _TornTail as torn:
                if on_torn_tail:
                    on_torn_tail(str(torn))
                break
            except BadRecord as err:
                if not skip:
                    raise
                skipped.append(str(err))
                continue
            if record is None:
                continue
            first = seen.first_line(record, lineno)
            if first is not None:
                if not skip:
                    raise _duplicates_error(path, [(record_key(record), first, lineno)], seen, lines)
                skipped.append(
                    f"{path}:{lineno}: a second record of {_key_text(record_key(record))} "
                    f"(the first, line {first}, is kept)"
                )
                continue
            yield record
    _report_skipped(path, skipped, on_skipped or on_torn_tail)


class ForeignRecord(BadRecord):
    """A record in ``records.jsonl`` that its run's ``run.json`` says is not the run's (another model,
    task or pipeline: :mod:`.membership`)."""


class DuplicateRecords(BadRecord):
    """Two lines of ``records.jsonl`` hold a record of the same item: two processes wrote one run."""


def check_unique_records(path: Path, *, skip_bad: bool | None = None) -> int:
    """Raise :class:`DuplicateRecords` if ``records.jsonl`` (or a run directory's) holds an item
    twice, naming them; with ``skip_bad`` (default: :func:`skipping_bad_records`'s setting) return
    how many lines repeat an item instead.  :func:`scan_records` without a run to belong to."""
    return scan_records(path, skip_bad=skip_bad)[1]


def scan_records(
    path: Path,
    *,
    belongs: RunMembership | None = None,
    skip_bad: bool | None = None,
    on_skipped: Callable[[str], None] | None = None,
) -> tuple[int, int]:
    """(records, lines that repeat an item) of ``records.jsonl`` (or a run directory's), read as keys:
    for commands that show a stored summary without reading the records (``benchaudit show``), so
    that a run directory they show is one the reading commands would read.

    Each line is parsed, not validated against the schema: one that is not a JSON object naming its
    item (``question_id``) is a :class:`BadRecord`, one that is not this run's (``belongs``) a
    :class:`ForeignRecord`, one that repeats an item a :class:`DuplicateRecords` error (naming them
    all); with ``skip_bad`` (default: :func:`skipping_bad_records`'s setting) they are counted in one
    message to ``on_skipped`` (else stderr) instead.  A last line without its newline that is not
    JSON is a killed run's torn write: left out, as :func:`read_records` leaves it."""
    path = Path(path)
    if path.is_dir():
        path = path / "records.jsonl"
    skip = _skip(skip_bad)
    seen = _KeysSeen()
    found: list[tuple[RecordKey, int, int]] = []
    skipped: list[str] = []
    n = 0
    with _open_records(path) as fh:
        lines: Iterator[tuple[int, bytes]] = enumerate(bounded_lines(fh, path), 1)
        for lineno, line in lines:
            if not line.strip():
                continue
            try:
                try:
                    obj = orjson.loads(line)
                except json.JSONDecodeError as err:
                    if not line.endswith(b"\n"):
                        break  # a torn last line
                    raise BadRecord(f"{path}:{lineno}: invalid JSON ({err.msg})") from None
                if not isinstance(obj, dict) or "question_id" not in obj:
                    raise BadRecord(f"{path}:{lineno}: not a record (a JSON object naming its question_id is expected)")
                why = belongs.why_not(cast(RecordRow, obj)) if belongs is not None else None
                if why:
                    raise ForeignRecord(f"{path}:{lineno}: not a record of this run: {why}")
            except BadRecord as err:
                if not skip:
                    raise
                skipped.append(str(err))
                continue
            first = seen.first_line(obj, lineno)
            if first is not None:
                found.append((record_key(obj), first, lineno))
                if not skip:
                    raise _duplicates_error(path, found, seen, lines)
                continue
            n += 1
    _report_skipped(path, skipped, on_skipped)
    return n, len(found)


class _KeysSeen:
    """The record keys read so far, as 8-byte digests (a 161,670-record run: ~10 MB, not the keys
    themselves), each with the line it was first read on."""

    def __init__(self) -> None:
        self._first: dict[bytes, int] = {}

    def first_line(self, record: Mapping[str, object], lineno: int) -> int | None:
        """``None`` the first time ``record``'s key is seen (it is noted), else the line it was seen on.
        A line without a ``question_id`` (read unvalidated: not a record) identifies no item."""
        if "question_id" not in record:
            return None
        digest = hashlib.blake2b("\x1f".join(record_key(record)).encode(), digest_size=8).digest()
        first = self._first.setdefault(digest, lineno)
        return None if first == lineno else first


_NAMED_DUPLICATES = 5  # how many duplicated items a DuplicateRecords message names


def _duplicates_error(
    path: Path, found: list[tuple[RecordKey, int, int]], seen: _KeysSeen, rest: Iterator[tuple[int, str | bytes]]
) -> DuplicateRecords:
    """The error for a file whose records repeat: the rest of the file is read (keys only) so that
    the message counts them all and names the first few, with their lines."""
    for lineno, line in rest:
        try:
            obj = orjson.loads(line)
        except json.JSONDecodeError:
            continue  # a torn tail or a bad line: the duplicates are what this error is about
        if isinstance(obj, dict):
            first = seen.first_line(obj, lineno)
            if first is not None:
                found.append((record_key(obj), first, lineno))
    named = "; ".join(f"{_key_text(key)} (lines {first} and {line})" for key, first, line in found[:_NAMED_DUPLICATES])
    more = f"; and {len(found) - _NAMED_DUPLICATES} more" if len(found) > _NAMED_DUPLICATES else ""
    return DuplicateRecords(
        f"{path}: {len(found)} record(s) repeat an item already recorded (same benchmark, task, question, model, "
        f"variant and repeat; two processes wrote this run at once?): {named}{more}.  A score over them would count those items "
        "twice; `--skip-bad-records` (benchaudit commands) keeps the first record of each"
    )


class _TornTail(Exception):
    """The last line of records.jsonl, without its newline and not JSON: a killed run's last write."""


def _record_of(line: str, path: Path, lineno: int, validate: bool) -> RecordRow | None:
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
    if validate:
        return check_record(obj, f"{path}:{lineno}")
    # Unvalidated: this process's own records (RecordsFollower at the end of a run), dumps of Record.
    return cast(RecordRow, obj)


def _report_skipped(path: Path, skipped: list[str], report: Callable[[str], None] | None) -> None:
    if skipped:
        say = report or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
        say(f"{path}: skipped {len(skipped)} line(s) that are not records of this run (first: {skipped[0]})")


def _open_records(path: Path) -> Any:
    """``records.jsonl`` opened for reading (binary); a missing or unreadable file, or something else
    in its place (a directory, a FIFO, a device: :func:`.files.open_regular`), is a :class:`RunDirError`."""
    try:
        return open_regular(path)
    except FileNotFoundError:
        if (path.parent / "run.json").exists():  # a run directory, unusable: its records are gone
            raise RunDirError(
                f"{path}: not found: the run directory has its run.json but no records.jsonl "
                "(removed, moved, or never written?)"
            ) from None
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
    line skipped and said to ``on_torn_tail``, a repeated item a :class:`DuplicateRecords` error,
    named as far as the file is written), so feeding a summary from the two gives what one
    :func:`read_records` pass at the end would.  Why: the end of a run then reads only its last
    few records, the rest having been read while the run waited for answers.

    The file is read as bytes and split at newlines (a flush can cut a line, even a character,
    in two: the piece after the last newline waits for the next call).
    """

    def __init__(
        self,
        path: Path,
        *,
        validate: bool = False,
        skip_bad: bool | None = None,
        on_torn_tail: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.validate = validate
        self.skip = _skip(skip_bad)
        self.on_torn_tail = on_torn_tail
        self._fh: Any = None
        self._pending = b""  # the start of a line whose newline has not been written yet
        self._lineno = 0
        self._skipped: list[str] = []
        self._seen = _KeysSeen()

    def new(self, limit: int | None = None) -> Iterator[RecordRow]:
        """The records of the lines completed since the last call (at most about ``limit`` bytes
        of them; ``None``: all)."""
        if self._fh is None:
            self._fh = _open_records(self.path)
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

    def rest(self) -> Iterator[RecordRow]:
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

    def _line(self, raw: bytes) -> RecordRow | None:
        self._lineno += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise RunDirError(f"{self.path}: cannot be read: {err}") from None
        try:
            record = _record_of(line, self.path, self._lineno, self.validate)
            first = self._seen.first_line(record, self._lineno) if record is not None else None
            if first is not None:  # as read_records judges it; the rest of the file is not written yet
                if self.skip:
                    self._skipped.append(
                        f"{self.path}:{self._lineno}: a second record of "
                        f"{_key_text(record_key(record or {}))} (the first, line {first}, is kept)"
                    )
                    return None
                raise _duplicates_error(
                    self.path, [(record_key(record or {}), first, self._lineno)], self._seen, iter(())
                )
            return record
        except BadRecord as err:
            if not self.skip:
                raise
            self._skipped.append(str(err))
            return None


def _lines(fh: Any, path: Path) -> Iterator[str]:
    """The lines of ``records.jsonl`` opened binary, decoded, each read within bounds
    (:func:`.files.bounded_lines`); an error reading or decoding is a :class:`RunDirError` naming the file."""
    lines = bounded_lines(fh, path)
    while True:
        try:
            raw = next(lines, None)
            if raw is None:
                return
            line = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise RunDirError(f"{path}: cannot be read: {getattr(err, 'strerror', None) or err}") from None
        yield line


class _NotJSON(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a file read as JSON."""


def _no_constant(name: str) -> Any:
    raise _NotJSON(name)


def read_json(path: Path, what: str = "") -> dict[str, Any]:
    """A JSON object from ``path``, or a :class:`RunDirError` naming the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(read_regular(path).decode("utf-8"), parse_constant=_no_constant)
    except _NotJSON as err:
        raise RunDirError(
            f"{path}: {err} is not JSON (JSON has no NaN or infinity; a writer outside benchaudit wrote it?)"
        ) from None
    except FileNotFoundError:
        raise RunDirError(f"{path}: not found{what}") from None
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path}: cannot be read: {getattr(err, 'strerror', None) or err}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: not a JSON object")
    return data


def _document_problem(err: ValidationError) -> str:
    """The first problem pydantic found in a document, naming the key (``results.3.score``)."""
    problems = err.errors()
    first = problems[0]
    key = ".".join(str(p) for p in first["loc"]) or "(the document)"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    if first["type"] == "extra_forbidden":
        return f"unknown key {key!r} (written by a newer benchaudit, or edited by hand?){more}"
    if first["type"] == "missing":
        return f"key {key!r} is missing{more}"
    return f"key {key!r}: {first['msg']}{more}"


def check_document(data: Any, adapter: TypeAdapter[_Doc], path: Path) -> _Doc:
    """``data`` (a JSON document read from or bound for ``path``) if it is what ``adapter`` declares,
    else a :class:`RunDirError` naming the file and the key.  ``data`` itself is returned, as it was
    read: validation only decides (pydantic's result would turn an int into a float and reorder
    keys, and what is read is written back and shown as it is)."""
    try:
        adapter.validate_python(data)
    except ValidationError as err:
        raise RunDirError(f"{path}: {_document_problem(err)}") from None
    return cast(_Doc, data)  # validated just now: the document is a _Doc


def read_document(path: Path, adapter: TypeAdapter[_Doc], what: str = "") -> _Doc:
    """The JSON document at ``path``, validated by ``adapter`` (a TypedDict's; ``extra="forbid"``): a
    file that is not one is a :class:`RunDirError` naming the file and the key, never a traceback.
    ``what``: added to the not-found message (as :func:`read_json` takes it)."""
    path = Path(path)
    return check_document(read_json(path, what), adapter, path)


def write_document(path: Path, adapter: TypeAdapter[_Doc], doc: _Doc) -> Path:
    """``doc`` validated by ``adapter``, then written as :func:`write_json_atomic` writes (atomically,
    secrets redacted); a document that is not what ``adapter`` declares is a :class:`RunDirError`
    naming the key, and nothing is written."""
    path = Path(path)
    try:
        adapter.validate_python(doc)
    except ValidationError as err:
        raise RunDirError(f"cannot write {path}: {_document_problem(err)}") from None
    return write_json_atomic(path, doc)


def read_run_json(run_dir: Path) -> RunMeta:
    """``run.json`` of a run directory; its ``pipeline_cards`` and ``models`` checked for shape, then
    the whole document validated (:data:`~pytest_benchaudit.runs.run_meta.RUN_META`).  A run another
    process is writing now is a :class:`RunInProgress` error (:func:`run_in_progress`): what it holds
    is not the run yet, and every command reads run.json first."""
    from pytest_benchaudit.runs.run_meta import RUN_META

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NotARunDir(f"{run_dir}: not a directory (expected a benchaudit run directory)")
    if not (run_dir / "run.json").exists():
        raise NotARunDir(f"{run_dir}: not a benchaudit run directory (no run.json there)")
    check_not_in_progress(run_dir)
    meta = read_json(run_dir / "run.json")
    cards = meta.get("pipeline_cards", {})
    if not isinstance(cards, dict) or not all(
        isinstance(c, dict) and isinstance(c.get("fields", {}), dict) for c in cards.values()
    ):
        raise RunDirError(f"{run_dir / 'run.json'}: 'pipeline_cards' is not an object of pipeline cards")
    if not isinstance(meta.get("models", []), list):
        raise RunDirError(f"{run_dir / 'run.json'}: 'models' is not a list")
    return check_document(meta, RUN_META, run_dir / "run.json")


def read_summary_json(run_dir: Path) -> SummaryDocument:
    """``summary.json`` of a run directory (``benchaudit summarize`` writes one from the records),
    validated (:data:`~pytest_benchaudit.aggregate.summary_documents.SUMMARY`)."""
    from pytest_benchaudit.aggregate.summary_documents import SUMMARY

    run_dir = Path(run_dir)
    summary = read_json(
        run_dir / "summary.json",
        f" (the run did not finish; `benchaudit summarize {run_dir}` writes it from records.jsonl)",
    )
    for key in ("results", "benchmarks", "gates"):
        if not isinstance(summary.get(key, []), list):
            raise RunDirError(f"{run_dir / 'summary.json'}: {key!r} is not a list")
    return check_document(summary, SUMMARY, run_dir / "summary.json")


def load_run(
    run_dir: Path,
    warn: Callable[[str], None] | None = None,
    *,
    require_records: bool = False,
    skip_bad: bool | None = None,
) -> tuple[RunMeta, list[RecordRow]]:
    """(``run.json``, validated records) of a run directory; a torn last line is skipped with ``warn``.
    A record that is not the run's (a model, task or pipeline run.json does not declare) is a
    :class:`ForeignRecord` error, or skipped and counted with ``skip_bad``.

    ``require_records``: a run without records is an :class:`EmptyRun` error saying why it may be empty.
    ``skip_bad``: as :func:`read_records` takes it.
    """
    run_dir = Path(run_dir)
    meta = read_run_json(run_dir)
    belongs = RunMembership(meta.get("models"), meta.get("pipeline_cards"))
    records = list(
        read_records(
            run_dir, on_torn_tail=warn, skip_bad=skip_bad, belongs=belongs if belongs.checks_anything() else None
        )
    )
    if require_records and not records:
        raise EmptyRun(
            f"{run_dir / 'records.jsonl'}: no records (every item was skipped or deselected, or the "
            "run was stopped before its first item finished); nothing to work on"
        )
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
    """``data`` as indented strict JSON, secrets redacted, written atomically.  A NaN or infinity
    (which JSON does not have: ``json`` would write ``NaN``, that other readers refuse) is a
    :class:`RunDirError` naming the file and where in ``data`` it is; nothing is written then."""
    try:
        text = json.dumps(redact_obj(data), indent=2, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        where = _non_finite_at(data) or "(a value)"
        raise RunDirError(
            f"cannot write {path}: {where} is not a finite number, and JSON has no NaN or infinity"
        ) from None
    return write_text_atomic(path, text + "\n")


def _non_finite_at(data: Any, where: str = "") -> str | None:
    """Where in ``data`` the first NaN or infinity is (``pipeline_cards.toy.mcq.fields.x = nan``)."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"{where or '(the document)'} = {data}"
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, (list, tuple)) else ()
    for key, value in items:
        found = _non_finite_at(value, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


def _truncate_to_last_line(path: Path) -> None:
    """Cut ``path`` after its last newline (drops a torn final line)."""
    with Path(path).open("rb+") as fh:
        data = fh.read()
        fh.truncate(data.rfind(b"\n") + 1)
        fh.flush()
        os.fsync(fh.fileno())
