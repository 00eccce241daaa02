"""Rate limits: `pytest suites/seceval --model openai/gpt-4o` against a loopback token bucket.

The endpoint (testing/provider_fakes.py, in this process) grants `--rate` requests per second with
a burst of `--burst` and answers the rest 429 with Retry-After, retry-after-ms and x-ratelimit-*
headers.  The run's adaptive concurrency starts at `--concurrency`, halves on 429 and recovers.  The
answer mix is realistic: mostly wrong, ~10% unreadable, ~3% HTTP 500 once (retried).  Prints the
throughput the endpoint granted (first to last 200) against the bucket's rate -- the floor is the rate
itself, measured in the same run as what the bucket allowed: burst + rate x elapsed -- and the records
lost (items without a valid-or-invalid record, or with an inference error).

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

    with tempfile.TemporaryDirectory() as tmp, ProviderFake("openai", key="sk-bench", script=mix,
                                                            bucket=(args.rate, args.burst)) as fake:
        env = {**os.environ, **fake.env(), "XDG_CACHE_HOME": tmp}
        cmd = [sys.executable, "-m", "pytest", str(REPO / "suites" / "seceval"), "--model", "openai/gpt-4o",
               "--concurrency", str(args.concurrency), "--report-dir", tmp, "--no-cache", "-q", "-p", "no:cacheprovider",
               *(["--limit", str(args.limit)] if args.limit else [])]
        start = time.monotonic()
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        wall = time.monotonic() - start
        runs = [p for p in Path(tmp).iterdir() if (p / "records.jsonl").is_file()]
        records = [json.loads(line) for line in (runs[0] / "records.jsonl").read_text().splitlines()] if runs else []
        times = fake.grant_times
    if not records:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        return 1
    span = times[-1] - times[0]
    allowed = args.burst + args.rate * span  # what the bucket could grant over that span
    errors = sum(1 for r in records if r.get("error"))
    asked = len({r["question_id"] for r in records})
    print(f"items {asked}, records {len(records)}, 200s {fake.granted}, 429s {fake.refused_429}, "
          f"inference errors {errors}, invalid {sum(not r['valid'] for r in records)}")
    print(f"granted {len(times)} in {span:.2f} s = {len(times) / span:.1f}/s; bucket rate {args.rate:g}/s "
          f"(allowed {allowed:.0f}); whole run {wall:.1f} s")
    ratio = len(times) / allowed
    lost = (args.limit or 2189) - asked + errors
    print(f"throughput / bucket rate = {ratio:.3f} (target >= 0.90: {'met' if ratio >= 0.9 else 'NOT met'}); "
          f"lost {lost} (target 0: {'met' if lost == 0 else 'NOT met'})")
    return 0 if ratio >= 0.9 and lost == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
