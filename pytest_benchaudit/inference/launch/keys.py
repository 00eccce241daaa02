"""API keys of the servers a run launches (``local``, ``vllm:``).

A launched server listens on 127.0.0.1 only and requires a random key made for this run, so no
other local process (another user's, a browser tab's request to localhost) can use the model the
run started.  The key reaches the server through its environment (``VLLM_API_KEY`` for vLLM,
``API_KEY`` for llama-cpp-python's settings), never its command line (``ps`` shows that), and
the run's client through an environment variable of the run's own processes (xdist workers get
it in ``workerinput``, like the URL).  It is registered as a secret, so redaction masks it in
records, run files, reports and logs like any other key.
"""

from __future__ import annotations

import hashlib
import os
import secrets

from pytest_benchaudit.common.secrets import register_secret

__all__ = ["KEY_ENV_PREFIX", "new_api_key", "use_api_key"]

KEY_ENV_PREFIX = "BENCHAUDIT_LAUNCHED_KEY_"


def new_api_key() -> str:
    """A fresh random key (256 bits), registered for redaction."""
    key = secrets.token_urlsafe(32)
    register_secret(key)
    return key


def use_api_key(launch_key: str, api_key: str) -> str:
    """Put ``api_key`` where this process's client reads it; return that variable's name.

    The name depends only on which server it is (``launch_key``), so it is the same in the
    controller and in every worker."""
    name = KEY_ENV_PREFIX + hashlib.sha256(launch_key.encode()).hexdigest()[:12].upper()
    register_secret(api_key)
    os.environ[name] = api_key
    return name
