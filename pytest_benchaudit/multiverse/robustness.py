"""Which conclusions survive a task's multiverse: score distributions, rank intervals, pair orders.

Read from a :class:`Grid`: every model's score (and per-question scores) under every enumerated
specification of one task.  docs/multiverse.md says what each number means; in short:

- **per model** (:func:`model_rows`): the median, minimum and maximum of its score over the
  specifications, the specification at each end, its rank in every specification (1 = best,
  direction-aware, ties averaged) as an interval ``rank_min``..``rank_max``, and ``rank_ci95``: the
  2.5% and 97.5% quantiles of its rank over resamples that draw the questions with replacement
  (the same draw for every model) *and* one specification at random, so the interval holds both the
  questions' sampling noise and the pipeline's choices;
- **per pair** (:func:`pair_rows`): in how many of the specifications where both have a score A is
  better, B is better, they tie; in how many the paired test of ``compare`` finds the difference
  significant (:func:`pytest_benchaudit.compare.paired_rows.paired_rows`, Holm over the task's pairs,
  per specification), and in whose favour.  A is the model better in more specifications (then the
  better median, then the name), so ``b_better`` is the share that flips the order: the order
  ``holds`` when it is 0 (and no tie), ``flips`` from a quarter on;
- **which fields flip a pair** (``flip_fields``): for each field, among the groups of enumerated
  specifications that differ in that field alone (all else equal), the share in which the two models'
  order differs: the field whose choice alone reverses the order.

Pure: numpy and the paired test, no I/O.
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pytest_benchaudit.aggregate.stats import rank_scores
from pytest_benchaudit.compare.paired_rows import ALPHA, ModelAnswers, PairedRow, holm, paired_rows

# a pair "flips" when the other order wins in at least this share of specifications (diagnose's BA07 too)
from pytest_benchaudit.diagnose.flips import FLIP_SHARE
from pytest_benchaudit.multiverse.enumerate_specs import Spec
from pytest_benchaudit.multiverse.mv_documents import FieldShare, ModelRow, Order, PairRow
from pytest_benchaudit.multiverse.space import TaskSpace

__all__ = ["FLIP_SHARE", "Grid", "model_rows", "pair_rows", "significance"]


@dataclass
class Grid:
    """One task's scores under each enumerated specification (``scores[i][model]``; ``answers[i]`` holds
    the models with a score, as :func:`~pytest_benchaudit.compare.paired_rows.model_answers` made them)."""

    key: str
    space: TaskSpace
    specs: list[Spec]
    models: list[str]
    lower_is_better: bool
    metric: str
    scores: list[dict[str, float | None]]
    answers: list[dict[str, ModelAnswers]]
    # per specification: (model, model) -> (significant, favoured model); filled by significance()
    tests: list[dict[tuple[str, str], tuple[bool, str | None]]] = field(default_factory=list)


def significance(grid: Grid) -> None:
    """Fill ``grid.tests``: per specification, each pair's paired test as ``compare`` makes it
    (:func:`~pytest_benchaudit.compare.paired_rows.paired_rows` on the pair, then Holm over the task's
    pairs with :func:`~pytest_benchaudit.compare.paired_rows.holm` at ``ALPHA``, as ``paired_rows`` does
    for a whole task).  A pair whose two models have the same per-question scores in two specifications
    is tested once."""
    tested: dict[tuple[int, int], PairedRow] = {}
    ids: dict[tuple[object, ...], int] = {}
    grid.tests = []
    for answers in grid.answers:
        models = sorted(answers)
        mine = {m: ids.setdefault((m, answers[m].headline, tuple(answers[m].scores.items())), len(ids)) for m in models}
        rows = []
        for i, x in enumerate(models):
            for y in models[i + 1 :]:
                row = tested.get((mine[x], mine[y]))
                if row is None:
                    (row,) = paired_rows(grid.key, [answers[x], answers[y]], grid.lower_is_better)
                    tested[(mine[x], mine[y])] = row
                rows.append(row)
        found: dict[tuple[str, str], tuple[bool, str | None]] = {}
        for row, adjusted in zip(rows, holm([r["p_value"] for r in rows])):
            verdict = (adjusted is not None and adjusted < ALPHA, row["favours"])
            found[(row["model_a"], row["model_b"])] = found[(row["model_b"], row["model_a"])] = verdict
        grid.tests.append(found)


def _better(x: float, y: float, lower_is_better: bool) -> int:
    """+1 when ``x`` is the better score, -1 when ``y`` is, 0 on a tie."""
    if x == y:
        return 0
    return 1 if (x < y) == lower_is_better else -1


def _ranks(grid: Grid) -> NDArray[np.float64]:
    """Ranks per specification (rows) and model (columns); NaN where the model has no score."""
    values = np.array([[np.nan if s.get(m) is None else s[m] for m in grid.models] for s in grid.scores], dtype=float)
    ranks = rank_scores(values, grid.lower_is_better, axis=1) if values.size else values
    return np.where(np.isnan(values), np.nan, ranks)


def model_rows(grid: Grid, resamples: int, seed: int) -> list[ModelRow]:
    """Per model: the score's distribution over the specifications and its rank intervals (module docstring)."""
    ranks = _ranks(grid)
    ci = _bootstrap_ranks(grid, resamples, seed)
    rows: list[ModelRow] = []
    for j, model in enumerate(grid.models):
        scored = [(s[model], spec.number) for s, spec in zip(grid.scores, grid.specs) if s.get(model) is not None]
        values = [float(v) for v, _n in scored if v is not None]
        best = grid.lower_is_better
        low = min(scored, key=lambda x: (x[0], x[1])) if scored else None
        high = max(scored, key=lambda x: (x[0], -x[1])) if scored else None
        r = ranks[:, j][~np.isnan(ranks[:, j])] if ranks.size else np.array([])
        rows.append(
            {
                "task": grid.key,
                "model": model,
                "metric": grid.metric,
                "lower_is_better": best,
                "n_specs": len(values),
                "median": statistics.median(values) if values else None,
                "min": low[0] if low else None,
                "max": high[0] if high else None,
                "min_spec": low[1] if low else None,
                "max_spec": high[1] if high else None,
                "rank_min": float(r.min()) if r.size else None,
                "rank_max": float(r.max()) if r.size else None,
                "rank_ci95": ci.get(model),
            }
        )
    return rows


def _bootstrap_ranks(grid: Grid, resamples: int, seed: int) -> dict[str, list[float]]:
    """Each model's 95% rank interval over ``resamples`` draws of (questions with replacement, one
    specification at random); the task's own seed is derived from ``seed`` and its name."""
    questions = sorted({q for answers in grid.answers for a in answers.values() for q in a.scores})
    if resamples < 1 or not questions or len(grid.models) < 2 or not grid.specs:
        return {}
    col = {q: i for i, q in enumerate(questions)}
    n_s, n_m, n_q = len(grid.specs), len(grid.models), len(questions)
    x = np.zeros((n_s, n_m, n_q))
    present = np.zeros((n_s, n_m, n_q))
    for i, answers in enumerate(grid.answers):
        for j, model in enumerate(grid.models):
            a = answers.get(model)
            if a is None:
                continue
            idx = [col[q] for q in a.scores]
            x[i, j, idx] = list(a.scores.values())
            present[i, j, idx] = 1.0
    rng = np.random.default_rng([seed, zlib.crc32(grid.key.encode())])
    out = np.empty((resamples, n_m))
    chunk = max(1, 4_000_000 // max(1, n_m * n_q))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        specs = rng.integers(0, n_s, size=size)
        weights = rng.multinomial(n_q, np.full(n_q, 1.0 / n_q), size=size).astype(float)
        num = np.einsum("bmq,bq->bm", x[specs], weights)
        den = np.einsum("bmq,bq->bm", present[specs], weights)
        means = np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)
        out[start : start + size] = rank_scores(means, grid.lower_is_better, axis=1)
    low = np.quantile(out, 0.025, axis=0, method="lower")
    high = np.quantile(out, 0.975, axis=0, method="higher")
    return {m: [float(low[j]), float(high[j])] for j, m in enumerate(grid.models)}


def pair_rows(grid: Grid) -> list[PairRow]:
    """Per pair of models: the shares of specifications in which each is better, they tie, the paired test
    is significant (each way), the order class and the fields that flip it (module docstring)."""
    if not grid.tests:
        significance(grid)
    rows: list[PairRow] = []
    medians: dict[str, float | None] = {}
    for m in grid.models:
        present = [v for s in grid.scores if (v := s.get(m)) is not None]
        medians[m] = statistics.median(present) if present else None
    for i, x in enumerate(grid.models):
        for y in grid.models[i + 1 :]:
            signs: list[int | None] = []
            for s in grid.scores:
                sx, sy = s.get(x), s.get(y)
                signs.append(None if sx is None or sy is None else _better(sx, sy, grid.lower_is_better))
            both = [k for k, v in enumerate(signs) if v is not None]
            if not both:
                continue
            wins_x = sum(1 for v in signs if v == 1)
            wins_y = sum(1 for v in signs if v == -1)
            a, b = (x, y) if _first_is_a(x, y, wins_x, wins_y, medians, grid.lower_is_better) else (y, x)
            oriented = [None if v is None else (v if a == x else -v) for v in signs]
            n = len(both)
            a_better = sum(1 for v in oriented if v == 1) / n
            b_better = sum(1 for v in oriented if v == -1) / n
            tests = [grid.tests[k].get((a, b)) for k in both]
            sig = [t for t in tests if t is not None and t[0]]
            order: Order = (
                "tied"
                if a_better == b_better == 0
                else "holds"
                if a_better == 1
                else "flips"
                if b_better >= FLIP_SHARE
                else "most"
            )
            rows.append(
                {
                    "task": grid.key,
                    "model_a": a,
                    "model_b": b,
                    "n_specs": n,
                    "a_better": a_better,
                    "b_better": b_better,
                    "tied": 1 - a_better - b_better,
                    "significant": len(sig) / n,
                    "significant_a": sum(1 for t in sig if t[1] == a) / n,
                    "significant_b": sum(1 for t in sig if t[1] == b) / n,
                    "order": order,
                    "flip_fields": _flip_fields(grid, oriented),
                }
            )
    return rows


def _first_is_a(
    x: str, y: str, wins_x: int, wins_y: int, medians: Mapping[str, float | None], lower_is_better: bool
) -> bool:
    """Whether ``x`` is model A: better in more specifications, then the better median, then the name."""
    if wins_x != wins_y:
        return wins_x > wins_y
    mx, my = medians.get(x), medians.get(y)
    if mx is not None and my is not None and mx != my:
        return _better(mx, my, lower_is_better) == 1
    return x < y


def _flip_fields(grid: Grid, signs: Sequence[int | None]) -> list[FieldShare]:
    """Per field, among the groups of specifications that differ in that field alone (all else equal,
    two or more with an order), the share in which the two models' order differs."""
    out: list[FieldShare] = []
    for j, axis in enumerate(grid.space.axes):
        if len(axis.values) < 2:
            continue
        groups: dict[tuple[int, ...], list[int]] = {}
        for spec, sign in zip(grid.specs, signs):
            if sign:  # a tie or a missing score is no order
                groups.setdefault(spec.levels[:j] + spec.levels[j + 1 :], []).append(sign)
        compared = [g for g in groups.values() if len(g) > 1]
        flipped = sum(1 for g in compared if len(set(g)) == 2)
        if flipped:
            out.append({"field": axis.field, "share": flipped / len(compared)})
    return sorted(out, key=lambda f: (-f["share"], f["field"]))
