"""A content-addressed store of generations, shared by processes and runs.

``<cache_dir>/generations.sqlite`` maps a key to the JSON of a successful
:class:`~pytest_benchaudit.pipeline.types.Generation`.  The key is the sha256 of the
model's *identity* (spec label, endpoint base URL without credentials, model id
sent) and the full request (``Request.model_dump(mode="json")``: messages or
prompt, every inference parameter, provider adjustments and the ``sample``
index of a re-ask), so a stored generation answers exactly the request that
produced it.  Failed generations (``error`` set) are never stored: a later run
asks again.

SQLite in WAL mode lets xdist workers and consecutive runs read while one
writes.  Each process holds one connection (reopened after a fork); a lock
held by another writer is waited for briefly (busy timeout) and retried a few
times.  The cache is an optimisation, never a point of failure: any error that
survives the retries (a corrupt file, a read-only directory, a lock that never
clears) turns the cache off for the rest of the process with one warning, and
the run goes on asking the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired

from typing_extensions import TypedDict

from pytest_benchaudit.common.secrets import redact
from pytest_benchaudit.inference.backend import ModelSpec, strip_credentials
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = [
    "CACHE_FILENAME",
    "CACHE_VERSION",
    "CacheFileStats",
    "CacheStats",
    "CacheWarning",
    "GenerationCache",
    "UnusableCache",
    "answers_served",
    "cache_key",
    "model_identity",
    "parse_expiry",
    "with_served",
]

CACHE_FILENAME = "generations.sqlite"
CACHE_VERSION = 1  # part of every key: a change of what a key means starts afresh

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    generation TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class CacheWarning(UserWarning):
    """The generation cache could not be used; the run goes on without it."""


# Not validated: these travel between this run's processes (the inference process's channel, an
# xdist worker's workeroutput) and are summed into run.json's ``generation_cache``, never read back.
class UnusableCache(TypedDict):
    """A model whose stored answers can never hit (they name a model ``GET /models`` does not list):
    the model its answers name, what the endpoint lists, and the answers stored / lookups missed."""

    answered_by: str
    served: list[str]
    stores: int
    misses: int


class CacheStats(TypedDict):
    """One engine's generation-cache statistics (:meth:`.Engine.cache_stats`): its lookups that the
    cache answered or not; with a cache, the file, the answers stored, why it was turned off (or
    ``None``), what each model's endpoint lists at ``GET /models`` and the models it cannot answer
    (read by :func:`.context.cache_warnings`)."""

    enabled: bool
    hits: int
    misses: int
    path: NotRequired[str]
    stores: NotRequired[int]
    disabled: NotRequired[str | None]
    served: NotRequired[dict[str, list[str]]]
    unusable: NotRequired[dict[str, UnusableCache]]


class CacheFileStats(TypedDict):
    """A :class:`GenerationCache`'s own counts (:meth:`GenerationCache.stats`)."""

    hits: int
    misses: int
    stores: int
    path: str
    disabled: str | None


def model_identity(spec: ModelSpec) -> str:
    """What decides a model's answers, as a string: label, endpoint (no credentials), model id.

    The embedded local model is served on a fresh loopback port each run; its
    endpoint says nothing about the model, so it is left out (the model id names
    the weights).
    """
    endpoint = None
    if spec.kind != "local" and spec.base_url:
        endpoint = strip_credentials(spec.base_url).rstrip("/")
    return json.dumps(
        {"spec": spec.label, "endpoint": endpoint, "model_id": spec.model_id}, sort_keys=True, separators=(",", ":")
    )


def with_served(identity: str, served: list[str]) -> str:
    """``identity`` extended with the model ids the endpoint serves (``GET /models``), so the same URL
    serving another model after a restart has other keys."""
    return json.dumps({"identity": identity, "served": sorted(served)}, sort_keys=True, separators=(",", ":"))


def answers_served(generation: Generation, served: list[str] | None) -> bool:
    """Whether a stored ``generation`` may answer for an endpoint serving ``served`` (``GET /models``):
    the model its response named is one of them (or a longer name of one), or nothing is known.

    An endpoint whose answers name a model it does not list never passes: what it stores is
    unusable (the engine says so once, :func:`~.context.cache_warnings`)."""
    answered_by = generation.served_model
    return not (served and answered_by and not any(answered_by == s or answered_by.startswith(s) for s in served))


def parse_expiry(text: str) -> float:
    """``--cache-expiry`` as seconds: a number of seconds, or a number with ``s``, ``m``, ``h``, ``d``
    or ``w`` (``12h``, ``7d``); ``ValueError`` naming the forms otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    value = text.strip().lower()
    scale = units.get(value[-1:], None)
    number = value[:-1] if scale else value
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"--cache-expiry {text!r}: expected a duration above 0 such as 3600, 30m, 12h, 7d or 2w")
    return seconds


def cache_key(identity: str, request: Request) -> str:
    """sha256 of the model identity and the full request (sample index included)."""
    payload = {"v": CACHE_VERSION, "model": identity, "request": request.model_dump(mode="json")}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_locked(err: sqlite3.Error) -> bool:
    text = str(err).lower()
    return isinstance(err, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class GenerationCache:
    """The store in ``directory``; ``get``/``put`` never raise.

    ``on_warning`` receives the one message said when the cache turns itself off
    (default: ``warnings.warn(..., CacheWarning)``).  ``hits``/``misses``/``stores``
    count lookups and writes of this process.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        busy_timeout: float = 0.5,
        retries: int = 6,
        on_warning: Callable[[str], None] | None = None,
        expiry_s: float | None = None,
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.expiry_s = expiry_s  # entries older than this are not answered from (and are re-written)
        self.expired = 0
        self.path = self.directory / CACHE_FILENAME
        self.busy_timeout = busy_timeout
        self.retries = retries
        self.on_warning = on_warning
        self.disabled: str | None = None  # why the cache is off, once it is
        self.hits = 0
        self.misses = 0
        self.stores = 0
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._lock = threading.Lock()

    # -- public ----------------------------------------------------------------
    def get(
        self,
        identity: str,
        request: Request,
        served: list[str] | None = None,
        on_unusable: Callable[[str], None] | None = None,
    ) -> Generation | None:
        """The stored generation of ``request`` to the model ``identity``, or ``None``.

        Not answered: an entry older than ``expiry_s``, and one whose response named a model
        (the response's ``model``) that is not among ``served`` (what the endpoint serves now);
        ``on_unusable`` is told that model's name (the caller says why nothing hits).
        """
        if self.disabled:
            return None
        key = cache_key(identity, request)
        row = self._run(
            "read",
            lambda conn: conn.execute("SELECT generation, created FROM generations WHERE key = ?", (key,)).fetchone(),
        )
        if row is None or row is _FAILED:
            self.misses += 1
            return None
        if self.expiry_s is not None and time.time() - float(row[1]) > self.expiry_s:
            self.expired += 1
            self.misses += 1
            return None
        try:
            generation = Generation.model_validate_json(row[0])
        except ValueError:  # a row written by another version: treat as absent
            self.misses += 1
            return None
        if not answers_served(generation, served):
            self.misses += 1  # stored from another model than the one served now
            if on_unusable is not None and generation.served_model:
                on_unusable(generation.served_model)
            return None
        self.hits += 1
        return generation

    def put(self, identity: str, request: Request, generation: Generation) -> bool:
        """Store a successful generation (one with ``error`` is ignored). True if stored."""
        if self.disabled or generation.error is not None:
            return False
        key = cache_key(identity, request)
        value = generation.model_dump_json()

        def write(conn: sqlite3.Connection) -> bool:
            with conn:  # one transaction, committed (or rolled back) here
                # REPLACE: an expired entry is refreshed by the new answer.
                conn.execute(
                    "INSERT OR REPLACE INTO generations (key, model, generation, created) VALUES (?, ?, ?, ?)",
                    (key, redact(identity), value, time.time()),
                )  # the key is a hash; this column is text
            return True

        stored = self._run("write", write)
        if stored is True:
            self.stores += 1
            return True
        return False

    def __len__(self) -> int:
        row = self._run("count", lambda conn: conn.execute("SELECT COUNT(*) FROM generations").fetchone())
        return 0 if row is None or row is _FAILED else int(row[0])

    def stats(self) -> CacheFileStats:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "stores": self.stores,
            "path": str(self.path),
            "disabled": self.disabled,
        }

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                try:
                    conn.close()
                except sqlite3.Error:
                    pass

    # -- internals ----------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        # A connection inherited through fork must not be used by the child: open its own.
        self._conn = None
        self.directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if not mode or str(mode[0]).lower() != "wal":
                raise sqlite3.OperationalError(f"could not switch to WAL mode (journal_mode is {mode and mode[0]})")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable across process crashes
            conn.execute(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _run(self, what: str, op: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``op`` on the connection, retrying while the database is locked.

        Returns ``op``'s result, or ``_FAILED`` after turning the cache off.
        """
        delay = 0.02
        with self._lock:
            for attempt in range(self.retries + 1):
                if self.disabled:
                    return _FAILED
                try:
                    return op(self._connect())
                except sqlite3.Error as err:
                    if _is_locked(err) and attempt < self.retries:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.5)
                        continue
                    self._disable(f"{what} failed: {type(err).__name__}: {err}")
                    return _FAILED
                except OSError as err:  # cannot create the directory
                    self._disable(f"{what} failed: {err}")
                    return _FAILED
        return _FAILED

    def _disable(self, why: str) -> None:
        self.disabled = why
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        message = (
            f"generation cache {self.path} disabled for this run ({why}); generations are asked "
            f"from the model and not stored (--no-cache turns the cache off; delete the file if it is corrupt)"
        )
        if self.on_warning is not None:
            self.on_warning(message)
        else:
            warnings.warn(message, CacheWarning, stacklevel=4)


_FAILED = object()
