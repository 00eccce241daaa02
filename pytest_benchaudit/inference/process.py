"""Inference in a process of its own: the :class:`~.engine.Engine` behind a socket.

In one process, pytest's item loop and the engine's event loop share one GIL: every request's
HTTP work (~0.5 ms of CPU in aiohttp) competes with every item's report (~0.9 ms), and a
thread that gives the GIL up for a system call waits for the other to hand it back.  On a
machine with two cores a run is then bound by one.  :class:`ProcessEngine` has the interface
the runner uses (``add_model``, ``prefetch``/``prefetch_many``, ``generate``, ``release``,
``cache_stats``, ``close``) and runs a plain :class:`~.engine.Engine` in a child process, so the
pytest process only pickles requests out and generations in (~25 µs per item).  The child is
forked on Linux when the pytest process runs one thread (it then has every import already
made; :mod:`.prestart` may have forked it while pytest started up), else started as
``python -m pytest_benchaudit.inference.child FD``.  The child's side is :mod:`.child`, the
framing both sides use :mod:`.channel`.

Contract, the same as the in-process engine's:

* identical requests to the same model are sent once; a generation is kept until each claim
  (a prefetch, or a ``generate`` of a request not queued) has been consumed or released, then
  forgotten on both sides;
* an item that waits for a request still queued moves it to the head of the child's queue;
* the generation cache lives in the child (opened there, stats read back); its warnings are
  issued on the pytest thread by the next ``generate``, as in-process;
* backends are built in the child from *picklable* recipes (module-level callables with their
  arguments, e.g. :func:`functools.partial`); environment variables a recipe needs (API keys,
  per-run keys of launched servers) travel with it, in memory, to that child only;
* the child ignores SIGINT (Ctrl-C stops pytest, which closes the child) and exits when its
  socket closes, so it never outlives the run; if it dies, ``generate`` raises
  :class:`InferenceProcessError` naming its exit status and last error line, and no record is
  made up for the questions it did not answer.

The messages (parent to child: start, add, queue, hurry, release, stats, waiting, close; child to
parent: results, warning, stats, waiting, closed) are written here and read in :mod:`.child`: a change to one is
a change to both files.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_benchaudit.inference import prestart
from pytest_benchaudit.inference.backend import BackendBug
from pytest_benchaudit.inference.cache import CacheStats
from pytest_benchaudit.inference.channel import PROTOCOL, Channel, Failed, socket_pair
from pytest_benchaudit.inference.engine import request_key, say_cache_warnings
from pytest_benchaudit.inference.prestart import Forked, fork_safe
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = ["InferenceProcessError", "ProcessEngine", "available"]


def available() -> bool:
    """Whether this platform can run the engine in a child process (a socket handed over by fd)."""
    return os.name == "posix"


class InferenceProcessError(RuntimeError):
    """The inference process died or could not be reached; the run cannot go on."""


def _start_method() -> str:
    """``"fork"`` where that is safe (:func:`.prestart.fork_safe`: a fork copies the imports already
    made, so the child answers ~0.6 s sooner than a fresh interpreter), else ``"spawn"``."""
    return "fork" if fork_safe() else "spawn"


class ProcessEngine:
    """The engine's interface, with the engine itself in a child process (see the module docstring)."""

    def __init__(
        self,
        window: int = 256,
        cache_dir: Path | None = None,
        cache_expiry_s: float | None = None,
        *,
        start: str | None = None,
    ) -> None:
        """``start``: ``"fork"`` or ``"spawn"``; by default fork where that is safe (see :func:`_start_method`)."""
        self.window = window
        method = start or _start_method()
        early = prestart.take() if method == "fork" else None
        self.forked_early = early is not None
        if early is not None:  # forked while pytest started up (.prestart)
            self._proc: Any
            self._proc, parent, self._log = early
        else:
            parent, child = socket_pair()
            # The child's stderr goes to a file: its last line explains a crash, and nothing it
            # prints reaches pytest's terminal or the user's captured output.
            self._log = tempfile.TemporaryFile()
            try:
                if method == "fork":
                    self._proc = Forked(child, parent, self._log)
                else:
                    self._proc = subprocess.Popen(
                        [sys.executable, "-m", "pytest_benchaudit.inference.child", str(child.fileno())],
                        pass_fds=(child.fileno(),),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=self._log,
                    )
            finally:
                child.close()
        self._conn = Channel(parent)
        self._models: set[str] = set()
        self._claims: dict[str, int] = {}  # key -> claims not yet consumed or released
        self._sent: dict[str, int] = {}  # keys asked of the child and not answered yet -> order sent
        self._queued = 0  # requests queued in the child so far (the order of the next one)
        self._answered = 0  # answers read so far
        self._results: dict[str, Generation | Failed] = {}  # answered, waiting for their claims
        self._cache_warnings: list[str] = []
        self._stats: CacheStats | None = None  # the child's cache stats, once read at close
        self._closed = False  # the child said it stopped, or is gone
        self._closing = False  # asked to stop (close_soon); its "closed" not read yet
        self._cleaned = False  # socket, log and child process released
        # As Engine.on_wait: called about every wait_tick seconds while generate() waits.
        self.on_wait: Callable[[Any], None] | None = None
        self.wait_tick = 1.0
        self._waiting: tuple[int, float] = (0, 0.0)  # the child's last answer to "waiting"
        self._send(("start", window, str(cache_dir) if cache_dir is not None else None, cache_expiry_s))

    # -- set-up -------------------------------------------------------------------------
    def add_model(
        self,
        label: str,
        factory: Callable[[], Any],
        identity: str | None = None,
        env: Mapping[str, str | None] | None = None,
    ) -> None:
        """Register how the child builds the backend of ``label``: ``factory`` must pickle (a
        module-level callable, or a :func:`functools.partial` of one); ``env`` are the
        environment variables it reads (set in the child before it is built)."""
        try:
            recipe = pickle.dumps(factory, PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise TypeError(
                f"the backend factory of {label!r} cannot be sent to the inference process "
                f"({err}); use a module-level function or a functools.partial of one"
            ) from None
        self._send(("add", label, recipe, identity, {k: v for k, v in (env or {}).items() if v is not None}))
        self._models.add(label)

    # -- called from the pytest thread ---------------------------------------------------
    def prefetch(self, model: str, request: Request) -> None:
        """Queue a request; it starts as soon as the child's window allows."""
        self.prefetch_many([(model, request)])

    def prefetch_many(self, pairs: list[tuple[str, Request]]) -> None:
        """Queue many (model, request) pairs in order, in one message to the child."""
        batch = []
        for model, request in pairs:
            self._known(model)
            key = request_key(model, request)
            self._claims[key] = self._claims.get(key, 0) + 1
            if key not in self._sent and key not in self._results:
                self._sent[key] = self._queued
                self._queued += 1
                batch.append((key, model, request, False))
        if batch:
            self._send(("queue", batch))
        self._receive(block=False)  # answers that arrived meanwhile: read, so the child's writes never stall

    def generate(self, model: str, request: Request) -> Generation:
        """Wait for (and consume) the generation of ``request``; queue it first if needed."""
        self._known(model)
        key = request_key(model, request)
        if key not in self._results:
            if key in self._sent:
                # The child starts requests in the order queued, a window at a time: one queued less
                # than a window behind the answers read is already running (no message needed).
                if self._sent[key] >= self._answered + self.window:
                    self._send(("hurry", key))
            else:  # not queued: this call is its claim, at the head of the queue
                self._claims[key] = self._claims.get(key, 0) + 1
                self._sent[key] = self._answered  # at the head: as good as running
                self._send(("queue", [(key, model, request, True)]))
            tick = time.monotonic() + self.wait_tick
            while key not in self._results:
                self._receive(block=True, timeout=self.wait_tick if self.on_wait is not None else None)
                if self.on_wait is not None and key not in self._results and time.monotonic() >= tick:
                    self.on_wait(self)
                    tick = time.monotonic() + self.wait_tick
        result = self._results[key]
        left = self._claims.get(key, 1) - 1
        if left <= 0:
            self._claims.pop(key, None)
            self._results.pop(key, None)
        else:
            self._claims[key] = left
        say_cache_warnings(self._cache_warnings)
        if isinstance(result, Failed):  # the backend's own code raised in the child: a bug, the run stops
            raise BackendBug(result.message)
        return result

    def release(self, model: str, request: Request) -> None:
        """Give up one claim; with none left, the child drops the request (if still queued)."""
        key = request_key(model, request)
        left = self._claims.get(key)
        if left is None:
            return
        if left > 1:
            self._claims[key] = left - 1
            return
        del self._claims[key]
        if self._results.pop(key, None) is None and key in self._sent:
            # No longer awaited: a later claim of the same request asks it anew (the child may
            # already have dropped it), and an answer still on its way is read and discarded.
            del self._sent[key]
            self._send(("release", key))

    def held(self) -> int:
        """Requests and generations held for claims in this process (queued, in flight, or unread)."""
        return len(self._claims)

    def waiting(self, older_than: float) -> tuple[int, float]:
        """As :meth:`.Engine.waiting`, as the child last said it (asked again now: called about once a
        second while an item waits, the answer is at most that old)."""
        if not (self._closed or self._closing):
            self._send(("waiting", older_than))
        return self._waiting

    def cache_stats(self) -> CacheStats:
        """The child's cache lookups (hits, misses, stores), as :meth:`.Engine.cache_stats` says them."""
        if not self._closed:
            if not self._closing:
                self._send(("stats",))
            try:
                while self._stats is None:  # (a child asked to close says its stats with "closed")
                    self._receive(block=True)
            except InferenceProcessError:
                if not self._closing:
                    raise
                self._stats = None  # gone while it shut down, as close() would let it be
            if not self._closed and self._stats is not None:  # a "stats" answer: a later call asks again
                stats, self._stats = self._stats, None
                return stats
        if not self._stats:
            return {"enabled": False, "hits": 0, "misses": 0}
        return self._stats.copy()

    def close_soon(self) -> None:
        """Ask the child to stop (as :meth:`close`) without waiting for it: nothing more will be
        asked, and the child shuts down while this process writes its summary.  :meth:`close`
        (and :meth:`cache_stats`) then wait for it."""
        if self._closing or self._closed:
            return
        try:
            self._send(("close",))
        except InferenceProcessError:
            self._closed = True  # already gone
            return
        self._closing = True

    def close(self) -> None:
        """Stop the child: what is still queued or in flight is cancelled, its cache closed."""
        if self._cleaned:
            return
        try:
            if not self._closed:
                if not self._closing:
                    self._send(("close",))
                    self._closing = True
                while not self._closed:
                    self._receive(block=True)
        except InferenceProcessError:
            pass  # already gone: nothing left to stop
        finally:
            self._closed = self._cleaned = True
            self._conn.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._log.close()

    # -- internals ----------------------------------------------------------------------
    def _known(self, model: str) -> None:
        if model not in self._models:
            raise KeyError(f"no backend registered for model {model!r}")

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self._conn.send(pickle.dumps(message, PROTOCOL))
        except OSError:
            raise self._died() from None

    def _receive(self, *, block: bool, timeout: float | None = None) -> None:
        """Read the child's messages: one (waiting for it, at most ``timeout`` seconds when given) if
        ``block``, then all that are there."""
        try:
            messages = self._conn.receive(block=block, timeout=timeout)
        except (EOFError, OSError):
            raise self._died() from None
        for data in messages:
            try:
                kind, payload = pickle.loads(data)
            except Exception as err:  # noqa: BLE001 - a child of another version, or a bug
                self._closed = True
                raise InferenceProcessError(
                    f"unreadable message from the inference process ({type(err).__name__}: {err})"
                ) from None
            if kind == "results":
                self._answered += len(payload)
                for key, result in payload:
                    self._sent.pop(key, None)
                    if key in self._claims:  # else released meanwhile: nobody reads it
                        self._results[key] = result
            elif kind == "warning":
                self._cache_warnings.append(payload)
            elif kind == "stats":
                self._stats = payload
            elif kind == "waiting":
                self._waiting = payload
            elif kind == "closed":
                self._stats, self._closed = payload, True
                return

    def _died(self) -> InferenceProcessError:
        try:
            status = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = None
        last = ""
        try:
            self._log.seek(0)
            lines = [ln for ln in self._log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
            last = lines[-1].strip() if lines else ""
        except (OSError, ValueError):
            pass
        self._closed = True
        how = f"exited with status {status}" if status is not None else "stopped answering"
        return InferenceProcessError(
            f"the inference process {how}"
            + (f": {last}" if last else "")
            + "; the questions it had not answered are not recorded (--resume RUN_DIR "
            "asks them)"
        )
