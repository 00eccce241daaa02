"""Pair orders, the fields that flip them, and the rank intervals, on grids whose answer is known by hand
or by construction (a seeded simulation)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_benchaudit.compare.paired_rows import ModelAnswers
from pytest_benchaudit.multiverse.enumerate_specs import enumerate_specs
from pytest_benchaudit.multiverse.robustness import Grid, model_rows, pair_rows
from pytest_benchaudit.multiverse.space import Axis, AxisValue, TaskSpace


def _space(**fields: list[str]) -> TaskSpace:
    return TaskSpace(
        "b", "t", tuple(Axis(f, tuple(AxisValue(v, "x") for v in vs)) for f, vs in sorted(fields.items())), "suite"
    )


def _grid(space: TaskSpace, per_spec: list[dict[str, list[float]]], lower_is_better: bool = False) -> Grid:
    """A grid whose models answer ``per_spec[i][model]`` (one score per question) in specification i."""
    specs = list(enumerate_specs(space).specs)
    models = sorted(per_spec[0])
    scores, answers = [], []
    for scored in per_spec:
        scores.append({m: sum(v) / len(v) for m, v in scored.items()})
        answers.append(
            {m: ModelAnswers(m, sum(v) / len(v), {(f"q{i}", 0): x for i, x in enumerate(v)}) for m, v in scored.items()}
        )
    return Grid("b.t", space, specs, models, lower_is_better, "exact_match", scores, answers)


def test_a_pair_reversed_by_one_field_alone() -> None:
    """Hand count: 4 specifications (rule x denominator); B beats A exactly when denominator = valid."""
    space = _space(rule=["r1", "r2"], denominator=["total", "valid"])
    a, b = [1.0] * 6 + [0.0] * 4, [1.0] * 5 + [0.0] * 5  # 0.6 vs 0.5
    per_spec = []
    for spec in enumerate_specs(space).specs:
        values = spec.values(space)
        per_spec.append({"A": a, "B": b} if values["denominator"] == "total" else {"A": b, "B": a})
    (row,) = pair_rows(_grid(space, per_spec))
    assert (row["a_better"], row["b_better"], row["tied"]) == (0.5, 0.5, 0.0)
    assert row["order"] == "flips" and row["n_specs"] == 4
    assert row["flip_fields"] == [{"field": "denominator", "share": 1.0}]  # the rule alone never reverses it


def test_orders_hold_most_and_tie_and_the_better_model_is_a() -> None:
    space = _space(x=["1", "2", "3", "4", "5"])
    good, fair, poor = [1.0] * 9 + [0.0], [1.0] * 5 + [0.0] * 5, [1.0] + [0.0] * 9
    per_spec = [{"good": good, "fair": fair if i else good, "poor": poor, "twin": poor} for i in range(5)]
    rows = {(r["model_a"], r["model_b"]): r for r in pair_rows(_grid(space, per_spec))}
    assert rows[("good", "poor")]["order"] == "holds" and rows[("good", "poor")]["a_better"] == 1.0
    assert rows[("good", "fair")]["order"] == "most"  # tied in 1 of 5, never reversed
    assert rows[("good", "fair")]["tied"] == pytest.approx(0.2)
    twin = rows.get(("poor", "twin")) or rows[("twin", "poor")]
    assert twin["order"] == "tied" and twin["flip_fields"] == []
    # 9 of 10 against 1 of 10 on the same questions: exact McNemar p = 2 * 0.5**8 = 0.0078, Holm over 6 pairs
    assert rows[("good", "poor")]["significant"] == 1.0 and rows[("good", "poor")]["significant_a"] == 1.0


def test_lower_is_better_orders_by_the_smaller_score() -> None:
    space = _space(x=["1"])
    (row,) = pair_rows(_grid(space, [{"small": [0.5, 1.0], "large": [3.0, 4.0]}], lower_is_better=True))
    assert (row["model_a"], row["model_b"], row["order"]) == ("small", "large", "holds")


def test_rank_intervals_of_a_seeded_simulation() -> None:
    """Known truth: two models far apart are ranked 1 and 2 in every resample; two of the same accuracy
    share the ranks: each one's 95% interval runs from 1 to 2."""
    rng = np.random.default_rng(1)
    space = _space(x=["1", "2"])
    n = 400
    strong = list((rng.random(n) < 0.9).astype(float))
    weak = list((rng.random(n) < 0.1).astype(float))
    same_a = list((rng.random(n) < 0.5).astype(float))
    same_b = list((rng.random(n) < 0.5).astype(float))
    rows = {r["model"]: r for r in model_rows(_grid(space, [{"strong": strong, "weak": weak}] * 2), 500, 0)}
    assert rows["strong"]["rank_ci95"] == [1.0, 1.0] and rows["weak"]["rank_ci95"] == [2.0, 2.0]
    assert rows["strong"]["rank_min"] == rows["strong"]["rank_max"] == 1.0
    rows = {r["model"]: r for r in model_rows(_grid(space, [{"a": same_a, "b": same_b}] * 2), 500, 0)}
    assert rows["a"]["rank_ci95"] == [1.0, 2.0] and rows["b"]["rank_ci95"] == [1.0, 2.0]
    again = {r["model"]: r for r in model_rows(_grid(space, [{"a": same_a, "b": same_b}] * 2), 500, 0)}
    assert again == rows  # seeded


def test_the_distribution_and_its_ends() -> None:
    space = _space(x=["1", "2", "3"])
    per_spec = [{"m": [1.0, 0.0]}, {"m": [1.0, 1.0]}, {"m": [0.0, 0.0]}]
    (row,) = model_rows(_grid(space, per_spec), 0, 0)
    assert (row["median"], row["min"], row["max"]) == (0.5, 0.0, 1.0)
    assert (row["min_spec"], row["max_spec"]) == (2, 1) and row["rank_ci95"] is None
