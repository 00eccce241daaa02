"""The variance decomposition against statsmodels' factorial ANOVA, and its properties (hypothesis).

On a full factorial with one observation per cell, the sums of squares of the main effects and two-way
interactions are those ``statsmodels.stats.anova.anova_lm`` gives for ``y ~ C(a) + C(b) + C(c) +
C(a):C(b) + C(a):C(c) + C(b):C(c)`` (any type: the design is balanced), its residual the three-way
interaction; the shares add to 100%; a field that does not move the score explains 0.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.multiverse.variance import decompose

pd = pytest.importorskip("pandas", reason="statsmodels' ANOVA needs pandas (pip install statsmodels)")
smf = pytest.importorskip("statsmodels.formula.api", reason="the ANOVA oracle needs statsmodels (test extra)")
anova = pytest.importorskip("statsmodels.stats.anova", reason="the ANOVA oracle needs statsmodels (test extra)")

FIELDS = ["a", "b", "c"]


def _factorial(n_levels: list[int]) -> list[tuple[int, ...]]:
    return list(itertools.product(*[range(n) for n in n_levels]))


@pytest.mark.parametrize("n_levels", [[2, 3, 2], [3, 2, 4], [2, 2, 2]])
def test_sums_of_squares_are_statsmodels_anova(n_levels: list[int]) -> None:
    rng = np.random.default_rng(sum(n_levels))
    levels = _factorial(n_levels)
    y = rng.normal(size=len(levels)) + [0.8 * a - 0.5 * (b == 1) + 0.3 * a * c for a, b, c in levels]
    d = decompose(levels, [list(y)], FIELDS, n_levels)
    frame = pd.DataFrame(levels, columns=FIELDS).assign(y=y)
    fit = smf.ols("y ~ C(a) + C(b) + C(c) + C(a):C(b) + C(a):C(c) + C(b):C(c)", data=frame).fit()
    table = anova.anova_lm(fit, typ=2)
    for f in FIELDS:
        assert d.main[f] == pytest.approx(table.loc[f"C({f})", "sum_sq"], rel=1e-9, abs=1e-12)
    for f, g in itertools.combinations(FIELDS, 2):
        assert d.interactions[(f, g)] == pytest.approx(table.loc[f"C({f}):C({g})", "sum_sq"], rel=1e-9, abs=1e-12)
    assert d.higher_order == pytest.approx(table.loc["Residual", "sum_sq"], rel=1e-9, abs=1e-12)
    assert d.total == pytest.approx(float(((y - y.mean()) ** 2).sum()), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    n_levels=st.lists(st.integers(1, 3), min_size=2, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    models=st.integers(1, 3),
)
def test_shares_add_to_100_percent_in_a_full_factorial(n_levels: list[int], seed: int, models: int) -> None:
    fields = [f"f{i}" for i in range(len(n_levels))]
    levels = _factorial(n_levels)
    rng = np.random.default_rng(seed)
    ys = [list(rng.normal(size=len(levels)) * 10.0 ** rng.integers(-3, 3)) for _ in range(models)]
    d = decompose(levels, ys, fields, n_levels)
    shares = [d.field_share(f) for f in d.fields]
    assert all(s >= -1e-12 for s in shares) and d.share(d.higher_order) >= -1e-9
    if d.total > 1e-18:
        assert sum(shares) + d.share(d.higher_order) == pytest.approx(1.0, abs=1e-9)
    assert set(d.fields) == {f for f, n in zip(fields, n_levels) if n > 1}  # a one-value field is no factor


@settings(max_examples=40, deadline=None)
@given(n_levels=st.lists(st.integers(2, 3), min_size=3, max_size=3), seed=st.integers(0, 2**32 - 1))
def test_a_field_that_moves_nothing_explains_nothing(n_levels: list[int], seed: int) -> None:
    """The score depends on the first two fields only: the third's share is exactly 0 (its marginal and
    joint means equal the others'), whatever the other effects."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(size=(n_levels[0], n_levels[1]))
    levels = _factorial(n_levels)
    y = [float(effect[a, b]) for a, b, _c in levels]
    d = decompose(levels, [y], FIELDS, n_levels)
    assert d.field_share("c") == pytest.approx(0.0, abs=1e-12)
    assert d.main["c"] == pytest.approx(0.0, abs=1e-12)


def test_no_variance_gives_zero_shares() -> None:
    levels = _factorial([2, 2])
    d = decompose(levels, [[0.5] * 4, [0.7] * 4], ["x", "y"], [2, 2])
    assert d.total == 0 and d.field_share("x") == 0 and d.share(d.higher_order) == 0
