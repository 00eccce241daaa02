"""Statistics for comparing model rankings across tasks and pipelines (``benchaudit compare``).

Pure: numpy and scipy only, no I/O, no pytest.  Conventions used throughout:

- **Direction.** Every function that ranks takes ``lower_is_better``; scores are first
  *oriented* (negated when lower is better, e.g. a MAD) so that larger always means better.
- **Ranks.** Rank 1 is the best model.  Ties get the *average* rank (two models tied for
  first both get 1.5).  A missing score (``NaN``, e.g. a resample in which a model has no
  valid answer under a valid-only denominator) ranks last, tied with other missing ones.
- **Benchmark ranking.** A benchmark's ranking is the ranking of its models' *mean task
  rank* (lower mean rank is better; ties averaged).  Task ranks, unlike task scores, can be
  averaged across metrics of different scales and directions (AthenaBench's standardized
  VSP is a MAD next to accuracies and F1, where no benchmark score exists).
- **Spearman rho** is the Pearson correlation of average ranks (what ``scipy.stats.spearmanr``
  computes); **Kendall tau-b** is ``scipy.stats.kendalltau(..., variant="b")``; **inversions**
  are the model pairs the two rankings order oppositely, counted directly (a tie in either
  ranking is not an inversion).
- **Paired bootstrap over questions.** For each task, resampled question indices are drawn
  once per resample and shared by every model and by both pipelines; a model's task score in
  a resample is recomputed from its per-item ``score`` and ``valid`` under its own
  denominator (``total``: mean over the resampled items; ``valid``: mean over the valid ones).
  Resamples are held as count matrices (``counts[b, i]`` = how often item ``i`` was drawn in
  resample ``b``) so a task's scores for all models and resamples are one matrix product.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NotRequired

import numpy as np
from pydantic import ConfigDict, with_config
from scipy import stats as _st
from typing_extensions import TypedDict

__all__ = [
    "orient",
    "rank_scores",
    "mean_rank_ranking",
    "discordant_pairs",
    "kendall_tau_b",
    "spearman_rho",
    "rowwise_spearman",
    "mean_win_rate",
    "pca",
    "parallel_analysis",
    "bootstrap_indices",
    "resample_counts",
    "bootstrap_task_scores",
    "TaskItems",
    "paired_bootstrap",
    "direction_stability",
    "percentile_ci",
    "KendallTau",
    "PCAResult",
    "ParallelAnalysis",
    "PairedBootstrap",
]


# --------------------------------------------------------------------------- result rows


@with_config(ConfigDict(extra="forbid"))
class KendallTau(TypedDict):
    """:func:`kendall_tau_b`: tau-b and its p-value (``None`` when one side is constant), the
    inversions counted directly, and how many models were ranked (the tail of a ``tau_b`` row)."""

    tau: float | None
    p_value: float | None
    inversions: int
    n_models: int


class PCAResult(TypedDict):
    """:func:`pca` (arrays, not JSON: ``benchaudit compare`` writes them out as lists)."""

    eigenvalues: np.ndarray
    variance_explained: np.ndarray
    cumulative: np.ndarray
    loadings: np.ndarray


class ParallelAnalysis(TypedDict):
    """:func:`parallel_analysis`: observed and threshold eigenvalues, which components are retained."""

    observed: np.ndarray
    threshold: np.ndarray
    retained: np.ndarray
    n_components: int
    n_permutations: int
    seed: int
    quantile: float


class PairedBootstrap(TypedDict):
    """:func:`paired_bootstrap`: point ranks and rho, and per resample the ranks and rho."""

    rank_a: np.ndarray
    rank_b: np.ndarray
    mean_rank_a: np.ndarray
    mean_rank_b: np.ndarray
    rho: float | None
    boot_rank_a: np.ndarray
    boot_rank_b: np.ndarray
    boot_rho: np.ndarray
    indices: NotRequired[list[np.ndarray]]  # with return_indices: each task's (B, n) index array


# --------------------------------------------------------------------------- ranks


def orient(scores: Any, lower_is_better: bool) -> np.ndarray:
    """Scores as floats with larger = better (negated when lower is better)."""
    x = np.asarray(scores, dtype=float)
    return -x if lower_is_better else x


def rank_scores(scores: Any, lower_is_better: bool = False, axis: int = -1) -> np.ndarray:
    """Ranks along ``axis``: 1 = best, ties averaged, ``NaN`` ranks last (tied with other NaNs)."""
    key = -orient(scores, lower_is_better)  # ascending key: smaller is better
    key = np.where(np.isnan(key), np.inf, key)
    return np.asarray(_st.rankdata(key, method="average", axis=axis), dtype=float)


def mean_rank_ranking(task_ranks: Any, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(mean rank, ranking of the mean ranks) of per-task rank arrays stacked on ``axis``.

    ``task_ranks`` holds ranks (1 = best); the result ranks the models by their mean task
    rank, 1 = lowest mean rank, ties averaged.
    """
    r = np.asarray(task_ranks, dtype=float)
    mean = r.mean(axis=axis)
    return mean, _st.rankdata(mean, method="average", axis=-1)


# --------------------------------------------------------------------------- rank agreement


def discordant_pairs(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> int:
    """Pairs (i < j) that ``x`` and ``y`` order oppositely (ties in either are not counted)."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    return int(np.triu(da * db < 0, k=1).sum())


def _none_if_nan(v: float) -> float | None:
    v = float(v)
    return None if math.isnan(v) else v


def kendall_tau_b(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> KendallTau:
    """Kendall tau-b (scipy, variant "b"), its p-value and the inversions counted directly.

    ``x`` and ``y`` must be oriented the same way (ranks, or oriented scores).  ``tau`` and
    ``p_value`` are ``None`` when one side is constant (tau-b is undefined then).
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if len(a) != len(b):
        raise ValueError("kendall_tau_b: x and y differ in length")
    res = _st.kendalltau(a, b, variant="b")
    return {
        "tau": _none_if_nan(res.statistic),
        "p_value": _none_if_nan(res.pvalue),
        "inversions": discordant_pairs(a, b),
        "n_models": int(len(a)),
    }


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rho: the Pearson correlation of the average ranks of ``x`` and ``y``."""
    rx = _st.rankdata(np.asarray(x, dtype=float))
    ry = _st.rankdata(np.asarray(y, dtype=float))
    return _none_if_nan(rowwise_spearman(rx[None, :], ry[None, :])[0])


def rowwise_spearman(ranks_a: np.ndarray, ranks_b: np.ndarray) -> np.ndarray:
    """Spearman rho per row of two (B, M) matrices of *average ranks*; NaN for a constant row."""
    a = np.asarray(ranks_a, dtype=float)
    b = np.asarray(ranks_b, dtype=float)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    num = (a * b).sum(axis=-1)
    den = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(rho, -1.0, 1.0)


# --------------------------------------------------------------------------- win rate


def mean_win_rate(
    task_scores: dict[str, dict[str, float]], lower_is_better: dict[str, bool]
) -> dict[str, float | None]:
    """HELM-style mean win rate: per task, the share of the *other* models a model beats
    (a tie counts half), averaged over the tasks the model has a score in.

    ``task_scores``: {task: {model: score}}; tasks with fewer than two models are skipped.
    """
    wins: dict[str, list[float]] = {}
    for task, by_model in task_scores.items():
        models = [m for m, s in by_model.items() if s is not None and not math.isnan(float(s))]
        if len(models) < 2:
            continue
        x = orient([by_model[m] for m in models], lower_is_better.get(task, False))
        beats = (x[:, None] > x[None, :]).sum(axis=1) + 0.5 * ((x[:, None] == x[None, :]).sum(axis=1) - 1)
        for m, w in zip(models, beats / (len(models) - 1)):
            wins.setdefault(m, []).append(float(w))
    all_models = {m for by_model in task_scores.values() for m in by_model}
    return {m: (sum(wins[m]) / len(wins[m]) if m in wins else None) for m in sorted(all_models)}


# --------------------------------------------------------------------------- PCA


def _standardize(matrix: Any) -> np.ndarray:
    x = np.asarray(matrix, dtype=float)
    sd = x.std(axis=0, ddof=1)
    if np.any(sd == 0) or np.any(np.isnan(sd)):
        raise ValueError("pca: a column is constant (or has fewer than two rows); it cannot be standardized")
    return np.asarray((x - x.mean(axis=0)) / sd, dtype=float)


def _eigenvalues(z: np.ndarray) -> np.ndarray:
    """Eigenvalues (descending) of the correlation matrices of standardized (..., n, p) data."""
    n = z.shape[-2]
    corr = np.swapaxes(z, -1, -2) @ z / (n - 1)
    ev = np.linalg.eigvalsh(corr)[..., ::-1]
    return np.clip(ev, 0.0, None)


def pca(matrix: Any) -> PCAResult:
    """PCA of a (rows = models, columns = tasks) matrix with standardized columns.

    Returns ``eigenvalues`` (of the columns' correlation matrix, descending),
    ``variance_explained`` (their shares, summing to 1), ``cumulative`` and
    ``loadings`` (p x p: column k = eigenvector k times sqrt(eigenvalue k): the
    correlation of each task with component k, sign fixed so the largest loading is positive).
    """
    z = _standardize(matrix)
    n = z.shape[0]
    corr = z.T @ z / (n - 1)
    ev, vec = np.linalg.eigh(corr)
    order = np.argsort(ev)[::-1]
    ev = np.clip(ev[order], 0.0, None)
    vec = vec[:, order]
    signs = np.sign(vec[np.argmax(np.abs(vec), axis=0), np.arange(vec.shape[1])])
    vec = vec * np.where(signs == 0, 1.0, signs)
    share = ev / ev.sum()
    return {
        "eigenvalues": ev,
        "variance_explained": share,
        "cumulative": np.cumsum(share),
        "loadings": vec * np.sqrt(ev),
    }


def parallel_analysis(
    matrix: Any, n_permutations: int = 1000, seed: int = 0, quantile: float = 0.95
) -> ParallelAnalysis:
    """Horn's parallel analysis with column-permuted nulls.

    Each null permutes every column of the standardized matrix independently (keeping each
    task's distribution, breaking the association between tasks) and takes the eigenvalues of
    its correlation matrix.  Component k is retained when the observed k-th eigenvalue
    exceeds the ``quantile`` (95th percentile) of the null k-th eigenvalues; ``n_components``
    counts the leading components retained (it stops at the first that is not).
    """
    z = _standardize(matrix)
    observed = _eigenvalues(z)
    rng = np.random.default_rng(seed)
    nulls = rng.permuted(np.broadcast_to(z, (n_permutations, *z.shape)), axis=1)
    null_ev = _eigenvalues(nulls)
    threshold = np.quantile(null_ev, quantile, axis=0)
    above = observed > threshold
    n_comp = int(np.argmin(above)) if not above.all() else int(len(above))
    return {
        "observed": observed,
        "threshold": threshold,
        "retained": above,
        "n_components": n_comp,
        "n_permutations": int(n_permutations),
        "seed": int(seed),
        "quantile": float(quantile),
    }


# --------------------------------------------------------------------------- bootstrap


def bootstrap_indices(n_items: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, n_items) question indices drawn with replacement."""
    if n_items < 1:
        raise ValueError("bootstrap over questions needs at least one question")
    return rng.integers(0, n_items, size=(n_resamples, n_items))


def resample_counts(indices: np.ndarray, n_items: int) -> np.ndarray:
    """(B, n) how often each item was drawn in each resample (rows of ``indices``)."""
    b = indices.shape[0]
    flat = (indices + n_items * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n_items).reshape(b, n_items).astype(float)


def bootstrap_task_scores(scores: Any, valid: Any, use_valid: Any, counts: np.ndarray) -> np.ndarray:
    """(B, M) task scores of M models under resample counts (B, n).

    ``scores``, ``valid``: (M, n) per-item score and validity; ``use_valid``: (M,) whether a
    model's denominator is the valid answers (else all items).  NaN where a model has no
    valid answer in a resample under a valid-only denominator.
    """
    s = np.asarray(scores, dtype=float)
    v = np.asarray(valid, dtype=float)
    uv = np.broadcast_to(np.asarray(use_valid, dtype=bool), (s.shape[0],))
    stacked = np.concatenate([s, s * v, v], axis=0).T  # (n, 3M)
    sums = counts @ stacked  # (B, 3M)
    m = s.shape[0]
    total = sums[:, :m] / counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        # The mutation check's equivalent entries (tools/mutants_equivalent.toml) quote these lines as written.
        # fmt: off
        valid_mean = np.where(sums[:, 2 * m:] > 0, sums[:, m:2 * m] / np.where(sums[:, 2 * m:] > 0, sums[:, 2 * m:], 1), np.nan)
        # fmt: on
    return np.where(uv[None, :], valid_mean, total)


@dataclass
class TaskItems:
    """One task under one pipeline: per-item matrices over the same questions for every model."""

    scores: np.ndarray  # (M, n) per-item score
    valid: np.ndarray  # (M, n) bool
    use_valid: np.ndarray  # (M,) bool: the model's denominator is "valid"
    lower_is_better: bool

    def point_scores(self) -> np.ndarray:
        """(M,) task scores over all n items (no resampling)."""
        ones = np.ones((1, self.scores.shape[1]))
        return np.asarray(bootstrap_task_scores(self.scores, self.valid, self.use_valid, ones)[0], dtype=float)


def paired_bootstrap(
    tasks_a: Sequence[TaskItems],
    tasks_b: Sequence[TaskItems],
    n_resamples: int = 5000,
    seed: int = 0,
    return_indices: bool = False,
) -> PairedBootstrap:
    """Paired bootstrap over questions of one benchmark's ranking under pipelines A and B.

    ``tasks_a[t]`` and ``tasks_b[t]`` are the same task under A and B, with items in the same
    order and models in the same order.  For each task (in the order given) one (B, n) index
    array is drawn from ``np.random.default_rng(seed)``; it serves every model and both
    pipelines.  Returns the point estimates (``rank_a``, ``rank_b``, ``mean_rank_a/b``,
    ``rho``) and per resample ``boot_rank_a``, ``boot_rank_b`` (B, M) and ``boot_rho`` (B,);
    with ``return_indices`` also the index arrays.
    """
    if len(tasks_a) != len(tasks_b) or not tasks_a:
        raise ValueError("paired_bootstrap: the same, non-empty list of tasks is needed under both pipelines")
    rng = np.random.default_rng(seed)
    point: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    boot: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    indices: list[np.ndarray] = []
    for ta, tb in zip(tasks_a, tasks_b):
        if ta.scores.shape != tb.scores.shape:
            raise ValueError(f"paired_bootstrap: item matrices differ in shape: {ta.scores.shape} vs {tb.scores.shape}")
        n = ta.scores.shape[1]
        idx = bootstrap_indices(n, n_resamples, rng)
        if return_indices:
            indices.append(idx)
        counts = resample_counts(idx, n)
        for key, t in (("a", ta), ("b", tb)):
            point[key].append(rank_scores(t.point_scores(), t.lower_is_better))
            # The mutation check's equivalent entries (tools/mutants_equivalent.toml) quote these lines as written.
            # fmt: off
            boot[key].append(rank_scores(bootstrap_task_scores(t.scores, t.valid, t.use_valid, counts),
                                         t.lower_is_better, axis=1))
            # fmt: on
    mean_a, rank_a = mean_rank_ranking(point["a"])
    mean_b, rank_b = mean_rank_ranking(point["b"])
    _, boot_a = mean_rank_ranking(np.stack(boot["a"]))
    _, boot_b = mean_rank_ranking(np.stack(boot["b"]))
    out: PairedBootstrap = {
        "rank_a": rank_a,
        "rank_b": rank_b,
        "mean_rank_a": mean_a,
        "mean_rank_b": mean_b,
        "rho": _none_if_nan(rowwise_spearman(rank_a[None, :], rank_b[None, :])[0]),
        "boot_rank_a": boot_a,
        "boot_rank_b": boot_b,
        "boot_rho": rowwise_spearman(boot_a, boot_b),
    }
    if return_indices:
        out["indices"] = indices
    return out


def direction_stability(
    shift: Sequence[float], boot_rank_a: np.ndarray, boot_rank_b: np.ndarray, min_shift: float = 3
) -> list[float | None]:
    """Per model with ``|shift| >= min_shift`` (shift = rank_a - rank_b): the share of resamples
    in which ``rank_a - rank_b`` has the same sign as ``shift``; ``None`` for smaller shifts."""
    s = np.asarray(shift, dtype=float)
    boot_shift = np.asarray(boot_rank_a, dtype=float) - np.asarray(boot_rank_b, dtype=float)
    same = (np.sign(boot_shift) == np.sign(s)[None, :]).mean(axis=0)
    return [float(same[i]) if abs(s[i]) >= min_shift else None for i in range(len(s))]


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> list[float] | None:
    """Percentile interval of the finite samples; ``None`` when there are none."""
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return None
    lo, hi = np.quantile(x, [(1 - level) / 2, 1 - (1 - level) / 2])
    return [float(lo), float(hi)]
