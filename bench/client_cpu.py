"""CPU per request of the inference client against a bare aiohttp client, in one process each.

Both send SecEval's 2,189 request bodies (standardized pipeline) to the mixed scripted server
(``pytest_benchaudit.testing.mixed_server``, its own process; ~3% of first attempts HTTP 500/429,
retried) at concurrency 32: the bare client is ``throughput.bare_client`` (aiohttp, one retry on a
non-200), ours is :class:`~pytest_benchaudit.inference.openai_compat.OpenAICompatBackend` (limiter,
retries, error classification, parsing into a ``Generation``, redaction).  CPU = the process's CPU
time over the run (the server runs elsewhere); interleaved, --repeats times.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/client_cpu.py --latency 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from data_dir import require_data_dir  # noqa: E402
from failure_summary import fresh_mixed  # noqa: E402
from throughput import bare_client, request_bodies  # noqa: E402


async def ours(url: str, bodies: list[bytes], concurrency: int) -> int:
    """Every body through the plugin's backend; the number of requests that ended in an error."""
    from pytest_benchaudit.inference.backend import ModelSpec
    from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
    from pytest_benchaudit.pipeline.types import Request

    requests = []
    for body in bodies:
        data = json.loads(body)
        params = {k: v for k, v in data.items() if k not in ("model", "messages")}
        requests.append(Request(mode="chat", messages=data["messages"], params=params))
    backend = OpenAICompatBackend(
        ModelSpec(label="m", kind="endpoint", base_url=url, model_id="m", max_retries=2), concurrency=concurrency
    )
    try:
        out = await asyncio.gather(*(backend.generate(r) for r in requests))
    finally:
        await backend.aclose()
    return sum(1 for g in out if g.error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    require_data_dir()
    bodies = request_bodies()
    cpu: dict[str, list[float]] = {"bare aiohttp": [], "benchaudit client": []}
    for _ in range(args.repeats):
        for name, client in (("bare aiohttp", bare_client), ("benchaudit client", ours)):
            with fresh_mixed(args.latency) as url:  # each client meets the whole mix, HTTP errors included
                start = time.process_time()
                errors = asyncio.run(client(url, bodies, args.concurrency))
                cpu[name].append(time.process_time() - start)
            if errors:
                raise SystemExit(f"{name}: {errors} requests failed")
    print(
        f"{len(bodies)} requests, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms, "
        f"median of {args.repeats}; load average {os.getloadavg()[0]:.1f}"
    )
    for name, values in cpu.items():
        med = statistics.median(values)
        print(f"{name:>18}: CPU {med:.2f} s, {med / len(bodies) * 1000:.3f} ms per request")


if __name__ == "__main__":
    main()
