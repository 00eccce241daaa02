"""How busy the embedded model is kept during a local run (target: idle <= 5% of the time).

Starts the embedded llama.cpp server itself (``pytest_benchaudit.inference.launch.local.LocalServer``),
puts a small timestamping HTTP proxy on 127.0.0.1 in front of it, and runs

    pytest suites/cybermetric -k cm80 --limit 30 --set inference.max_tokens=32 \
           --model SmolLM2-135M-Instruct@http://127.0.0.1:PROXY/v1 --concurrency 2 --no-cache

(the same client, concurrency and server as ``--model local``, which would start its own
server).  The proxy records when each request arrives and when its response has been sent
back.  Idle = time inside the window [first request in, last response out] when no request
is in flight at all; the gaps between one response and the next request are the harness's
turnaround.  Also reported: the pytest process's wall time and the share of it before the
first request (start-up, collection).

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/local_idle.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from data_dir import require_data_dir  # noqa: E402

from pytest_benchaudit.inference.launch.local import MODEL_ID, LocalServer


class Proxy:
    """aiohttp reverse proxy on 127.0.0.1 that timestamps every request (perf_counter)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.spans: list[tuple[float, float, str]] = []
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> str:
        self._thread.start()
        self._ready.wait(30)
        return self.url

    def _run(self) -> None:
        import aiohttp
        from aiohttp import web

        async def main() -> None:
            session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))

            async def handle(request: web.Request) -> web.StreamResponse:
                t0 = time.perf_counter()
                body = await request.read()
                headers = {
                    k: v
                    for k, v in request.headers.items()
                    if k.lower() not in ("host", "content-length", "transfer-encoding")
                }
                async with session.request(
                    request.method, self.upstream + request.path_qs, data=body, headers=headers
                ) as up:
                    data = await up.read()
                    resp = web.Response(body=data, status=up.status, content_type=up.content_type or "application/json")
                await resp.prepare(request)
                await resp.write_eof()
                if request.method == "POST":
                    self.spans.append((t0, time.perf_counter(), request.path))
                return resp

            app = web.Application(client_max_size=64 << 20)
            app.router.add_route("*", "/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()
            await asyncio.Event().wait()

        asyncio.run(main())


def idle_stats(spans: list[tuple[float, float, str]]) -> dict[str, float]:
    spans = sorted(spans)
    start, end = spans[0][0], max(s[1] for s in spans)
    busy, cur_s, cur_e = 0.0, spans[0][0], spans[0][1]
    gaps = []
    for s, e, _ in spans[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            gaps.append(s - cur_e)
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    window = end - start
    service = [e - s for s, e, _ in spans]
    return {
        "window": window,
        "busy": busy,
        "idle": window - busy,
        "idle_frac": (window - busy) / window,
        "gaps": len(gaps),
        "gap_median_ms": statistics.median(gaps) * 1000 if gaps else 0.0,
        "gap_max_ms": max(gaps) * 1000 if gaps else 0.0,
        "start": start,
        "end": end,
        "latency_median": statistics.median(service),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[2, 1])
    args = parser.parse_args()
    require_data_dir()
    server = LocalServer()
    t = time.perf_counter()
    upstream = server.start()
    print(f"local server up in {time.perf_counter() - t:.1f} s at {upstream}")
    proxy = Proxy(upstream.rsplit("/v1", 1)[0])
    base = proxy.start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for conc in args.concurrency:
                proxy.spans.clear()
                cmd = [
                    sys.executable,
                    "-m",
                    "pytest",
                    str(REPO / "suites" / "cybermetric"),
                    "-k",
                    "cm80",
                    "--limit",
                    str(args.limit),
                    "--set",
                    f"inference.max_tokens={args.max_tokens}",
                    "--model",
                    f"{MODEL_ID}@{base}/v1",
                    "--concurrency",
                    str(conc),
                    "--no-cache",
                    "--report-dir",
                    tmp,
                    "-q",
                    "--no-header",
                    "--tb=no",
                    "-rN",
                    "-p",
                    "no:cacheprovider",
                ]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
                t1 = time.perf_counter()
                if proc.returncode not in (0, 1) or not proxy.spans:
                    raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
                st = idle_stats(list(proxy.spans))
                rows.append((conc, len(proxy.spans), t1 - t0, st, st["start"] - t0, t1 - st["end"]))
    finally:
        server.stop()
    print(
        f"CyberMetric-80, --limit {args.limit}, max_tokens {args.max_tokens}, SmolLM2-135M on llama.cpp "
        "(one request at a time), proxy timestamps"
    )
    print(
        f"{'conc':>4} {'requests':>8} {'pytest wall s':>13} {'before 1st req s':>16} {'after last s':>12} "
        f"{'window s':>8} {'idle s':>6} {'idle %':>6} {'gaps':>4} {'gap med ms':>10} {'gap max ms':>10} "
        f"{'req med s':>9}"
    )
    for conc, n, wall, st, pre, post in rows:
        print(
            f"{conc:>4} {n:>8} {wall:>13.2f} {pre:>16.2f} {post:>12.2f} {st['window']:>8.2f} {st['idle']:>6.2f} "
            f"{st['idle_frac'] * 100:>6.2f} {st['gaps']:>4} {st['gap_median_ms']:>10.1f} {st['gap_max_ms']:>10.1f} "
            f"{st['latency_median']:>9.3f}"
        )


if __name__ == "__main__":
    main()
