"""Throughput of `pytest suites/seceval` against a loopback server vs a bare asyncio+httpx client.

Both drive the same scripted OpenAI-compatible server (a separate process holding every
request for a fixed latency) with the same requests (SecEval under the standardized
pipeline) at the same concurrency; measured side by side in one run, whole-process wall
time, median of --repeats.  Prints items/s and the ratio bare_time / pytest_time
(1.0 = the harness costs nothing on top of the requests).

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/throughput.py --latency 0.02 --concurrency 1 8 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_benchaudit.testing.scripted_server", "--port", "0",
         "--latency", str(latency), "--answer", "Answer: B"],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, line.split()[1]


def request_bodies(limit: int | None) -> list[bytes]:
    """The exact JSON bodies the plugin sends for SecEval (standardized pipeline)."""
    from pytest_benchaudit.prompt.templates import render_request
    from pytest_benchaudit.dataset.suites import load_suite
    from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir

    suite = load_suite(REPO / "suites" / "seceval" / "suite.toml")
    data_dir, origin = resolve_data_dir(None)
    questions, _ = load_questions(suite, "mcq", data_dir, origin)
    pipe = suite.pipeline("mcq", "standardized")
    tpl = suite.templates[pipe.prompt.template]
    bodies = []
    for q in questions[:limit]:
        req = render_request(pipe, tpl, q)
        body = {"model": "m", "messages": [m.model_dump() for m in req.messages], **req.params}
        bodies.append(json.dumps(body).encode())
    return bodies


async def bare_client(url: str, bodies: list[bytes], concurrency: int, transport: str = "httpx") -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    extra = {}
    if transport == "aiohttp":  # the transport the plugin itself uses: a like-for-like client
        from httpx_aiohttp import AiohttpTransport

        extra["transport"] = AiohttpTransport(limits=limits)
    async with httpx.AsyncClient(base_url=url + "/", limits=limits, timeout=60, **extra) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(body: bytes) -> None:
            async with gate:
                r = await client.post("chat/completions", content=body, headers={"Content-Type": "application/json"})
                r.json()

        await asyncio.gather(*(one(b) for b in bodies))


def time_bare(url: str, bodies: list[bytes], concurrency: int, transport: str = "httpx") -> float:
    # A fresh interpreter, like the pytest run, so start-up costs are comparable.
    code = (
        "import asyncio, json, sys; sys.path.insert(0, %r);"
        "from throughput import bare_client;"
        "bodies = [b.encode() for b in json.load(sys.stdin)];"
        "asyncio.run(bare_client(%r, bodies, %d, %r))"
    ) % (str(Path(__file__).parent), url, concurrency, transport)
    payload = json.dumps([b.decode() for b in bodies])
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], input=payload, text=True, check=True)
    return time.perf_counter() - start


def time_pytest(url: str, concurrency: int, limit: int | None, report_dir: str) -> float:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "suites" / "seceval"), "--model", f"m@{url}",
           "--concurrency", str(concurrency), "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-rN",
           "--report-dir", report_dir, "--no-cache"]  # measure the requests, not the cache
    if limit:
        cmd += ["--limit", str(limit)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=report_dir)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-2000:])
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--limit", type=int, default=None, help="questions (default: all 2,189)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bare-transport", choices=["httpx", "aiohttp"], default="httpx",
                        help="the bare client's transport: plain httpx (the issue's reference) or httpx over aiohttp "
                             "(what the plugin uses)")
    args = parser.parse_args()
    if not os.environ.get("BENCHAUDIT_DATA"):
        sys.exit("set BENCHAUDIT_DATA to the benchmark data directory")
    bodies = request_bodies(args.limit)
    n = len(bodies)
    server, url = start_server(args.latency)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for conc in args.concurrency:
                bare, ours = [], []
                for _ in range(args.repeats):  # interleaved, so drift hits both alike
                    bare.append(time_bare(url, bodies, conc, args.bare_transport))
                    ours.append(time_pytest(url, conc, args.limit, tmp))
                b, p = statistics.median(bare), statistics.median(ours)
                rows.append((conc, b, p))
    finally:
        server.terminate()
        server.wait()
    print(f"SecEval standardized, {n} items, server latency {args.latency * 1000:.0f} ms, "
          f"median of {args.repeats} (whole-process wall time), bare client over {args.bare_transport}")
    print(f"{'concurrency':>11} {'bare s':>8} {'pytest s':>9} {'bare items/s':>13} {'pytest items/s':>15} {'ratio':>6}")
    for conc, b, p in rows:
        print(f"{conc:>11} {b:>8.2f} {p:>9.2f} {n / b:>13.1f} {n / p:>15.1f} {b / p:>6.2f}")


if __name__ == "__main__":
    main()
