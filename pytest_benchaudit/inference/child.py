"""The inference process's side of :mod:`.process`: the engine behind a socket.

Started as ``python -m pytest_benchaudit.inference.child FD`` (spawn) or entered through
:func:`main` in a forked copy of the pytest process (:class:`.prestart.Forked`).  It reads the
parent's messages (start, add, queue, hurry, release, stats, waiting, close) on its main thread, runs the
engine's loop on another, and writes the generations back in batches.
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from pytest_benchaudit.inference.channel import PROTOCOL, Channel, Failed
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = ["main"]


class _Server:
    """The child's side: reads the parent's messages on its main thread, runs the engine's loop on
    another, and writes generations back in batches (one write per loop iteration's answers)."""

    def __init__(self, conn: Channel) -> None:
        self.conn = conn
        self.engine: Any = None
        self.asked: dict[str, tuple[str, Request]] = {}  # key -> (model, request) until answered
        self._lock = threading.Lock()  # one writer at a time: the loop (answers) and this thread (stats)
        self.closing = False
        self._out_lock = threading.Lock()
        self._outbox: list[tuple[str, Generation | Failed]] = []  # answers not yet written

    def send(self, kind: str, payload: Any) -> None:
        data = pickle.dumps((kind, payload), PROTOCOL)
        with self._lock:
            self.conn.send(data)

    def serve(self) -> None:
        """Handle the parent's messages until it says close or goes away; then stop the engine."""
        while not self.closing:
            try:
                batch = self.conn.receive(block=True)
            except (EOFError, OSError):
                break  # the parent is gone: stop
            for data in batch:
                self._handle(pickle.loads(data))
                if self.closing:
                    break
        self._stop()

    def _handle(self, message: tuple[Any, ...]) -> None:
        from pytest_benchaudit.inference.engine import Engine

        kind = message[0]
        if kind == "start":
            _, window, cache_dir, expiry = message
            cache = None
            if cache_dir is not None:
                from pytest_benchaudit.inference.cache import GenerationCache

                cache = GenerationCache(Path(cache_dir), expiry_s=expiry)
            self.engine = Engine(window=window, cache=cache)
            if cache is not None:
                cache.on_warning = lambda text: self.send("warning", text)
        elif kind == "add":
            _, label, recipe, identity, env = message
            os.environ.update(env)
            try:
                factory = pickle.loads(recipe)
            except Exception as err:  # noqa: BLE001 - that model's requests fail with the reason
                factory = functools.partial(
                    _cannot_build,
                    f"cannot build the backend of {label!r} in the inference process ({type(err).__name__}: {err})",
                )
            self.engine.add_model(label, factory, identity=identity)
        elif kind == "queue":
            for key, model, request, front in message[1]:
                self.asked[key] = (model, request)
                future = self.engine.submit(model, request, front=front)
                future.add_done_callback(lambda f, key=key: self._answered(key, f))
        elif kind == "hurry":
            pair = self.asked.get(message[1])
            if pair is not None:
                self.engine.hurry(*pair)
        elif kind == "release":
            pair = self.asked.pop(message[1], None)
            if pair is not None:
                self.engine.release(*pair)
        elif kind == "stats":
            self.send("stats", self.engine.cache_stats() if self.engine is not None else {})
        elif kind == "waiting":  # requests sent longer than message[1] seconds ago, still unanswered
            self.send("waiting", self.engine.waiting(message[1]) if self.engine is not None else (0, 0.0))
        elif kind == "close":
            self.closing = True  # what the shutdown cancels is not an answer

    def _stop(self) -> None:
        self.closing = True  # what the shutdown cancels is not an answer
        stats = {"enabled": False, "hits": 0, "misses": 0}
        if self.engine is not None:
            self.engine.close()
            stats = self.engine.cache_stats()
        try:
            self.send("closed", stats)
        except OSError:
            pass

    def _answered(self, key: str, future: Any) -> None:
        """A generation is done (on the loop thread): queue it for the next write, drop the claim."""
        pair = self.asked.pop(key, None)
        if pair is None or self.closing:
            return  # released meanwhile, or cancelled by the shutdown
        try:
            result: Generation | Failed = future.result()
        except BaseException as err:  # noqa: BLE001 - a backend bug: the item fails with its text
            result = Failed(f"{type(err).__name__}: {err}")
        self.engine.release(*pair)
        with self._out_lock:  # an answer already done when queued arrives on the reading thread
            self._outbox.append((key, result))
            first = len(self._outbox) == 1
        if first:
            self.engine.call_soon(self._flush)

    def _flush(self) -> None:
        with self._out_lock:
            batch, self._outbox = self._outbox, []
        if batch:
            try:
                self.send("results", batch)
            except OSError:
                pass  # the parent is gone; serve() stops at its next read


def _cannot_build(reason: str) -> Any:
    raise RuntimeError(reason)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is pytest's to handle; it closes us
    conn = Channel(socket.socket(fileno=int(args[0])))
    # The HTTP client stack now, while the pytest process still collects: the first requests
    # then go out as soon as they are queued (aiohttp's import is ~0.3 s).
    import pytest_benchaudit.inference.openai_compat  # noqa: F401

    _Server(conn).serve()
    return 0


if __name__ == "__main__":
    # Run as the package module, not as __main__ (the module keeps one name in every process).
    from pytest_benchaudit.inference.child import main as _main

    sys.exit(_main())
