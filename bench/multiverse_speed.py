"""The multiverse's speed against one plain rescore of the same runs, in the same process (issue 36).

Target: the 12 published AthenaBench runs over their whole default space in under 10x one rescore of
them, and under 60 s, on 2 cores.  Imports the published runs (``benchaudit import athenabench-runs``)
into a temporary folder unless ``--runs`` names run directories already imported, then, alternating
``--repeats`` times in this one process: one plain rescore of every run (``rescore_run`` with no
change: each record extracted, scored, written, summarised) and ``build_multiverse`` over the runs'
whole default space (every specification scored, paired tests, the bootstrap rank intervals); prints
each time, the medians and their ratio.  The first round warms the imports and caches (left out of the
medians).

    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/multiverse_speed.py
    BENCHAUDIT_DATA=../shared/datasets .venv/bin/python bench/multiverse_speed.py --runs reports/cti
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_benchaudit.compare import expand_runs  # noqa: E402
from pytest_benchaudit.multiverse.universe import build_multiverse  # noqa: E402
from pytest_benchaudit.rescore.run_dirs import rescore_run  # noqa: E402


def _import(out: Path) -> Path:
    from pytest_benchaudit.importers import import_athenabench_runs

    data = os.environ.get("BENCHAUDIT_DATA")
    if not data:
        sys.exit("set BENCHAUDIT_DATA to the datasets directory (or give --runs)")
    import_athenabench_runs(Path(data) / "athenabench" / "runs-mini", out, REPO / "suites", None, log=lambda *_a: None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, help="a folder of run directories (default: import AthenaBench's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000, help="the multiverse's bootstrap (its default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.runs or _import(Path(tmp) / "runs")
        runs = expand_runs([folder])
        records = sum(1 for r in runs for _line in (r / "records.jsonl").open(encoding="utf-8"))
        rescore_s, multiverse_s = [], []
        doc = None
        for round_ in range(args.repeats + 1):
            start = time.perf_counter()
            for run in runs:
                rescore_run(
                    run, report_dir=Path(tmp) / f"rescored-{round_}", suites_dir=REPO / "suites", warn=lambda _m: None
                )
            middle = time.perf_counter()
            doc = build_multiverse([folder], suites_dir=REPO / "suites", resamples=args.resamples, warn=lambda _m: None)
            end = time.perf_counter()
            label = "warm-up" if round_ == 0 else f"round {round_}"
            print(
                f"{label}: rescore {middle - start:.2f} s, multiverse {end - middle:.2f} s "
                f"({(end - middle) / (middle - start):.2f}x)",
                flush=True,
            )
            if round_:
                rescore_s.append(middle - start)
                multiverse_s.append(end - middle)
    assert doc is not None
    specs = {s["task"]: s["enumerated"] for s in doc["spaces"]}
    a, b = statistics.median(rescore_s), statistics.median(multiverse_s)
    print(f"{len(runs)} runs, {records} records; specifications per task: {specs} ({sum(specs.values())} in all)")
    print(
        f"median of {args.repeats}: one rescore {a:.2f} s, the whole multiverse {b:.2f} s: {b / a:.2f}x one rescore "
        f"(target < 10x and < 60 s); load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
