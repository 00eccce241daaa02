"""Forking the inference process while pytest still starts up (see :mod:`.process`).

The inference process needs ~0.5 s of imports (pydantic, the engine, aiohttp) before it can send
a request.  Forked when the runner is made (pytest's configure), it is ready only after pytest has
collected a suite; forked as soon as pytest has read its command line, those imports run on the
other core beside the rest of pytest's start-up (conftests, configure, the first suite's
collection), and the first request goes out as collection makes the first item
(:mod:`pytest_benchaudit.pytest_plugin.early`).

Forked from ``pytest_load_initial_conftests`` (the plugin's first hook after pytest has read its
command line, before conftests and collection; not at import, not on an xdist worker), before
pytest has parsed the plugin's options: :func:`start_early` decides from the arguments pytest
will parse (the command line, ``$PYTEST_ADDOPTS`` and the ini file's ``addopts``): it forks
only when they name
``--model`` and nothing that makes the process ask no model itself (``-n``/``--dist``/``--tx``:
xdist workers ask; ``--collect-only``, ``--help``, ``--no-inference-process``;
``$BENCHAUDIT_INFERENCE_PROCESS`` off), and only where a fork is safe (Linux, one thread).  The
runner adopts the child (:func:`take`) when it makes its engine; a process that never does (a
usage error, no suite collected) kills it (:func:`discard`, also at exit): it has sent nothing.
A command line this misjudges costs one idle fork (named ``--model`` but runs no suite) or the
early start (the runner forks at configure as before).

Kept free of heavy imports: the fork should happen as early in pytest's start-up as it can.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from pytest_benchaudit.inference.channel import socket_pair

__all__ = [
    "INFERENCE_PROCESS_ENV",
    "Forked",
    "discard",
    "fork_safe",
    "inference_process_setting",
    "looks_like_a_run",
    "start_early",
    "take",
]

INFERENCE_PROCESS_ENV = "BENCHAUDIT_INFERENCE_PROCESS"  # "0": the engine on a thread of the pytest process

# Options after which this process asks no model itself (xdist: its workers do), or asks none at all.
_NO_EARLY = frozenset(
    {
        "-n",
        "--numprocesses",
        "--dist",
        "-d",
        "--tx",
        "--co",
        "--collect-only",
        "--collectonly",
        "-h",
        "--help",
        "--version",
        "-V",
        "--no-inference-process",
        "--fixtures",
        "--funcargs",
        "--markers",
        "--setup-plan",
        "--setup-only",
    }
)


def inference_process_setting(environ: Mapping[str, str]) -> bool | None:
    """``$BENCHAUDIT_INFERENCE_PROCESS``: ``True`` when unset or 1/true/yes/on (a process of its own,
    the default), ``False`` for 0/false/no/off (a thread of the pytest process), ``None`` for
    anything else (the runner makes that a usage error)."""
    value = environ.get(INFERENCE_PROCESS_ENV, "").strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def fork_safe() -> bool:
    """Linux and this process runs one thread only: with other threads (an xdist worker's execnet
    I/O, a test's in-process server) a fork could copy a lock another thread holds, and macOS's
    system libraries do not support forking."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


class Forked:
    """A forked child running the inference server, with the part of :class:`subprocess.Popen`
    the engine uses."""

    def __init__(self, child: socket.socket, parent: socket.socket, log: IO[bytes]) -> None:
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            status = 1
            try:
                parent.close()
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
                os.dup2(log.fileno(), 2)
                sys.stderr = open(2, "w", closefd=False)  # pytest's capture may have replaced it
                from pytest_benchaudit.inference.child import main

                status = main([str(child.detach())])
            except BaseException:  # noqa: BLE001 - the reason goes to the log the parent reads
                import traceback

                traceback.print_exc()
            finally:
                os._exit(status)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005  # a child that said "closed" is gone within a millisecond or two
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("inference process", timeout or 0)
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def looks_like_a_run(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether the command line (``argv`` without the program, plus ``$PYTEST_ADDOPTS``) is one
    whose pytest process will ask a model itself (see the module docstring)."""
    if inference_process_setting(environ) is not True:
        return False
    try:
        tokens = [*argv, *shlex.split(environ.get("PYTEST_ADDOPTS", ""))]
    except ValueError:  # unbalanced quotes: pytest will say so
        return False
    model = False
    for token in tokens:
        name = token.split("=", 1)[0]
        if name in _NO_EARLY or (token.startswith("-n") and not token.startswith("--")):  # -n2, -nauto
            return False
        model = model or name == "--model"
    return model


_early: tuple[Forked, socket.socket, IO[bytes]] | None = None


def start_early(args: Sequence[str] | None = None) -> None:
    """Fork the inference process now if this command line will want one (see the module docstring).
    ``args``: pytest's arguments with ``$PYTEST_ADDOPTS`` and ini ``addopts`` in them (plugin.py's
    ``pytest_load_initial_conftests``); ``None``: ``sys.argv`` and ``$PYTEST_ADDOPTS``."""
    global _early
    environ: Mapping[str, str] = os.environ
    if args is None:
        argv = sys.argv[1:]
    else:  # $PYTEST_ADDOPTS is in args already
        argv, environ = list(args), {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    if _early is not None or not fork_safe() or not looks_like_a_run(argv, environ):
        return
    parent, child = socket_pair()
    log = tempfile.TemporaryFile()  # the child's stderr: its last line explains a crash
    try:
        proc = Forked(child, parent, log)
    except OSError:  # cannot fork here (a process limit): the runner starts it later, or says why
        parent.close()
        log.close()
        return
    finally:
        child.close()
    _early = (proc, parent, log)


def take() -> tuple[Forked, socket.socket, IO[bytes]] | None:
    """The child :func:`start_early` forked, handed over once (``None`` if there is none, or it died)."""
    global _early
    early, _early = _early, None
    if early is not None and early[0].poll() is not None:
        _close(early)
        return None
    return early


def discard() -> None:
    """Kill a child forked early that no engine took (it has sent nothing)."""
    early = take()
    if early is not None:
        _close(early)


def _close(early: tuple[Forked, socket.socket, IO[bytes]]) -> None:
    # Killed, not asked to stop: it has sent nothing (no engine took it) and may still be importing.
    proc, sock, log = early
    proc.kill()
    proc.wait()
    sock.close()
    log.close()


atexit.register(discard)
