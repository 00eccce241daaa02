"""The analyses of one run set: per-task scores and ranks, Kendall tau-b between tasks, HELM-style
mean win rates, benchmark rankings by mean task rank, and a PCA with Horn's parallel analysis."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from pytest_benchaudit.aggregate import stats
from pytest_benchaudit.aggregate.ranks import task_ranks, tau_b_table
from pytest_benchaudit.compare.compare_documents import (
    BenchmarkRank,
    CompareTauRow,
    OneSetAnalysis,
    PcaResult,
    TaskInfo,
)
from pytest_benchaudit.compare.runsets import RunSet

__all__ = ["task_ranks", "tau_b_table", "analyse_set"]


def _f(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _task_info(rs: RunSet) -> dict[str, TaskInfo]:
    """Per task key: metric(s), direction, whether it can be ranked, n models, n questions."""
    info: dict[str, TaskInfo] = {}
    for key in sorted(rs.results):
        by_model = rs.results[key]
        directions = {r["lower_is_better"] for r in by_model.values()}
        metrics = sorted({r["metric"] for r in by_model.values()})
        no_score = sorted(m for m, r in by_model.items() if r["score"] is None)
        entry: TaskInfo = {
            "metrics": metrics,
            "lower_is_better": directions.pop() if len(directions) == 1 else None,
            "n_models": len(by_model) - len(no_score),
            "n_questions": sorted({r["n"] for r in by_model.values()}),
            "denominators": sorted({r["denominator"] for r in by_model.values()}),
        }
        if entry["lower_is_better"] is None:
            rs.notes.append(
                f"{rs.label}: {key} mixes higher- and lower-is-better metrics across models "
                f"({', '.join(metrics)}): not ranked"
            )
        if no_score:
            rs.notes.append(
                f"{rs.label}: {key} has no headline score for {', '.join(no_score)} "
                "(denominator unspecified): left out of its ranking"
            )
        info[key] = entry
    return info


def _scores(rs: RunSet, info: dict[str, TaskInfo]) -> dict[str, dict[str, float]]:
    return {
        key: {m: float(r["score"]) for m, r in sorted(rs.results[key].items()) if r["score"] is not None}
        for key in info
        if info[key]["lower_is_better"] is not None
    }


def _benchmark_ranks(ranks: dict[str, dict[str, float]]) -> dict[str, dict[str, BenchmarkRank]]:
    by_bench: dict[str, list[str]] = defaultdict(list)
    for key in ranks:
        by_bench[key.split(".", 1)[0]].append(key)
    out: dict[str, dict[str, BenchmarkRank]] = {}
    for bench, keys in sorted(by_bench.items()):
        models = sorted(set.intersection(*(set(ranks[k]) for k in keys)))
        if not models:
            continue
        # Ranks among the models that have every task, so a missing model does not shift the others.
        sub = {k: {m: ranks[k][m] for m in models} for k in keys}
        per_task = [
            stats.rank_scores([sub[k][m] for m in models], lower_is_better=True) for k in keys
        ]  # re-rank among these
        mean, rank = stats.mean_rank_ranking(per_task)
        out[bench] = {m: {"mean_task_rank": float(mr), "rank": float(r)} for m, mr, r in zip(models, mean, rank)}
    return out


def _pca(scores: dict[str, dict[str, float]], lib: dict[str, bool], seed: int, permutations: int) -> PcaResult:
    keys = sorted(scores)
    if not keys:
        return {"skipped": "no ranked tasks"}
    models = sorted(set.intersection(*(set(scores[k]) for k in keys)))
    left_out = sorted(set().union(*(set(scores[k]) for k in keys)) - set(models))
    matrix = np.array([[stats.orient(scores[k][m], lib[k]) for k in keys] for m in models], dtype=float)
    if len(models) < 3:
        return {
            "skipped": f"{len(models)} models score on every task; PCA needs at least 3",
            "models_left_out": left_out,
        }
    sd = matrix.std(axis=0, ddof=1)
    constant = [k for k, s in zip(keys, sd) if not s > 0]
    if constant:
        keep = [i for i, s in enumerate(sd) if s > 0]
        keys = [keys[i] for i in keep]
        matrix = matrix[:, keep]
    if len(keys) < 2:
        return {"skipped": "fewer than two tasks vary across models", "constant_tasks": constant}
    p = stats.pca(matrix)
    pa = stats.parallel_analysis(matrix, n_permutations=permutations, seed=seed)
    # Model coordinates on the first two components (standardized rows times unit eigenvectors): the biplot.
    z = (matrix - matrix.mean(axis=0)) / matrix.std(axis=0, ddof=1)
    ev = np.asarray(p["eigenvalues"], dtype=float)
    unit = np.asarray(p["loadings"], dtype=float)[:, :2] / np.sqrt(np.where(ev[:2] > 0, ev[:2], 1.0))
    coords = z @ unit
    return {
        "rows": "models",
        "columns": keys,
        "models": models,
        "models_left_out": left_out,
        "constant_tasks": constant,
        "orientation": "scores negated for lower-is-better tasks (higher = better), columns standardized",
        "eigenvalues": [float(v) for v in p["eigenvalues"]],
        "variance_explained": [float(v) for v in p["variance_explained"]],
        "cumulative": [float(v) for v in p["cumulative"]],
        "loadings": {k: [float(v) for v in row] for k, row in zip(keys, p["loadings"])},
        "model_coordinates": {m: [float(v) for v in row] for m, row in zip(models, coords)},
        "parallel_analysis": {
            "threshold": [float(v) for v in pa["threshold"]],
            "n_components": pa["n_components"],
            "n_permutations": pa["n_permutations"],
            "quantile": pa["quantile"],
            "seed": pa["seed"],
            "rule": "leading components whose eigenvalue exceeds the 95th percentile of the "
            "eigenvalues of column-permuted matrices",
        },
    }


def _pca_by_benchmark(
    scores: dict[str, dict[str, float]], lib: dict[str, bool], seed: int, permutations: int
) -> dict[str, PcaResult]:
    """The PCA of each benchmark's own tasks (its models rarely score on another benchmark's)."""
    benches = sorted({k.split(".", 1)[0] for k in scores})
    if len(benches) < 2:
        return {}
    return {
        b: _pca({k: v for k, v in scores.items() if k.startswith(b + ".")}, lib, seed, permutations) for b in benches
    }


def analyse_set(rs: RunSet, seed: int = 0, permutations: int = 1000) -> OneSetAnalysis:
    """scores, ranks, tau_b, mean_win_rate, benchmark_ranks, pca and task info of one run set."""
    info = _task_info(rs)
    lib = {k: bool(v["lower_is_better"]) for k, v in info.items() if v["lower_is_better"] is not None}
    scores = _scores(rs, info)
    ranks = task_ranks(scores, lib)
    return {
        "label": rs.label,
        "pipelines": rs.pipelines,
        "runs": rs.runs,
        "models": sorted({m for by_model in rs.results.values() for m in by_model}),
        "tasks": info,
        "scores": scores,
        "ranks": ranks,
        "tau_b": [CompareTauRow(**r) for r in tau_b_table(scores, lib)],  # --similar marks them (document.py)
        "mean_win_rate": stats.mean_win_rate(scores, lib),
        "benchmark_ranks": _benchmark_ranks(ranks),
        "pca": _pca(scores, lib, seed, permutations),
        "pca_by_benchmark": _pca_by_benchmark(scores, lib, seed, permutations),
    }
