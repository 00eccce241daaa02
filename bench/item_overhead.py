"""Per-item overhead of a benchaudit run with the replay backend vs bare pytest (target <= 1.5x).

First makes a run directory of N SecEval items (standardized pipeline) against the scripted
server; then times, interleaved and in fresh processes:

- ``pytest suites/seceval --limit N --model replay:RUN_DIR`` (no model: stored generations;
  collection, fixtures, extraction, scoring, records, summary, run directory);
- ``pytest test_trivial.py``: a generated file with ``@pytest.mark.parametrize`` over N values,
  each doing a trivial assert.

Whole-process wall time, median of --repeats; ratio = benchaudit / bare.  Per-item figures are
(wall - wall of the same command with --limit 1 / 1 item) / (N - 1), to take out start-up.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/item_overhead.py --items 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))

from throughput import start_server  # noqa: E402

PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-rN"]


def run(cmd: list[str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(" ".join(cmd) + "\n" + proc.stdout[-2000:] + proc.stderr[-2000:])
    return elapsed


def make_run_dir(tmp: Path, n: int) -> Path:
    server, url = start_server(0.0)
    try:
        run(PYTEST + [str(REPO / "suites" / "seceval"), "--limit", str(n), "--model", f"m@{url}",
                      "--report-dir", str(tmp / "source"), "--no-cache"], str(tmp))
    finally:
        server.terminate()
        server.wait()
    (run_dir,) = [p for p in (tmp / "source").iterdir() if (p / "run.json").is_file()]
    return run_dir


def write_trivial(tmp: Path, n: int) -> Path:
    path = tmp / "trivial" / f"test_trivial_{n}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.parametrize('i', range({n}))\n"
        "def test_item(i):\n"
        "    assert i >= 0\n"
        "    assert str(i).isdigit()\n"
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("BENCHAUDIT_DATA"):
        sys.exit("set BENCHAUDIT_DATA to the benchmark data directory")
    n = args.items
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        run_dir = make_run_dir(tmp, n)
        cmds = {}
        for size in (1, n):
            cmds[("benchaudit", size)] = PYTEST + [str(REPO / "suites" / "seceval"), "--limit", str(size),
                                                   "--model", f"replay:{run_dir}", "--report-dir",
                                                   str(tmp / "replayed")]
            cmds[("bare", size)] = PYTEST + [str(write_trivial(tmp, size))]
        times: dict[tuple[str, int], list[float]] = {k: [] for k in cmds}
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            for key, cmd in cmds.items():
                times[key].append(run(cmd, str(tmp)))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n} items, whole-process wall, median of {args.repeats} (interleaved)")
    print(f"{'':>22} {'1 item s':>9} {f'{n} items s':>11} {'per item ms':>12}")
    for kind in ("bare", "benchaudit"):
        per = (med[(kind, n)] - med[(kind, 1)]) / (n - 1) * 1000
        print(f"{kind:>22} {med[(kind, 1)]:>9.2f} {med[(kind, n)]:>11.2f} {per:>12.3f}")
    ratio = med[("benchaudit", n)] / med[("bare", n)]
    per_ratio = ((med[("benchaudit", n)] - med[("benchaudit", 1)]) / (med[("bare", n)] - med[("bare", 1)]))
    print(f"ratio benchaudit/bare, whole process: {ratio:.2f}x (target <= 1.5x -> {'met' if ratio <= 1.5 else 'NOT met'})")
    print(f"ratio benchaudit/bare, per item (start-up taken out): {per_ratio:.2f}x")
    print("raw:", {f"{k[0]}@{k[1]}": [round(t, 2) for t in v] for k, v in times.items()})


if __name__ == "__main__":
    main()
