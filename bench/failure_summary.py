"""Cost of the end-of-run report when most answers are wrong: default options vs ``--tb=no -rN``.

Runs ``pytest suites/seceval`` (2,189 questions, standardized pipeline) against the mixed
scripted server (``pytest_benchaudit.testing.mixed_server``: mostly wrong, ~10% invalid,
~3% HTTP errors that are retried; no latency, so the harness is what is measured), twice
per repeat, interleaved: with pytest's default options (what a user runs: ``--tb=auto``,
``-rfE``) and with ``--tb=no -rN`` (no FAILURES section, no short summary: the floor).
Prints whole-process wall time, terminal lines and the ratio default / floor (1.0 = the
report costs nothing; before issue 11 pytest's FAILURES section made it O(failures x reports)).

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/failure_summary.py [--limit N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from data_dir import require_data_dir

REPO = Path(__file__).resolve().parent.parent


def start_mixed(
    latency: float, invalid: float = 0.10, http_errors: float = 0.03, arrivals: Path | None = None
) -> tuple[subprocess.Popen[str], str]:
    """The mixed scripted server in its own process; returns (process, base URL).  ``arrivals``:
    the file where it logs each request's arrival when it stops (``--arrivals``)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.testing.mixed_server",
            "--latency",
            str(latency),
            "--invalid",
            str(invalid),
            "--http-errors",
            str(http_errors),
            *(["--arrivals", str(arrivals)] if arrivals else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, line.split()[1]


@contextlib.contextmanager
def fresh_mixed(latency: float) -> Iterator[str]:
    """A mixed server for *one* timed run; yields its base URL.

    The server decides a reply by the question and its attempt number *as the server counted
    it*: a second run against the same server finds every question past its first attempt and
    gets no HTTP error at all.  Each timed run (and each bare client) gets its own server, so
    each meets the whole mix."""
    server, url = start_mixed(latency)
    try:
        yield url
    finally:
        server.terminate()
        server.wait()


def run_pytest(args: list[str], cwd: str) -> tuple[float, int, str]:
    """Whole-process wall time, lines printed, stdout."""
    cmd = [sys.executable, "-m", "pytest", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(" ".join(cmd) + "\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    return elapsed, len(proc.stdout.splitlines()), proc.stdout


def accuracy(report_dir: Path) -> tuple[float, float]:
    """Share correct and share invalid of the newest run under ``report_dir``."""
    newest = max((p for p in report_dir.iterdir() if (p / "summary.json").is_file()), key=lambda p: p.stat().st_mtime)
    (res,) = json.loads((newest / "summary.json").read_text())["results"]
    return res["score_total"], res["invalid_rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="questions (default: all 2,189)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    require_data_dir()
    base = [str(REPO / "suites" / "seceval"), "-p", "no:cacheprovider", "--no-cache", "--max-retries", "2"]
    if args.limit:
        base += ["--limit", str(args.limit)]
    default, floor, lines = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "reports"
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            with fresh_mixed(0.0) as url:
                t, n, _out = run_pytest(base + ["--model", f"m@{url}", "--report-dir", str(report)], tmp)
            default.append(t)
            lines["default"] = n
            with fresh_mixed(0.0) as url:
                t, n, _out = run_pytest(
                    base + ["--model", f"m@{url}", "--report-dir", str(report), "--tb=no", "-rN"], tmp
                )
            floor.append(t)
            lines["--tb=no -rN"] = n
        score, invalid = accuracy(report)
    d, f = statistics.median(default), statistics.median(floor)
    print(
        f"SecEval standardized, mixed server (score {100 * score:.1f}% over all items, {100 * invalid:.1f}% invalid), "
        f"no latency, median of {args.repeats}, whole-process wall time"
    )
    print(f"{'options':>14} {'wall s':>8} {'lines':>6}")
    print(f"{'default':>14} {d:>8.2f} {lines['default']:>6}")
    print(f"{'--tb=no -rN':>14} {f:>8.2f} {lines['--tb=no -rN']:>6}")
    print(f"ratio default / floor: {d / f:.2f}")


if __name__ == "__main__":
    main()
