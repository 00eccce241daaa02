"""Paired bootstrap speed: 5,000 resamples of a 12 models x 6 tasks benchmark under two pipelines.

Times :func:`pytest_benchaudit.aggregate.stats.paired_bootstrap` (draw the shared question indices,
recompute every model's task scores under both pipelines from the per-item scores and
validity, rank per task, rank by mean task rank, Spearman rho per resample), median of
--repeats, on synthetic item matrices with AthenaBench mini's task sizes (300, 100, 100, 200,
200, 50 questions; one lower-is-better task; a mix of total and valid denominators).  With
--runs A_DIR B_DIR it also times the whole ``benchaudit compare`` document (loading the run
directories included) on real run directories, e.g. imported AthenaBench runs and their
standardized re-scoring.

    .venv/bin/python bench/bootstrap_speed.py [--resamples 5000] [--repeats 3]
    .venv/bin/python bench/bootstrap_speed.py --runs reports/athena-released reports/athena-standardized
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_benchaudit.aggregate import stats

SIZES = (300, 100, 100, 200, 200, 50)


def synthetic(n_models: int, seed: int, shift: float) -> list[stats.TaskItems]:
    rng = np.random.default_rng(seed)
    ability = np.linspace(0.85, 0.25, n_models)
    tasks = []
    for t, n in enumerate(SIZES):
        p = np.clip(ability[:, None] + shift * rng.normal(size=(n_models, 1)), 0.02, 0.98)
        correct = rng.random((n_models, n)) < p
        valid = rng.random((n_models, n)) > 0.05
        lib = t == 4  # a MAD-like task: lower is better
        scores = np.where(correct, 0.3, 4.0) + rng.random((n_models, n)) if lib else correct.astype(float)
        scores = np.where(valid, scores, 7.7 if lib else 0.0)
        tasks.append(stats.TaskItems(scores, valid, np.arange(n_models) % 2 == 0, lib))
    return tasks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=12)
    ap.add_argument("--resamples", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--runs",
        nargs=2,
        type=Path,
        metavar=("A_DIR", "B_DIR"),
        help="also time `benchaudit compare A_DIR --against B_DIR` (document only, no writing)",
    )
    args = ap.parse_args()

    a = synthetic(args.models, 1, 0.0)
    b = synthetic(args.models, 1, 0.08)  # same items, perturbed abilities: a second pipeline
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = stats.paired_bootstrap(a, b, n_resamples=args.resamples, seed=0)
        times.append(time.perf_counter() - t0)
    ci = stats.percentile_ci(res["boot_rho"])
    print(
        f"paired bootstrap, {args.models} models x {len(SIZES)} tasks ({sum(SIZES)} questions), "
        f"{args.resamples} resamples: median {statistics.median(times):.3f} s "
        f"(runs: {', '.join(f'{t:.3f}' for t in times)}); rho {res['rho']:.3f}, CI [{ci[0]:.3f}, {ci[1]:.3f}]"
    )

    if args.runs:
        from pytest_benchaudit.compare import _load, build_compare

        t0 = time.perf_counter()
        runs_a, runs_b = _load([args.runs[0]]), _load([args.runs[1]])
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        doc = build_compare(runs_a, runs_b, n_resamples=args.resamples)
        t_doc = time.perf_counter() - t0
        boot = doc["bootstrap"]["seconds"] if doc["bootstrap"] else float("nan")
        print(
            f"compare on run directories: load {t_load:.2f} s, document {t_doc:.2f} s (of which bootstrap {boot:.3f} s)"
        )
        for sp in doc["spearman"]:
            print(f"  {sp['benchmark']}: rho {sp['rho']:.3f}, CI {sp['ci95']}, {sp['n_models']} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
