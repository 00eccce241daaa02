"""Coverage, false-positive rate and power of the error bars, by seeded simulation (docs/statistics.md).

Three measurements, each against a known truth, through the package's own code (a summary row from
records, a paired row, a plan row):

1. **Coverage of the headline's 95% intervals.**  Questions come in G topics (G = 5, 10, 52, with 4-12,
   3-9 and 2-6 questions a topic: :data:`SIZE`); a topic shifts the score of all its questions (a right
   answer's logit 1 + topic (+ question), an error's log topic + question: normal effects), so the
   questions of a topic score alike.  For each interval kind (``wilson``: 0/1 scores asked once; ``wilson_effective_n``:
   shares of K = 3 repeats; ``student_t``: a continuous error metric) the share of trials whose interval
   holds the true mean: the summary's ``ci95_clustered`` (by topic), its plain ``ci95`` on the same
   grouped data, and ``ci95`` on independent questions ("plain").  For comparison, the clustered interval
   issue 33 found (Miller 2024 eq. 4 with 1.96) on the same data.
2. **The paired test under a true null**, 10 topics: the difference between two models shared within a
   topic (±0.3 on the chance of a right answer, 0 on average) or not (0 everywhere): how often exact
   McNemar (questions as independent) and the clustered t reject at 5%, and how often the clustered CI holds 0.
3. **McNemar's power at the planned n**: ``benchaudit plan``'s K = 1 row for a 0/1 metric (exact McNemar,
   from the discordance rate ψ) simulated with scipy's binomtest, beside the n of the normal approximation
   plan used to give.

    .venv/bin/python bench/coverage.py [--trials 2000] [--seed 0]

Prints markdown tables (docs/statistics.md keeps the last run's).  Single-threaded; a few minutes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_benchaudit.aggregate.power import Variances, mcnemar_power, plan_rows, questions_for  # noqa: E402
from pytest_benchaudit.aggregate.repeat_stats import paired_difference  # noqa: E402
from pytest_benchaudit.aggregate.results import summarize  # noqa: E402
from pytest_benchaudit.pipeline.stages import build_pipeline  # noqa: E402

Z = stats.norm.ppf(0.975)
GROUPS = (5, 10, 52)
SIZE = {5: (4, 12), 10: (3, 9), 52: (2, 6)}  # questions per topic: uniform between these (inclusive)


def _card(metric: str) -> dict[str, Any]:
    fields = {"scoring": {"metric": metric, "denominator": "total"}, "aggregation": {"method": "micro", "by": "topic"}}
    return {"toy.mcq": build_pipeline("standardized", "toy", "mcq", fields).card()}


def _logistic(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _normal_mean(f: Callable[[Any], Any], sd: float) -> float:
    """E[f(1 + sd Z)] for Z standard normal, by Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(120)
    return float(np.sum(w * f(1 + sd * x)) / math.sqrt(2 * math.pi))


# Each kind: a trial's per-question scores (one list of repeats per question) and the true mean.
def _binary(rng: np.random.Generator, topic: np.ndarray, grouped: bool) -> list[list[float]]:
    effect = rng.normal(size=topic.max() + 1)[topic] if grouped else rng.normal(size=len(topic))
    return [[float(v)] for v in rng.random(len(topic)) < _logistic(1 + effect)]


def _shares(rng: np.random.Generator, topic: np.ndarray, grouped: bool) -> list[list[float]]:
    """Three repeats a question; its chance: logistic(1 + topic + question) grouped, logistic(1 + question) not."""
    question = rng.normal(0, 1, len(topic))
    effect = rng.normal(0, 1, topic.max() + 1)[topic] + question if grouped else question
    return [[float(v) for v in rng.random(3) < pi] for pi in _logistic(1 + effect)]


def _errors(rng: np.random.Generator, topic: np.ndarray, grouped: bool) -> list[list[float]]:
    """An error per question: exp(topic + question), each N(0, 0.5^2) (two question terms when not grouped)."""
    effect = rng.normal(0, 0.5, topic.max() + 1)[topic] if grouped else rng.normal(0, 0.5, len(topic))
    return [[float(v)] for v in np.exp(effect + rng.normal(0, 0.5, len(topic)))]


KINDS: dict[
    str, tuple[str, Callable[[np.random.Generator, np.ndarray, bool], list[list[float]]], Callable[[bool], float]]
] = {
    "wilson (0/1, K = 1)": ("exact_match", _binary, lambda grouped: _normal_mean(_logistic, 1.0)),
    "wilson_effective_n (shares of K = 3)": (
        "exact_match",
        _shares,
        lambda grouped: _normal_mean(_logistic, math.sqrt(2) if grouped else 1),
    ),
    # log-normal with variance 0.25 + 0.25: mean exp(0.5 / 2)
    "student_t / cluster_t (an error metric)": ("cvss_abs_diff", _errors, lambda grouped: math.exp(0.25)),
}


def _row(scores: list[list[float]], topic: np.ndarray, card: dict[str, Any], metric: str) -> dict[str, Any]:
    records = [
        {
            "benchmark": "toy",
            "task": "mcq",
            "model": "m",
            "pipeline": "standardized",
            "pipeline_hash": "h",
            "question_id": f"q{i}",
            "repeat": k,
            "valid": True,
            "correct": s == 1.0,
            "score": s,
            "metric": metric,
            "question_meta": {"topic": int(t)},
        }
        for i, (per, t) in enumerate(zip(scores, topic))
        for k, s in enumerate(per)
    ]
    (row,) = summarize(records, card)  # type: ignore[arg-type]
    return dict(row)


def _miller(values: list[float], topic: np.ndarray) -> list[float]:
    """Issue 33's interval: Miller (2024) eq. 4 (no small-sample correction) with 1.96."""
    x = np.asarray(values)
    n, m = len(x), x.mean()
    d = x - m
    sums = np.bincount(topic, weights=d)
    var = d.var(ddof=1) / n + ((sums**2).sum() - (d**2).sum()) / n**2
    se = math.sqrt(max(var, 0.0))
    return [m - Z * se, m + Z * se]


def _holds(ci: Any, truth: float) -> bool:
    return bool(ci) and ci[0] <= truth <= ci[1]


def coverage(trials: int, seed: int) -> list[list[str]]:
    table = []
    for name, (metric, make, truth_of) in KINDS.items():
        card = _card(metric)
        for groups in (*GROUPS, None):
            rng = np.random.default_rng([seed, groups or 0, len(name)])
            truth = truth_of(groups is not None)
            hits = {"clustered": 0, "plain on grouped": 0, "miller": 0}
            for _ in range(trials):
                g = groups or 50
                lo, hi = SIZE.get(g, (1, 1))
                topic = np.repeat(np.arange(g), rng.integers(lo, hi + 1, size=g))
                scores = make(rng, topic, groups is not None)
                row = _row(scores, topic, card, metric)
                hits["plain on grouped"] += _holds(row["ci95"], truth)
                if groups is not None:
                    hits["clustered"] += _holds(row["ci95_clustered"], truth)
                    hits["miller"] += _holds(_miller([float(np.mean(p)) for p in scores], topic), truth)
            share = {k: f"{100 * v / trials:.1f}%" for k, v in hits.items()}
            if groups is None:
                table.append([name, "plain (50 independent questions)", "—", share["plain on grouped"], "—"])
            else:
                table.append([name, f"G = {groups}", share["clustered"], share["plain on grouped"], share["miller"]])
    return table


def paired(trials: int, seed: int) -> list[list[str]]:
    table = []
    for label, spread in (("shared within topics (±0.3)", 0.3), ("none", 0.0)):
        rng = np.random.default_rng([seed, 7, int(spread * 10)])
        rejected = {"mcnemar": 0, "clustered": 0}
        covered = 0
        for _ in range(trials):
            base = _logistic(0.5 + rng.normal(size=10))
            shift = rng.choice([-spread, spread], size=10)
            topic = np.repeat(np.arange(10), rng.integers(8, 13, size=10))
            a = (rng.random(len(topic)) < np.clip(base + shift / 2, 0, 1)[topic]).astype(float).tolist()
            b = (rng.random(len(topic)) < np.clip(base - shift / 2, 0, 1)[topic]).astype(float).tolist()
            plain = paired_difference(a, b, True)
            clustered = paired_difference(a, b, True, topic.tolist())
            rejected["mcnemar"] += (plain["p_value"] or 1.0) < 0.05
            rejected["clustered"] += (clustered["p_value"] or 1.0) < 0.05
            covered += _holds(clustered["ci95"], 0.0)
        table.append(
            [
                label,
                f"{100 * rejected['mcnemar'] / trials:.1f}%",
                f"{100 * rejected['clustered'] / trials:.1f}%",
                f"{100 * covered / trials:.1f}%",
            ]
        )
    return table


def mcnemar(trials: int, seed: int) -> list[list[str]]:
    table = []
    for psi, mde in ((0.5, 0.05), (0.3, 0.10), (0.2, 0.05), (0.15, 0.10)):
        variances = Variances(between=psi - mde * mde, within=0.0, source="bench", binary=True)
        (row,) = plan_rows(mde, variances, None, (1,))
        old_n = questions_for(mde, variances, 1)
        rng = np.random.default_rng([seed, int(psi * 100), int(mde * 100)])

        def simulated(n: int) -> float:
            counts = rng.multinomial(n, [(psi + mde) / 2, (psi - mde) / 2, 1 - psi], size=trials)  # noqa: B023 - called within this iteration
            return float(
                np.mean([stats.binomtest(int(x), int(x + y)).pvalue < 0.05 if x + y else False for x, y, _ in counts])
            )

        table.append(
            [
                f"{psi:g}",
                f"{mde:g}",
                f"{old_n:,}",
                f"{mcnemar_power(old_n, psi, mde):.3f}",
                f"{simulated(old_n):.3f}",
                f"{row.questions:,}",
                f"{row.power:.3f}",
                f"{simulated(row.questions):.3f}",
            ]
        )
    return table


def _markdown(headers: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + ["| " + " | ".join(r) + " |" for r in rows]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    start = time.perf_counter()
    mcse = 100 * math.sqrt(0.95 * 0.05 / args.trials)
    print(f"## Coverage of the 95% intervals ({args.trials:,} trials each; Monte-Carlo SE ±{mcse:.1f} points at 95%)\n")
    print(
        _markdown(
            ["interval kind", "questions", "ci95_clustered", "ci95 (plain)", "Miller eq. 4 + 1.96"],
            coverage(args.trials, args.seed),
        )
    )
    print(f"\n## Paired test under a true null, 10 topics ({args.trials:,} trials each)\n")
    print(
        _markdown(
            ["difference between the models", "exact McNemar rejects", "clustered t rejects", "clustered CI holds 0"],
            paired(args.trials, args.seed),
        )
    )
    print(f"\n## Exact McNemar at plan's K = 1 row ({args.trials:,} simulated trials each)\n")
    print(
        _markdown(
            ["ψ", "mde", "n (normal approx.)", "exact power", "simulated", "n (plan)", "exact power", "simulated"],
            mcnemar(args.trials, args.seed),
        )
    )
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
