"""aggregate/intervals.py at the boundaries the mutation check found untested (issue 33, item 15).

Expected intervals come from statsmodels' Wilson interval (``proportion_confint(method="wilson")``),
with a t quantile put in through the identity the module states (Wilson with quantile t on n trials is
Wilson with z on ``n (z / t)^2``), the cluster-robust standard error from statsmodels' OLS, and
quantiles from scipy; none of them calls the module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from pytest_benchaudit.aggregate import intervals

Z = stats.norm.ppf(0.975)


def sm_wilson(p: float, n: float, q: float = Z) -> list[float]:
    """Wilson's interval of a share p on n (possibly fractional) trials with quantile q, by statsmodels."""
    trials = n * (Z / q) ** 2
    lo, hi = proportion_confint(p * trials, trials, alpha=0.05, method="wilson")
    return [round(float(lo), 6), round(float(hi), 6)]


def cr1(values: list[float], clusters: list[str]) -> float:
    codes = np.unique(clusters, return_inverse=True)[1]
    fit = sm.OLS(np.array(values), np.ones(len(values))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    return float(fit.bse[0])


def test_the_normal_quantile_without_degrees_of_freedom() -> None:
    assert intervals.t_quantile(None) == pytest.approx(Z)
    assert intervals.t_quantile(None, 0.9) == pytest.approx(stats.norm.ppf(0.9))
    assert intervals.t_quantile(None, 0.995) == pytest.approx(stats.norm.ppf(0.995))
    assert intervals.t_quantile(3, 0.9) == pytest.approx(stats.t.ppf(0.9, 3))


def test_wilson_is_statsmodels_to_six_places_and_needs_trials() -> None:
    for p, n in ((0.3, 7), (0.123, 13.7), (0.95, 40), (0.0, 5), (1.0, 5)):
        assert intervals.wilson(p, n) == sm_wilson(p, n), (p, n)
    assert intervals.wilson(0.3, 7, stats.t.ppf(0.975, 4)) == sm_wilson(0.3, 7, stats.t.ppf(0.975, 4))
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="needs n > 0"):
            intervals.wilson(0.5, bad)


def test_effective_n_is_the_units_when_the_share_has_no_spread() -> None:
    # p = 0 or 1: no design effect can be measured, whatever se says
    assert intervals.effective_n(0.0, 0.1, 10) == 10.0 and intervals.effective_n(1.0, 0.05, 7) == 7.0
    assert intervals.effective_n(0.5, None, 9) == 9.0 and intervals.effective_n(0.5, 0.0, 9) == 9.0
    assert intervals.effective_n(0.5, 0.25, 9) == pytest.approx(4.0)  # 0.25 / 0.0625
    assert intervals.effective_n(0.5, 0.01, 9) == 9.0  # never more than the units


def test_a_share_is_a_higher_is_better_score_within_zero_one() -> None:
    assert intervals.is_share_scores([0.0, 0.5, 1.0], False)
    assert not intervals.is_share_scores([0.5, 2.0], False) and not intervals.is_share_scores([0.5, 1.5], False)
    assert not intervals.is_share_scores([0.5, -0.1], False)
    assert not intervals.is_share_scores([0.5], True)


def test_a_share_of_two_questions_takes_t_with_one_degree_of_freedom() -> None:
    values = [0.5, 1.0]
    se = float(stats.sem(values))  # 0.25: n_eff = min(2, 0.1875 / 0.0625) = 2
    got = intervals.headline_interval(values, share=True)
    assert got == (sm_wilson(0.75, min(2, 0.1875 / se**2), stats.t.ppf(0.975, 1)), "wilson_effective_n")
    # one question (a mean of its records): z, on its records
    assert intervals.headline_interval([0.5], share=True, units=1) == (sm_wilson(0.5, 1), "wilson_effective_n")
    assert intervals.headline_interval([0.5], share=True, units=4) == (sm_wilson(0.5, 4), "wilson_effective_n")


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_clustered_zero_one_scores_are_n_trials_whatever_the_records(value: float) -> None:
    """20/20 (or 0/20) questions, each asked three times (60 records), in 4 groups: Wilson on the 20
    questions with t(3), as the plain interval counts them, not on the 60 records."""
    values = [value] * 20
    groups = [f"g{i % 4}" for i in range(20)]
    got = intervals.clustered_interval(values, groups, share=True, units=60)
    assert got == (sm_wilson(value, 20, stats.t.ppf(0.975, 3)), "wilson_effective_n")


def test_a_clustered_share_of_means_is_capped_by_its_records() -> None:
    """Per-question means near 0.5 vary less than 0/1 answers would: the design-effect n exceeds the
    questions, and the cap is the records behind them (units), or the questions when units is not given."""
    values = [0.5, 0.6, 0.4, 0.5, 0.45, 0.55]
    groups = ["a", "b", "c", "a", "b", "c"]
    mean = float(np.mean(values))
    se = max(cr1(values, groups), float(stats.sem(values)))
    spread = mean * (1 - mean)
    assert spread / se**2 > 30  # the cap binds
    t2 = stats.t.ppf(0.975, 2)
    assert intervals.clustered_interval(values, groups, share=True, units=30) == (
        sm_wilson(mean, 30, t2),
        "wilson_effective_n",
    )
    assert intervals.clustered_interval(values, groups, share=True) == (sm_wilson(mean, 6, t2), "wilson_effective_n")
