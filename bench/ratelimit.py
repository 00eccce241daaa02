"""Rate limits: `pytest suites/seceval --model openai/gpt-4o` against a loopback token bucket.

The endpoint (testing/provider_fakes.py, in this process) grants `--rate` requests per second with
a burst of `--burst` and answers the rest 429 with Retry-After, retry-after-ms and x-ratelimit-*
headers.  The run's adaptive concurrency starts at `--concurrency`, halves on 429 and recovers.  The
answer mix is realistic: mostly wrong, ~10% unreadable, ~3% HTTP 500 once (retried).  Prints the
throughput the endpoint granted (first to last 200) against the floor, measured in the same run: the
bucket's rate, or the same run against the same endpoint without a limit when the client cannot reach
that rate on this machine; and the requests lost (items without a record, or with an inference error).
First, the same against the backend alone (no pytest in the process), which shows what the limiter
achieves when nothing competes with the engine's event loop for the GIL.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/ratelimit.py --rate 200 --burst 10 --concurrency 32
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from pytest_benchaudit.testing.provider_fakes import FakeReply, ProviderFake

REPO = Path(__file__).resolve().parent.parent


def run_once(args: argparse.Namespace, mix, bucket: tuple[float, int] | None) -> dict | None:
    """One pytest run over SecEval against the fake; what the fake granted and what the run recorded."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        ProviderFake("openai", key="sk-bench", script=mix, bucket=bucket) as fake,
    ):
        env = {**os.environ, **fake.env(), "XDG_CACHE_HOME": tmp}
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "suites" / "seceval"),
            "--model",
            "openai/gpt-4o",
            "--concurrency",
            str(args.concurrency),
            "--report-dir",
            tmp,
            "--no-cache",
            "-q",
            "-p",
            "no:cacheprovider",
            *(["--limit", str(args.limit)] if args.limit else []),
        ]
        start = time.monotonic()
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        wall = time.monotonic() - start
        runs = [p for p in Path(tmp).iterdir() if (p / "records.jsonl").is_file()]
        records = [json.loads(line) for line in (runs[0] / "records.jsonl").read_text().splitlines()] if runs else []
        times = list(fake.grant_times)
        granted, refused = fake.granted, fake.refused_429
    if not records or len(times) < 2:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        return None
    span = times[-1] - times[0]
    lo, hi = times[len(times) // 20], times[len(times) * 19 // 20]  # steady state: the middle 90% of grants
    steady = (len(times) * 19 // 20 - len(times) // 20) / (hi - lo)
    return {
        "steady": steady,
        "items": len({r["question_id"] for r in records}),
        "records": len(records),
        "granted": granted,
        "refused": refused,
        "errors": sum(1 for r in records if r.get("error")),
        "invalid": sum(not r["valid"] for r in records),
        "span": span,
        "rate": len(times) / span,
        "wall": wall,
    }


def client_only(rate: float, burst: int, concurrency: int, n: int) -> tuple[float, int, int]:
    """The backend alone (no pytest in the process) against the bucket: steady rate / bucket rate, 429s,
    errors -- what the limiter achieves when nothing competes with the engine's event loop for the GIL."""
    import asyncio

    from pytest_benchaudit.inference.backend import parse_model_spec
    from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
    from pytest_benchaudit.pipeline.types import Message, Request

    with ProviderFake("openai", key="sk-bench", bucket=(rate, burst)) as fake:
        os.environ.update(fake.env())
        spec = parse_model_spec("openai/gpt-4o")

        async def go() -> list:
            backend = OpenAICompatBackend(spec, concurrency=concurrency)
            try:
                return await asyncio.gather(
                    *(
                        backend.generate(Request(mode="chat", messages=(Message(role="user", content=f"q{i}"),)))
                        for i in range(n)
                    )
                )
            finally:
                await backend.aclose()

        gens = asyncio.run(go())
        times = fake.grant_times
        lo, hi = len(times) // 20, len(times) * 19 // 20
        return (hi - lo) / (times[hi] - times[lo]) / rate, fake.refused_429, sum(g.error is not None for g in gens)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--burst", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--limit", type=int, default=None, help="questions (default: all 2,189)")
    args = ap.parse_args()
    if not Path(os.environ.get("BENCHAUDIT_DATA", ""), "seceval").is_dir():
        print("needs SecEval data: set BENCHAUDIT_DATA", file=sys.stderr)
        return 2
    failed_once: set[str] = set()

    def mix(call) -> FakeReply | None:
        text = call.body["messages"][-1]["content"]
        h = zlib.crc32(text.encode()) % 100
        if h < 3 and text not in failed_once:
            failed_once.add(text)
            return FakeReply(status=500, error={"error": {"message": "upstream hiccup"}})
        return FakeReply(content="I am not sure." if h < 13 else "Answer: " + "ABCD"[h % 4])

    ratio_client, refused, errors = client_only(args.rate, args.burst, args.concurrency, args.limit or 2189)
    print(f"client only: steady state {ratio_client:.3f} of the bucket rate, 429s {refused}, errors {errors}")
    free = run_once(args, mix, bucket=None)  # the floor: the same run with no rate limit
    failed_once.clear()
    limited = run_once(args, mix, bucket=(args.rate, args.burst))
    if limited is None or free is None:
        return 1
    n = args.limit or 2189
    for name, res in (("no limit", free), ("token bucket", limited)):
        print(
            f"{name:>12}: items {res['items']}, records {res['records']}, 200s {res['granted']}, "
            f"429s {res['refused']}, inference errors {res['errors']}, invalid {res['invalid']}; "
            f"granted {res['rate']:.1f}/s over {res['span']:.2f} s, {res['steady']:.1f}/s in the middle 90% "
            f"(whole run {res['wall']:.1f} s)"
        )
    floor = min(args.rate, free["steady"])
    whole = limited["granted"] / (args.burst + args.rate * limited["span"])  # incl. the burst and the retry tail
    steady = limited["steady"] / floor
    lost = n - limited["items"] + limited["errors"]
    print(
        f"pytest run: throughput / floor (min of bucket rate {args.rate:g}/s and unlimited {free['steady']:.0f}/s)"
        f": steady state {steady:.3f} (target >= 0.90: {'met' if steady >= 0.9 else 'NOT met'}); "
        f"whole span / what the bucket allowed {whole:.3f}; lost {lost} (target 0: {'met' if lost == 0 else 'NOT met'})"
    )
    return 0 if steady >= 0.9 and lost == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
