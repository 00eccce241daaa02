"""Set A against set B: benchmark rank shifts and Spearman rho with a paired bootstrap over questions."""

from __future__ import annotations

import time

import numpy as np

from pytest_benchaudit.aggregate import stats
from pytest_benchaudit.common.progress import iterate
from pytest_benchaudit.compare.compare_documents import (
    BootstrapQuestions,
    MissingRow,
    OneSetAnalysis,
    RankShiftRow,
    SetComparison,
    SpearmanRow,
)
from pytest_benchaudit.compare.oneset import _f
from pytest_benchaudit.compare.runsets import CompareError, RunSet

__all__ = ["MIN_SHIFT", "compare_sets"]

MIN_SHIFT = 3


def _task_items(rs: RunSet, key: str, models: list[str], qids: list[str], lower_is_better: bool) -> stats.TaskItems:
    scores = np.empty((len(models), len(qids)))
    valid = np.empty((len(models), len(qids)), dtype=bool)
    use_valid = np.empty(len(models), dtype=bool)
    for i, m in enumerate(models):
        by_q = {str(r["question_id"]): r for r in rs.items[(key, m)]}
        scores[i] = [float(by_q[q]["score"]) for q in qids]
        valid[i] = [bool(by_q[q]["valid"]) for q in qids]
        use_valid[i] = rs.results[key][m]["denominator"] == "valid"
    return stats.TaskItems(scores, valid, use_valid, lower_is_better)


def compare_sets(
    a: RunSet, b: RunSet, an_a: OneSetAnalysis, an_b: OneSetAnalysis, n_resamples: int, seed: int
) -> SetComparison:
    """rank_shift, spearman, missing and bootstrap details for set A vs set B."""
    shifts: list[RankShiftRow] = []
    spearman: list[SpearmanRow] = []
    missing: list[MissingRow] = []
    notes: list[str] = []
    questions: dict[str, BootstrapQuestions] = {}
    t0 = time.perf_counter()
    benches = sorted({k.split(".", 1)[0] for k in an_a["scores"]} | {k.split(".", 1)[0] for k in an_b["scores"]})
    for bench in iterate(benches, label="bootstrap", unit="benchmarks"):
        ka = {k for k in an_a["scores"] if k.startswith(bench + ".")}
        kb = {k for k in an_b["scores"] if k.startswith(bench + ".")}
        keys = sorted(ka & kb)
        for k in sorted(ka ^ kb):
            notes.append(
                f"{bench}: task {k} is only in set {'a' if k in ka else 'b'}; the comparison uses "
                f"the tasks both sets have"
            )
        if not keys:
            notes.append(f"{bench}: no task in both sets; not compared")
            continue
        has_all = {
            side: {m for m in an["models"] if all(m in an["scores"][k] for k in keys)}
            for side, an in (("a", an_a), ("b", an_b))
        }
        models = sorted(has_all["a"] & has_all["b"])
        everyone = set().union(*({m for k in keys for m in an["scores"][k]} for an in (an_a, an_b)))
        for m in sorted(everyone - set(models)):
            gaps = {side: [k for k in keys if m not in an["scores"][k]] for side, an in (("a", an_a), ("b", an_b))}
            where = [s for s in ("a", "b") if gaps[s]]
            missing.append(
                {
                    "benchmark": bench,
                    "model": m,
                    "missing_from": where,
                    "tasks": {s: gaps[s] for s in where},
                    "reason": "; ".join(
                        f"no score in set {s} ({(a if s == 'a' else b).label}) for "
                        f"{', '.join(gaps[s]) if len(gaps[s]) < len(keys) else 'any task'}"
                        for s in where
                    )
                    + ": left out of rank_shift and spearman",
                }
            )
        if len(models) < 2:
            notes.append(f"{bench}: {len(models)} model(s) in both sets with every task; nothing to compare")
            continue
        items_a, items_b = [], []
        for k in keys:
            order = [str(r["question_id"]) for r in a.items[(k, models[0])]]
            common = set(order)
            for rs in (a, b):
                for m in models:
                    common &= {str(r["question_id"]) for r in rs.items[(k, m)]}
            qids = [q for q in dict.fromkeys(order) if q in common]
            n_max = max(len(rs.items[(k, m)]) for rs in (a, b) for m in models)
            questions[k] = {"n_common": len(qids), "n_max": n_max}
            if len(qids) < n_max:
                notes.append(
                    f"{k}: the bootstrap resamples the {len(qids)} questions every compared model has "
                    f"in both sets (a model has up to {n_max})"
                )
            if not qids:
                raise CompareError(f"{k}: no question is common to every compared model in both sets")
            lib_a = bool(an_a["tasks"][k]["lower_is_better"])
            lib_b = bool(an_b["tasks"][k]["lower_is_better"])
            items_a.append(_task_items(a, k, models, qids, lib_a))
            items_b.append(_task_items(b, k, models, qids, lib_b))
        boot = stats.paired_bootstrap(items_a, items_b, n_resamples=n_resamples, seed=seed)
        shift = boot["rank_a"] - boot["rank_b"]
        stability = stats.direction_stability(shift, boot["boot_rank_a"], boot["boot_rank_b"], MIN_SHIFT)
        for i, m in enumerate(models):
            shifts.append(
                {
                    "benchmark": bench,
                    "model": m,
                    "rank_a": float(boot["rank_a"][i]),
                    "rank_b": float(boot["rank_b"][i]),
                    "shift": float(shift[i]),
                    "direction_stability": stability[i],
                    "mean_task_rank_a": float(boot["mean_rank_a"][i]),
                    "mean_task_rank_b": float(boot["mean_rank_b"][i]),
                }
            )
        finite = np.isfinite(boot["boot_rho"])
        rho = boot["rho"]
        ci = stats.percentile_ci(boot["boot_rho"]) if len(models) >= 3 else None
        spearman.append(
            {
                "benchmark": bench,
                "rho": rho if len(models) >= 3 else None,
                "ci95": ci,
                "n_models": len(models),
                "tasks": keys,
                "n_resamples": n_resamples,
                "n_resamples_defined": int(finite.sum()),
                "p_value": _f(_scipy_spearman_p(boot["rank_a"], boot["rank_b"])) if len(models) >= 3 else None,
            }
        )
        if len(models) < 3:
            notes.append(f"{bench}: only {len(models)} models to rank: rho not reported")
    seconds = time.perf_counter() - t0
    return {
        "rank_shift": shifts,
        "spearman": spearman,
        "missing": missing,
        "notes": notes,
        "bootstrap": {
            "unit": "question",
            "n_resamples": n_resamples,
            "seed": seed,
            "paired": True,
            "interval": "percentile, 2.5% and 97.5%",
            "seconds": seconds,
            "questions": questions,
            "how": "per task, one (resamples x questions) index array drawn over the questions every "
            "compared model has in both sets, shared by all models and both sets; task scores "
            "recomputed from per-item score and valid under each model's denominator; ranked "
            "per task (direction-aware, ties averaged), benchmark ranking by mean task rank",
        },
        "min_shift_for_stability": MIN_SHIFT,
    }


def _scipy_spearman_p(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(spearmanr(x, y).pvalue)
