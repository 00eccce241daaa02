"""Launcher for ``--model vllm:HF_ID``: one ``vllm serve`` process per run on 127.0.0.1.

The process that owns the run (a serial pytest process, or the xdist controller
in ``pytest_configure_node``, before any worker starts) runs::

    vllm serve HF_ID --host 127.0.0.1 --port P [extra arguments]

waits until ``GET /v1/models`` answers 200 and lists ``HF_ID`` (and ``GET /health``
answers 200, when the server has that route; a 404 there is taken as "no such
route"), hands the URL to every worker, and at the end of the run terminates the
server's process group (SIGTERM, then SIGKILL after a grace period).  The model
is then asked through the ordinary OpenAI-compatible client; the served model id
is ``HF_ID``.

Extra ``vllm serve`` arguments (``--max-model-len 4096``, ``--dtype half``, ...):

* ``$BENCHAUDIT_VLLM_ARGS``: shell words appended for every vLLM model of the run;
* ``[tool.benchaudit.models.NAME]`` with ``launch = "vllm"``, ``model = "HF_ID"``
  (default NAME), ``args = [...]`` and optionally ``startup_timeout`` (seconds);
  ``--model NAME`` then launches it (the environment's words come after ``args``).

``--host``, ``--port`` and ``--served-model-name`` are set by the launcher and are
refused in the extra arguments.  vLLM refuses a request for more log-probabilities than
its ``--max-logprobs`` (20 by default); when a selected layer asks for more (MMLU's
released layer: 100), the launcher passes ``--max-logprobs N`` (a larger value in the
extra arguments is kept, a smaller one raised).  That needs the selected items, which a
serial run has when it launches; an xdist controller launches before any worker collects, so
there pass ``--max-logprobs N`` in ``$BENCHAUDIT_VLLM_ARGS``.  Against any endpoint that still
refuses, :func:`logprob_refusal` turns the first refusal into one message naming the flag.  The executable is ``vllm`` on ``PATH``, else the
one next to the running Python (the ``vllm`` extra installed in this virtual
environment); without either the run stops with one usage error.  The server's
output goes to a log file in the temporary directory; a failed start quotes its
last lines.  Start-up waits ``startup_timeout`` seconds (default 900, or
``$BENCHAUDIT_VLLM_STARTUP_TIMEOUT``): a first run downloads the weights.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.inference.launch.keys import new_api_key
from pytest_benchaudit.inference.launch.local import _free_port

__all__ = [
    "DEFAULT_MAX_LOGPROBS",
    "DEFAULT_STARTUP_TIMEOUT",
    "VllmServer",
    "VllmUnavailable",
    "find_vllm",
    "logprob_refusal",
    "with_max_logprobs",
]

DEFAULT_STARTUP_TIMEOUT = 900.0
STARTUP_TIMEOUT_ENV = "BENCHAUDIT_VLLM_STARTUP_TIMEOUT"
_INSTALL_HINT = "install the vllm extra (pip install 'pytest-benchaudit[vllm]') or put vllm on PATH"
_RESERVED = ("--host", "--port", "--served-model-name", "--api-key")
_STOP_GRACE = 30.0
_LOG_TAIL_LINES = 15


DEFAULT_MAX_LOGPROBS = 20  # vLLM's --max-logprobs default
_MAX_LOGPROBS_FLAG = "--max-logprobs"
# vLLM: "Requested sample logprobs of 100, which is greater than max allowed: 20" (V0),
# "Requested logprobs of 100, which is greater than max allowed: 20" (V1); OpenAI:
# "... 'top_logprobs': integer above maximum value. Expected a value <= 20, but got 100 ...".
_REFUSALS = (
    re.compile(r"logprobs of (?P<asked>\d+), which is greater than max allowed: (?P<allowed>\d+)", re.I),
    re.compile(
        r"logprobs'?:? integer above maximum value\. Expected a value <= (?P<allowed>\d+), "
        r"but got (?P<asked>\d+)",
        re.I,
    ),
)


def with_max_logprobs(args: tuple[str, ...] | list[str], needed: int | None) -> tuple[str, ...]:
    """``args`` with ``--max-logprobs`` at least ``needed`` (unchanged when vLLM's default suffices)."""
    args = tuple(args)
    if (
        needed is None
        or needed <= DEFAULT_MAX_LOGPROBS
        and not any(a.split("=", 1)[0] == _MAX_LOGPROBS_FLAG for a in args)
    ):
        return args
    out: list[str] = []
    given: int | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == _MAX_LOGPROBS_FLAG and i + 1 < len(args):
            given, i = _int(args[i + 1]), i + 2
            continue
        if arg.startswith(_MAX_LOGPROBS_FLAG + "="):
            given, i = _int(arg.split("=", 1)[1]), i + 1
            continue
        out.append(arg)
        i += 1
    limit = max(needed or 0, given or 0)
    return (*out, _MAX_LOGPROBS_FLAG, str(limit))


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def logprob_refusal(error: str | None) -> str | None:
    """One clear message when ``error`` is an endpoint refusing the number of log-probabilities
    asked for, else ``None``."""
    if not error:
        return None
    for pattern in _REFUSALS:
        m = pattern.search(error)
        if m:
            asked, allowed = m.group("asked"), m.group("allowed")
            return (
                f"this endpoint allows {allowed} log-probabilities; the layer needs {asked}: "
                f"start vLLM with --max-logprobs {asked}"
            )
    return None


class VllmUnavailable(BenchauditError, RuntimeError):
    """No vllm executable, bad launch arguments, or the server did not come up."""


def _fallback_dirs() -> list[Path]:
    """Where to look when ``vllm`` is not on PATH: next to the running interpreter (a venv's bin)."""
    return [Path(sys.executable).parent]


def find_vllm() -> str:
    """The ``vllm`` executable to run, or :class:`VllmUnavailable` saying how to get one."""
    found = shutil.which("vllm")
    if found:
        return found
    for folder in _fallback_dirs():
        candidate = folder / "vllm"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise VllmUnavailable(f"the vllm executable was not found: {_INSTALL_HINT}")


def _get(url: str, api_key: str | None = None) -> tuple[int, bytes]:
    """Status and body of a GET (0 when nothing answers); stdlib, no client state for a poll."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2.0) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, b""
    except (urllib.error.URLError, OSError):
        return 0, b""


def _served_ids(body: bytes) -> list[str]:
    try:
        data = json.loads(body)
        return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []


class VllmServer:
    """One ``vllm serve`` process on 127.0.0.1; ``start()`` returns its base URL (``.../v1``)."""

    def __init__(
        self,
        model_id: str,
        args: tuple[str, ...] | list[str] = (),
        *,
        startup_timeout: float | None = None,
        poll_interval: float = 0.5,
        max_logprobs: int | None = None,
    ) -> None:
        self.model_id = model_id
        # the most log-probabilities a selected layer asks for (None: none asks)
        self.args = with_max_logprobs(args, max_logprobs)
        if startup_timeout is None:
            startup_timeout = float(os.environ.get(STARTUP_TIMEOUT_ENV) or DEFAULT_STARTUP_TIMEOUT)
        self.startup_timeout = startup_timeout
        self.poll_interval = poll_interval
        self.url: str | None = None
        self.log_path: Path | None = None
        self.command: list[str] = []
        self.api_key = new_api_key()  # required by the server (VLLM_API_KEY): see launch/keys.py
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        for arg in self.args:
            if arg.split("=", 1)[0] in _RESERVED:
                raise VllmUnavailable(
                    f"{arg.split('=', 1)[0]} is set by the launcher; leave it out of the extra vllm arguments"
                )
        exe = find_vllm()
        port = _free_port()
        self.command = [exe, "serve", self.model_id, "--host", "127.0.0.1", "--port", str(port), *self.args]
        fd, log_name = tempfile.mkstemp(prefix="benchaudit-vllm-", suffix=".log")
        self.log_path = Path(log_name)
        with os.fdopen(fd, "wb") as log:
            # Own process group: vLLM forks engine processes; stop() signals them all.
            self._proc = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "VLLM_API_KEY": self.api_key},
            )
        atexit.register(self.stop)  # a run that dies on its way out still leaves no server behind
        base = f"http://127.0.0.1:{port}"
        url = f"{base}/v1"
        deadline = time.monotonic() + self.startup_timeout
        try:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise VllmUnavailable(
                        f"`vllm serve {self.model_id}` exited with status "
                        f"{self._proc.returncode} during start-up{self._log_tail()}"
                    )
                status, body = _get(f"{url}/models", self.api_key)
                if status == 200 and _get(f"{base}/health")[0] in (200, 404):
                    served = _served_ids(body)
                    if self.model_id not in served:
                        raise VllmUnavailable(f"the vLLM server serves {served}, not {self.model_id!r}")
                    self.url = url
                    return url
                time.sleep(self.poll_interval)
            raise VllmUnavailable(
                f"`vllm serve {self.model_id}` did not answer on {url} within "
                f"{self.startup_timeout:.0f}s (${STARTUP_TIMEOUT_ENV} or startup_timeout "
                f"raises the limit){self._log_tail()}"
            )
        except BaseException:
            self.stop(keep_log=True)
            raise

    def _log_tail(self) -> str:
        if self.log_path is None:
            return ""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        except OSError:
            return ""
        tail = "\n".join(f"    {line}" for line in lines)
        return f"; log {self.log_path}" + (f", last lines:\n{tail}" if tail else "")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self, keep_log: bool = False) -> None:
        """Terminate the server's process group, then kill it if it outlives the grace period."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=_STOP_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            _signal_group(proc, signal.SIGKILL)  # engine processes left behind by the main one
        if not keep_log and self.log_path is not None and self.url is not None:  # a clean run: no log left
            self.log_path.unlink(missing_ok=True)
        self.url = None


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)  # the group id is the server's pid (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass
