"""A stand-in for the ``vllm`` executable: ``serve MODEL --host H --port P [...]`` runs the scripted server.

Tests put a tiny ``vllm`` shell script first on ``PATH`` that execs
``python -m pytest_benchaudit.testing.fake_vllm "$@"``; the launcher then starts
this instead of real vLLM.  It serves :class:`~.scripted_server.ScriptedServer`
with model id ``MODEL`` on ``H:P`` (requiring ``$VLLM_API_KEY`` as a bearer token when set,
as ``vllm serve`` does) until SIGTERM (exit status 0), answering every
completion with ``$FAKE_VLLM_ANSWER`` (default ``Answer: A``) after
``$FAKE_VLLM_LATENCY`` seconds.  Other arguments are accepted and ignored.

Environment, for tests:

* ``FAKE_VLLM_LAUNCH_LOG``: a file; each launch appends one JSON line
  ``{"pid", "model", "host", "port", "extra", "api_key"}`` (count the lines to count launches; the
  key is logged so tests can check it is required and never written anywhere else);
* ``FAKE_VLLM_STARTUP_DELAY``: seconds to wait before listening (a slow model load);
* ``FAKE_VLLM_EXIT``: exit at once with this status instead of serving (a failed start).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable

from pytest_benchaudit.testing import scripted_server

__all__ = ["main"]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vllm", description="fake vllm for tests")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    args, extra = parser.parse_known_args(list(argv) if argv is not None else None)

    log = os.environ.get("FAKE_VLLM_LAUNCH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "model": args.model,
                        "host": args.host,
                        "port": args.port,
                        "extra": extra,
                        "api_key": os.environ.get("VLLM_API_KEY"),
                    }
                )
                + "\n"
            )
    if os.environ.get("FAKE_VLLM_EXIT"):
        print("fake vllm: failing on purpose", file=sys.stderr, flush=True)
        return int(os.environ["FAKE_VLLM_EXIT"])
    delay = float(os.environ.get("FAKE_VLLM_STARTUP_DELAY") or 0)
    if delay:
        time.sleep(delay)
    return scripted_server.main(
        [
            "--host",
            args.host,
            "--port",
            str(args.port),
            "--model-id",
            args.model,
            "--answer",
            os.environ.get("FAKE_VLLM_ANSWER", "Answer: A"),
            "--latency",
            os.environ.get("FAKE_VLLM_LATENCY", "0"),
            *(["--api-key-env", "VLLM_API_KEY"] if os.environ.get("VLLM_API_KEY") else []),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
