"""Where a SecEval run's time goes: first request, sending span, end; this tree against another.

Whole-process wall time of one run is noisy on a shared 2-core machine (±0.2 s run to run), too
noisy to see a change of 50 ms in it.  The mixed server (``--arrivals``) logs each request's
arrival, so each run splits into three parts measured on the server's clock:

* **first**: process start to the first request (interpreter, pytest, the plugin's imports,
  configure, collection up to the first item asked);
* **span**: first request to last request (the sending, bound by latency and CPU contention);
* **end**: last request to process exit (its answer's latency, the last items, the summary,
  run.json, the inference process's shutdown, the interpreter's exit).

``--base TREE`` runs another checkout of the package (``git worktree add ../base HEAD~1``)
through ``PYTHONPATH`` in turn with this one, interleaved, each run against a server of its own
(``throughput.py``'s mix, options and bytecode cache).  Medians of ``--repeats``.

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/timeline.py --repeats 6 --base ../base
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

from data_dir import require_data_dir  # noqa: E402
from failure_summary import start_mixed  # noqa: E402
from throughput import pytest_command  # noqa: E402


def one_run(tree: Path, base: bool, env: dict[str, str], latency: float, tmp: Path) -> dict[str, float]:
    arrivals = tmp / "arrivals.txt"
    arrivals.unlink(missing_ok=True)
    server, url = start_mixed(latency, arrivals=arrivals)
    run_env = dict(env, PYTHONPATH=str(tree)) if base else env
    report = tmp / "reports"
    report.mkdir(exist_ok=True)
    cmd = pytest_command(url, str(tree / "suites" / "seceval"), 32, None, report)
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=run_env)
    end = time.time()
    server.terminate()
    server.wait()
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-2000:])
    times = sorted(float(line.split()[0]) for line in arrivals.read_text().splitlines())
    return {"total": end - start, "first": times[0] - start, "span": times[-1] - times[0], "end": end - times[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base", type=Path, help="another checkout to compare with (run through PYTHONPATH)")
    args = parser.parse_args()
    require_data_dir()
    trees = [("this tree", REPO, False)] + ([("base", args.base.resolve(), True)] if args.base else [])
    rows: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in trees}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode cache
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        for _, tree, base in trees:  # warms the bytecode caches, untimed
            one_run(tree, base, env, args.latency, tmp)
        for i in range(args.repeats):
            for name, tree, base in trees if i % 2 == 0 else trees[::-1]:
                rows[name].append(one_run(tree, base, env, args.latency, tmp))
    print(
        f"SecEval, mixed server, latency {args.latency * 1000:.0f} ms, concurrency 32, default options, median of "
        f"{args.repeats}; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':>10} {'total s':>8} {'first s':>8} {'span s':>8} {'end s':>7}")
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("total", "first", "span", "end")}
        print(f"{name:>10} {med['total']:>8.3f} {med['first']:>8.3f} {med['span']:>8.3f} {med['end']:>7.3f}")


if __name__ == "__main__":
    main()
