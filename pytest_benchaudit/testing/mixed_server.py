"""A realistic answer mix for benchmarks: mostly wrong, some invalid, some HTTP errors and retries.

Benchmarks of the harness must measure what a user meets with a real (small) model, not a
server that answers every question alike: most answers wrong, 5–15% invalid, a few HTTP
errors that the client retries.  :func:`realistic_mix` is a :data:`~.scripted_server.Script`
for :class:`~.scripted_server.ScriptedServer` that decides each reply from a hash of the
question text (so every run, and the bare client of a benchmark, gets the same mix):

* ``invalid`` share: an invalid answer, in turn empty, unparseable prose, and a truncated
  reply (``finish_reason: length``);
* ``http_errors`` share: the first attempt fails (HTTP 500, or 429 with ``Retry-After: 0``),
  the retry answers with a letter;
* the rest: ``Answer: X`` with X drawn from ``letters`` (on four-option questions about a
  quarter right, on SecEval's multi-answer questions far fewer);
* ``sampling`` share (default 0: every ask of a question gets the same reply): on a request that
  samples (``temperature`` not sent or above 0) the letter is drawn again for that share of the
  questions, from a hash of the question and the request's ``seed`` — repeats sent with seeds
  ``base + k`` then get answers of their own, the same in every run (no seed: per attempt).

Command line (like ``scripted_server``)::

    python -m pytest_benchaudit.testing.mixed_server --latency 0.1 [--invalid 0.10] [--http-errors 0.03] [--sampling 0.5]

prints ``READY http://127.0.0.1:PORT/v1`` once listening, serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from pytest_benchaudit.testing.scripted_server import (
    Call,
    Reply,
    Script,
    ScriptedServer,
    serve_until_signal,
)

__all__ = ["realistic_mix", "main"]

_INVALID = (
    Reply(content=""),
    Reply(content="I am not sure which option is meant here."),
    Reply(content="Let me think about each option in turn. First,", finish_reason="length"),
)


def _fraction(text: str, salt: str) -> float:
    digest = hashlib.blake2b((salt + text).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _samples(body: dict[str, object]) -> bool:
    """Whether a request samples: no temperature sent (the endpoint's default, above 0) or one above 0."""
    temperature = body.get("temperature")
    return temperature is None or (isinstance(temperature, (int, float)) and temperature > 0)


def realistic_mix(
    invalid: float = 0.10, http_errors: float = 0.03, letters: str = "ABCD", sampling: float = 0.0
) -> Script:
    """A script answering by a hash of the question: ``invalid`` / ``http_errors`` shares, else a letter;
    on a sampled request the ``sampling`` share of questions draws its letter again per seed."""
    if not 0 <= invalid + http_errors <= 1:
        raise ValueError("invalid + http_errors must lie in [0, 1]")
    if not 0 <= sampling <= 1:
        raise ValueError("sampling must lie in [0, 1]")

    def script(call: Call) -> Reply:
        text = call.last_user_text
        x = _fraction(text, "kind")
        letter = letters[int(_fraction(text, "letter") * len(letters))]
        if sampling and _samples(call.body) and _fraction(text, "sampled") < sampling:
            draw = f"seed {call.body['seed']}" if "seed" in call.body else f"attempt {call.attempt} {time.time_ns()}"
            letter = letters[int(_fraction(text, draw) * len(letters))]
        if x < invalid:
            return _INVALID[int(x / invalid * len(_INVALID)) % len(_INVALID)]
        if x < invalid + http_errors and call.attempt == 1:
            if _fraction(text, "status") < 0.5:
                return Reply(status=500, error_message="scripted overload")
            return Reply(status=429, error_message="scripted rate limit", headers={"Retry-After": "0"})
        return Reply(content=f"Answer: {letter}")

    return script


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_benchaudit.testing.mixed_server",
        description="Scripted OpenAI-compatible server with a realistic answer mix.",
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to hold each request")
    parser.add_argument("--invalid", type=float, default=0.10, help="share of invalid answers (default 0.10)")
    parser.add_argument(
        "--http-errors",
        type=float,
        default=0.03,
        help="share of requests whose first attempt gets HTTP 500/429 (default 0.03)",
    )
    parser.add_argument(
        "--sampling",
        type=float,
        default=0.0,
        help="share of questions whose letter is drawn again on each sampled request, from the "
        "question and the request's seed (default 0: the same reply every time)",
    )
    parser.add_argument(
        "--arrivals",
        metavar="FILE",
        help="write each request's arrival time (Unix seconds) "
        "and attempt number, a line each, to FILE when the server stops (bench/timeline.py)",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    mix = realistic_mix(args.invalid, args.http_errors, sampling=args.sampling)
    arrivals: list[tuple[float, int]] = []

    def logged(call: Call) -> Reply:
        arrivals.append((time.time(), call.attempt))
        return mix(call)

    server = ScriptedServer(logged if args.arrivals else mix, latency=args.latency, port=args.port)
    try:
        return serve_until_signal(server)
    finally:
        if args.arrivals:
            Path(args.arrivals).write_text("".join(f"{t:.4f} {a}\n" for t, a in arrivals))


if __name__ == "__main__":
    sys.exit(main())
