"""Paper scale: every suite x 10 models (161,670 items) in one pytest run.

1. Collection: ``pytest SUITES --collect-only -q`` with ``--models`` endpoints against a bare
   pytest collecting as many trivial parametrized items (a generated test file), interleaved,
   fresh process each, median of --repeats; wall time, peak RSS and the ratio.
2. With ``--run``: the whole run against the loopback mixed server
   (``pytest_benchaudit.testing.mixed_server``: no latency, mostly wrong, ~10% invalid, ~3% of
   first attempts HTTP 500/429 that are retried), default output options, ``--no-cache``
   (the generation cache would only add its writes); peak RSS of the pytest process
   (``getrusage(RUSAGE_CHILDREN)`` of a fresh child: with ``-n``, the largest of the pytest
   processes), and a check that ``records.jsonl`` holds every item that ran exactly once.

    BENCHAUDIT_DATA=../shared/datasets nice .venv/bin/python bench/paper_scale.py --repeats 1
    BENCHAUDIT_DATA=../shared/datasets nice .venv/bin/python bench/paper_scale.py --repeats 1 --run [-n 2]
    ... --suites seceval (2,189 questions) for a smaller scale while developing
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))

from collection_scale import MEASURE, write_plain  # noqa: E402
from data_dir import require_data_dir  # noqa: E402
from failure_summary import start_mixed  # noqa: E402


def measure(cmd: list[str], cwd: str) -> tuple[float, float, str, int]:
    """(wall s, peak RSS MiB, output tail, exit status) of ``cmd`` in a fresh child.

    Byte-code is cached (in a prefix folder next to the run, as on a user's machine, where
    pytest's rewritten plugin modules are compiled once, not at every start)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(cwd) / "pycache")
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True, cwd=cwd, check=True, env=env
    )
    res = json.loads(out.stdout)
    return res["wall"], res["rss_kb"] / 1024, res["tail"], res["rc"]


def collected(tail: str) -> int:
    m = re.search(r"(\d+) tests? collected", tail)
    return int(m.group(1)) if m else -1


def models(n: int, url: str) -> list[str]:
    return [arg for i in range(n) for arg in ("--model", f"m{i}@{url}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--suites", default="all", help="all (every suite) or one suite folder name")
    parser.add_argument("--repeats", type=int, default=3, help="collection measurements (interleaved)")
    parser.add_argument("--run", action="store_true", help="also run every item against the loopback server")
    parser.add_argument("-n", dest="workers", default=None, help="xdist workers for the run (-n)")
    args = parser.parse_args()
    require_data_dir()
    target = str(REPO / "suites") if args.suites == "all" else str(REPO / "suites" / args.suites)
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        ours = base + ["--collect-only", "-q", target, *models(args.models, "http://127.0.0.1:9/v1")]
        measure(base + ["--collect-only", "-q", str(REPO / "suites" / "seceval")], tmp_name)  # warm the byte-code cache
        wall, rss, tail, rc = measure(ours, tmp_name)
        if rc != 0:
            sys.exit(tail)
        items = collected(tail)
        plain = write_plain(tmp, items)
        bare = base + ["--collect-only", "-q", str(plain)]
        measure(bare, tmp_name)  # its byte-code too
        res: dict[str, list[tuple[float, float]]] = {"benchaudit": [(wall, rss)], "bare pytest": []}
        for i in range(args.repeats):  # interleaved, so drift hits both alike
            if i:
                res["benchaudit"].append(measure(ours, tmp_name)[:2])
            res["bare pytest"].append(measure(bare, tmp_name)[:2])
        print(
            f"collection, {args.suites} x {args.models} models = {items:,} items, median of {args.repeats}, "
            "fresh process each (wall includes start-up and printing the -q list)"
        )
        print(f"{'what':<14} {'wall s':>7} {'peak RSS MiB':>13}  raw wall")
        for name, rows in res.items():
            print(
                f"{name:<14} {statistics.median(r[0] for r in rows):>7.2f} "
                f"{statistics.median(r[1] for r in rows):>13.0f}  {[round(r[0], 2) for r in rows]}"
            )
        ratio = statistics.median(r[0] for r in res["benchaudit"]) / statistics.median(r[0] for r in res["bare pytest"])
        print(f"ratio benchaudit / bare pytest: {ratio:.2f} (target <= 1.5)")
        if not args.run:
            return
        server, url = start_mixed(0.0)
        try:
            report = tmp / "reports"
            cmd = (
                base
                + [target, *models(args.models, url), "--report-dir", str(report), "--no-cache", "--max-retries", "2"]
                + (["-n", args.workers] if args.workers else [])
            )
            start = time.perf_counter()
            wall, rss, tail, rc = measure(cmd, tmp_name)
            print(f"load average after the run: {os.getloadavg()[0]:.2f}")
        finally:
            server.terminate()
            server.wait()
        if rc not in (0, 1):
            sys.exit(f"exit status {rc}:\n{tail}")
        (run_dir,) = [p for p in report.iterdir() if p.is_dir()]
        keys: Counter[tuple[str, str, str, str, str]] = Counter()
        with (run_dir / "records.jsonl").open() as fh:
            for line in fh:
                r = json.loads(line)
                keys[(r["benchmark"], r["task"], r["question_id"], r["model"], r.get("variant", ""))] += 1
        counts = {k: int(v) for v, k in re.findall(r"(\d+) (failed|passed|skipped)", tail)}
        ran = counts.get("failed", 0) + counts.get("passed", 0)
        twice = sum(1 for n in keys.values() if n > 1)
        print(
            f"run{' -n ' + args.workers if args.workers else ''}: {items:,} items, wall {wall:.0f} s "
            f"({time.perf_counter() - start:.0f} s), peak RSS {rss:.0f} MiB (target <= 1024), exit status {rc}"
        )
        print(
            f"records.jsonl: {sum(keys.values()):,} records, {len(keys):,} distinct items, {twice} recorded "
            f"more than once; pytest ran {ran:,} ({counts}): "
            + ("every item exactly once" if twice == 0 and len(keys) == ran == sum(keys.values()) else "MISMATCH")
        )
        print(tail.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
