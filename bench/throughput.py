"""Throughput of a benchaudit run against a loopback server vs a bare aiohttp client, realistic mix.

Both drive the same mixed scripted server (``pytest_benchaudit.testing.mixed_server``, its own
process, holding every request for a fixed latency; answers mostly wrong, ~10% invalid, ~3% of
first attempts HTTP 500/429 that are retried) at the same concurrency.  The pytest run uses
pytest's *default* options (what a user types: FAILURES and short summary on; the output is
not a terminal, so progress is a plain line per tenth of the run); the bare client is aiohttp with one retry on a non-200,
sending as many requests as the run recorded (SecEval's request bodies, cycled), and retrying
as the plugin's client does (``bare_client``); the "eager" bare client, which retries at once,
is printed beside it.
Whole-process wall time (interpreter start-up, collection, run directory included), median of
--repeats, interleaved; every timed run gets a server of its own, so each meets the whole mix
(the server counts attempts per question across runs).  Ratio = bare time / pytest time (1.0: the harness costs nothing).
Also prints the lines of terminal output of the pytest run.

The pytest run disables the plugins of the repository's test-only dependencies (hypothesis,
pytest-timeout; ``TEST_ONLY_PLUGINS``), which an installed package's environment does not have;
``--with-test-plugins`` keeps them.

Both sides' processes run with a bytecode cache (``PYTHONPYCACHEPREFIX`` in a temporary
directory, ``PYTHONDONTWRITEBYTECODE`` unset; warmed by a first untimed run), as an installed
package has one: a machine that sets ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile
(and assertion-rewrite) every module of pytest and the plugin in every run, ~2 s of CPU that a
user's run never pays.  ``--no-bytecode-cache`` keeps the environment as it is.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/throughput.py --latency 0.1 --concurrency 32
    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/throughput.py --latency 0.02 --suites all
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))

from data_dir import require_data_dir  # noqa: E402
from failure_summary import fresh_mixed  # noqa: E402


def request_bodies(limit: int | None = None) -> list[bytes]:
    """The exact JSON bodies the plugin sends for SecEval (standardized pipeline)."""
    from pytest_benchaudit.dataset.readers import load_questions, resolve_data_dir
    from pytest_benchaudit.dataset.suites import load_suite
    from pytest_benchaudit.prompt.templates import render_request

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


async def bare_client(url: str, bodies: list[bytes], concurrency: int, backoff: bool = True) -> None:
    """aiohttp, ``concurrency`` requests in flight, one retry on a non-200.

    With ``backoff`` (the default) it retries as the plugin's client does (its default
    ``retry_base`` of 0.5 s, full jitter): a 5xx after 0.25-0.5 s, a 429 after its ``Retry-After``,
    holding its slot meanwhile, as a client behind a concurrency bound does.  Without, it retries at
    once: a floor no polite client reaches."""
    import random

    import aiohttp

    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers={"Content-Type": "application/json"}) as session:

        async def one(body: bytes) -> None:
            async with gate:
                for _ in range(2):
                    async with session.post(url + "/chat/completions", data=body) as r:
                        await r.json(content_type=None)
                        if r.status == 200:
                            return
                        wait = float(r.headers.get("Retry-After", 0)) if r.status == 429 else random.uniform(0.25, 0.5)
                    if backoff and wait:
                        await asyncio.sleep(wait)

        await asyncio.gather(*(one(b) for b in bodies))


ENV: dict[str, str] = dict(os.environ)  # the children's environment (see --no-bytecode-cache)

# The pytest plugins of this repository's test-only dependencies (`pip install -e .[test]`), which
# a user's `pip install pytest-benchaudit` does not have: hypothesis's imports all of hypothesis
# at the terminal summary (~0.4 s of every run), pytest-timeout wraps every item.
TEST_ONLY_PLUGINS = ["-p", "no:hypothesispytest", "-p", "no:timeout"]


def time_bare(url: str, bodies: list[bytes], n: int, concurrency: int, backoff: bool = True) -> float:
    # A fresh interpreter, like the pytest run, so start-up costs are comparable.
    sent = [bodies[i % len(bodies)].decode() for i in range(n)]
    code = (
        f"import asyncio, json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        "from throughput import bare_client;"
        f"bodies = [b.encode() for b in json.load(sys.stdin)]; "
        f"asyncio.run(bare_client({url!r}, bodies, {int(concurrency)}, {backoff!r}))"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], input=json.dumps(sent), text=True, check=True, env=ENV)
    return time.perf_counter() - start


def pytest_command(url: str, target: str, concurrency: int, limit: int | None, report_dir: Path) -> list[str]:
    """The default-options run of ``target`` against ``url`` that the benches time."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        target,
        "--model",
        f"m@{url}",
        "--concurrency",
        str(concurrency),
        "-p",
        "no:cacheprovider",
        "--report-dir",
        str(report_dir),
        "--no-cache",
        "--max-retries",
        "2",
        *TEST_ONLY_PLUGINS,
    ]
    return cmd + (["--limit", str(limit)] if limit else [])


def time_pytest(url: str, target: str, concurrency: int, limit: int | None, report_dir: Path) -> tuple[float, int, int]:
    """(wall s, lines printed, records written) of one default-options run."""
    cmd = pytest_command(url, target, concurrency, limit, report_dir)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=report_dir.parent, env=ENV)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
    newest = max(report_dir.iterdir(), key=lambda p: p.stat().st_mtime)
    with (newest / "records.jsonl").open() as fh:
        records = sum(1 for _ in fh)
    return elapsed, len(proc.stdout.splitlines()), records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32])
    parser.add_argument(
        "--suites",
        choices=["seceval", "all"],
        default="seceval",
        help="seceval (2,189 questions) or all (every suite with data, one model)",
    )
    parser.add_argument("--limit", type=int, default=None, help="questions per task (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--with-test-plugins",
        action="store_true",
        help="keep the pytest plugins of the test-only dependencies (hypothesis, pytest-timeout)",
    )
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="run the children in this environment as it is (no bytecode cache if it has none)",
    )
    args = parser.parse_args()
    ENV["BENCHAUDIT_DATA"] = str(require_data_dir())
    target = str(REPO / "suites" / "seceval") if args.suites == "seceval" else str(REPO / "suites")
    if args.with_test_plugins:
        TEST_ONLY_PLUGINS.clear()
    bodies = request_bodies()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "reports"
        report.mkdir()
        if not args.no_bytecode_cache:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            with fresh_mixed(args.latency) as url:  # warms the bytecode cache, untimed
                time_pytest(url, target, args.concurrency[0], 1, report)
                time_bare(url, bodies, 10, args.concurrency[0])
        for conc in args.concurrency:
            bare, eager, ours, lines, n = [], [], [], 0, 0
            for _ in range(args.repeats):  # interleaved, so drift hits both alike
                # A server of its own for each side and run: each meets the whole mix (fresh_mixed).
                with fresh_mixed(args.latency) as url:
                    t, lines, n = time_pytest(url, target, conc, args.limit, report)
                ours.append(t)
                with fresh_mixed(args.latency) as url:
                    bare.append(time_bare(url, bodies, n, conc))
                with fresh_mixed(args.latency) as url:
                    eager.append(time_bare(url, bodies, n, conc, backoff=False))
            rows.append((conc, n, statistics.median(bare), statistics.median(ours), lines, statistics.median(eager)))
    print(
        f"{args.suites}: mixed server (mostly wrong, ~10% invalid, ~3% HTTP 500/429 retried), latency "
        f"{args.latency * 1000:.0f} ms, default pytest options, median of {args.repeats}, whole-process wall, "
        f"{'no ' if args.no_bytecode_cache else ''}bytecode cache, "
        f"{'with' if args.with_test_plugins else 'without'} the test-only plugins; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'concurrency':>11} {'items':>6} {'bare s':>8} {'pytest s':>9} {'bare items/s':>13} "
        f"{'pytest items/s':>15} {'ratio':>6} {'lines':>6} {'eager bare s':>13} {'ratio':>6}"
    )
    for conc, n, b, p, lines, e in rows:
        print(
            f"{conc:>11} {n:>6} {b:>8.2f} {p:>9.2f} {n / b:>13.1f} {n / p:>15.1f} {b / p:>6.3f} {lines:>6} "
            f"{e:>13.2f} {e / p:>6.3f}"
        )
    print("bare: the same retry policy as the plugin (backoff); eager bare: retries at once (see bare_client)")


if __name__ == "__main__":
    main()
