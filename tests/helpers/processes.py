"""Real pytest processes for the fault and repeat tests: started on pipes, finished with a check that no
traceback escaped, a plugin that reports (or kills) the inference process, a server that answers at a
set pace and can hold requests until the test lets them go."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from pytest_benchaudit.testing.scripted_server import Call, Reply

# Writes the inference process's pid (once the runner has one) and, with KILL_AT set, kills it
# when that many items have started: what an out-of-memory kill or a crash would do.
PID_PLUGIN = """
import os, signal
import pytest

_started = [0]

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location):
    runner = _config.pluginmanager.get_plugin("benchaudit-runner")
    engine = getattr(runner, "engine", None)
    proc = getattr(engine, "_proc", None)
    if proc is not None:
        with open("child.pid", "w") as fh:
            fh.write(str(proc.pid))
        with open("child.start", "w") as fh:  # _Forked or Popen
            fh.write(type(proc).__name__ + (" early" if getattr(engine, "forked_early", False) else ""))
    _started[0] += 1
    if proc is not None and _started[0] == int(os.environ.get("KILL_AT", "0")):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

def pytest_configure(config):
    global _config
    _config = config
"""


# Python leaves SIGINT ignored when its parent ignored it, as a non-interactive shell does for a job
# it starts in the background (`nohup .ci/run &`); a Ctrl-C test must not depend on how CI was started,
# so its pytest takes Python's usual handler back before it starts.
_INTERRUPTIBLE_PYTEST = (
    "import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.exit(pytest.console_main())"
)


def pytest_process(
    pytester: pytest.Pytester, args: list[str], interruptible: bool = False, **popen: Any
) -> subprocess.Popen[str]:
    """A real ``python -m pytest`` in the pytester directory, its output on pipes (a file limit set
    for the process does not reach a pipe, as it would reach pytester's own stdout file).  With
    ``interruptible``, SIGINT raises KeyboardInterrupt in it even where this process ignores SIGINT."""
    start = ["-c", _INTERRUPTIBLE_PYTEST] if interruptible else ["-m", "pytest"]
    return subprocess.Popen(
        [sys.executable, *start, "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def finish_process(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Its exit status and output, once it has ended; no traceback may have escaped into the output."""
    out, _ = proc.communicate(timeout=180)
    assert "Traceback" not in out and "INTERNALERROR" not in out and "Exception ignored" not in out, out[-4000:]
    return proc.returncode, out


class Paced:
    """Answers "Answer: A" after ``delay`` seconds; counts completion requests.  With ``hold_after``,
    requests after that many wait until :attr:`released` is set (so a signal lands mid-run however
    slow the machine is, not after a run that outpaced the test)."""

    def __init__(self, delay: float, hold_after: int | None = None) -> None:
        self.delay, self.asked, self.lock = delay, 0, threading.Lock()
        self.hold_after, self.released = hold_after, threading.Event()

    def __call__(self, call: Call) -> Reply:
        with self.lock:
            self.asked += 1
            held = self.hold_after is not None and self.asked > self.hold_after
        if held:
            self.released.wait(300)  # a bound against a hang only: the test releases it
        return Reply(content="Answer: A", delay=self.delay)
