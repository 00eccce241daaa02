"""aggregate/repeat_stats.py's reducers and repeat statistics against hand counts and brute force (issue 33,
item 15: the mutation check).

Expected values are computed here without the module: every k-subset enumerated with itertools (best
and worst of k, pass@k), ``statistics.stdev`` and ``statistics.median_low``, and questions counted by
hand.  Each test kills mutants that the other repeats tests let through (questions asked once counted
in retest agreement, a tie taken for a majority, the boundaries of k and n).
"""

from __future__ import annotations

import itertools
import math
import statistics
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from pytest_benchaudit.aggregate.repeat_stats import (
    clt_se,
    clustered_se,
    expected_best_of_k,
    normal_ci,
    paired_difference,
    pass_at_k,
    questions_needed,
    reduce_scores,
    reduce_verdicts,
    retest_agreement,
    sampling_sd,
)


def brute_best(values: list[float], k: int) -> float:
    subsets = list(itertools.combinations(values, k))
    return sum(max(s) for s in subsets) / len(subsets)


def brute_worst(values: list[float], k: int) -> float:
    subsets = list(itertools.combinations(values, k))
    return sum(min(s) for s in subsets) / len(subsets)


# --------------------------------------------------------------------------- retest agreement, sampling SD


def test_retest_agreement_counts_only_questions_asked_at_least_twice() -> None:
    verdicts = [[True], [False], [True, True], [True, False], [False, False, False], [True, True, False, True]]
    # asked twice or more: 4 questions, of which 2 ([T, T] and [F, F, F]) agree every time
    assert retest_agreement(verdicts) == pytest.approx(2 / 4)
    assert retest_agreement([[True], [False]]) is None  # nobody was asked twice
    assert retest_agreement([]) is None
    assert retest_agreement([[False, False]]) == 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=8))
def test_sampling_sd_is_the_sample_standard_deviation(values: list[float]) -> None:
    got = sampling_sd(values)
    if len(values) < 2:
        assert got is None
    else:
        assert got == pytest.approx(statistics.stdev(values), abs=1e-9)


# --------------------------------------------------------------------------- reducers


def test_verdicts_any_all_and_a_strict_majority() -> None:
    assert reduce_verdicts([False, False, True], "any") and not reduce_verdicts([False, False], "any")
    assert reduce_verdicts([True, True], "all") and not reduce_verdicts([True, False], "all")
    assert not reduce_verdicts([], "all") and not reduce_verdicts([], "any")
    for reducer in ("mean", "majority"):
        assert reduce_verdicts([True, True, False], reducer)
        assert not reduce_verdicts([True, False], reducer)  # a tie is no majority
        assert not reduce_verdicts([True, False, False, True], reducer)
        assert not reduce_verdicts([False, False, True], reducer)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), min_size=1, max_size=6),
    k=st.integers(1, 8),
    lower_is_better=st.booleans(),
)
def test_reducers_equal_brute_force_over_k_subsets(values: list[float], k: int, lower_is_better: bool) -> None:
    kk = min(k, len(values))
    best, worst = (brute_worst, brute_best) if lower_is_better else (brute_best, brute_worst)
    assert reduce_scores(values, "any", lower_is_better, k) == pytest.approx(best(values, kk))
    assert reduce_scores(values, "all", lower_is_better, k) == pytest.approx(worst(values, kk))
    assert reduce_scores(values, "any", lower_is_better) == pytest.approx(best(values, len(values)))
    assert reduce_scores(values, "all", lower_is_better) == pytest.approx(worst(values, len(values)))
    assert reduce_scores(values, "mean", lower_is_better) == pytest.approx(statistics.fmean(values))
    oriented = [-v for v in values] if lower_is_better else values
    low = statistics.median_low(oriented)
    assert reduce_scores(values, "majority", lower_is_better) == pytest.approx(-low if lower_is_better else low)


def test_majority_of_an_error_metric_is_the_worse_middle_value() -> None:
    # MAD repeats 1, 3: the lower median of "better is larger" is the worse one, 3
    assert reduce_scores([1.0, 3.0], "majority", lower_is_better=True) == 3.0
    assert reduce_scores([1.0, 3.0], "majority") == 1.0
    assert reduce_scores([0.0, 1.0, 1.0], "majority") == 1.0
    with pytest.raises(ValueError, match="no scores"):
        reduce_scores([], "mean")
    with pytest.raises(ValueError, match="unknown reducer"):
        reduce_scores([1.0], "median")  # type: ignore[arg-type]


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (4, 0), (4, 4), (5, 2), (6, 3)])
def test_pass_at_k_equals_enumeration_at_every_k(n: int, c: int) -> None:
    outcomes = [1.0] * c + [0.0] * (n - c)
    for k in range(1, n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(brute_best(outcomes, k))
        assert expected_best_of_k(outcomes, k) == pytest.approx(brute_best(outcomes, k))
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_best_of_k_refuses_k_outside_one_to_n() -> None:
    assert expected_best_of_k([0.2, 0.9, 0.4], 3) == 0.9
    assert expected_best_of_k([0.2, 0.9, 0.4], 1) == pytest.approx(0.5)
    for k in (0, 4):
        with pytest.raises(ValueError, match="best of k"):
            expected_best_of_k([0.2, 0.9, 0.4], k)


def test_all_of_one_verdict_is_that_verdict() -> None:
    assert reduce_verdicts([True], "all") and not reduce_verdicts([False], "all")


# --------------------------------------------------------------------------- standard errors at their boundaries


def test_standard_errors_start_at_two_questions_and_two_groups() -> None:
    assert clt_se([0.0, 1.0]) == pytest.approx(float(sps.sem([0.0, 1.0])))  # 0.5
    assert clt_se([1.0]) is None
    # two questions in two groups: groups of one, the CLT standard error exactly
    assert clustered_se([0.0, 1.0], ["a", "b"]) == pytest.approx(0.5)
    # two groups of two: CR1 = sqrt(G/(G-1) sum_c (sum of deviations)^2) / n, by hand: sums +-1 -> sqrt(2 * 2) / 4
    assert clustered_se([1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "b"]) == pytest.approx(0.5)
    assert clustered_se([1.0], ["a"]) is None and clustered_se([1.0, 0.0], ["a", "a"]) is None


def test_normal_ci_needs_both_and_rounds_to_six_places() -> None:
    assert normal_ci(0.5, None) is None and normal_ci(None, 0.1) is None
    assert normal_ci(0.1234567, 0.0) == [0.123457, 0.123457]
    assert normal_ci(0.5, 0.1) == [round(0.5 - 1.959964 * 0.1, 6), round(0.5 + 1.959964 * 0.1, 6)]


def test_questions_needed_boundaries() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        questions_needed(0.0, 0.2, 0.1, 1)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        questions_needed(0.1, 0.2, 0.1, 0)
    # one repeat is allowed: ceil(2.8016^2 * 0.3 / 0.01) = 236 (z from the standard normal, by hand)
    assert questions_needed(0.1, 0.2, 0.1, 1) == math.ceil(2.801585**2 * 0.3 / 0.01)
    assert questions_needed(1.0, 1e-6, 0.0, 1) == 2  # never under two questions, even for a huge difference


# --------------------------------------------------------------------------- paired difference: every field


FIELDS = {"n", "diff", "se", "ci95", "p_value", "test", "mde80"}


def _scipy_paired(a: list[float], b: list[float]) -> dict[str, object]:
    d = np.array(a) - np.array(b)
    se = float(sps.sem(d))
    z, z80 = sps.norm.ppf(0.975), sps.norm.ppf(0.80)
    return {
        "n": len(d),
        "diff": float(d.mean()),
        "se": se,
        "ci95": [d.mean() - z * se, d.mean() + z * se],
        "mde80": (z + z80) * d.std(ddof=1) / math.sqrt(len(d)),
    }


def test_paired_difference_binary_every_field_is_scipy_s() -> None:
    rng = np.random.default_rng(21)
    a = (rng.random(40) < 0.7).astype(float).tolist()
    b = (rng.random(40) < 0.5).astype(float).tolist()
    out = paired_difference(a, b, True)
    assert set(out) == FIELDS | {"discordant"}
    want = _scipy_paired(a, b)
    only = [sum(1 for x, y in zip(a, b) if x > y), sum(1 for x, y in zip(a, b) if y > x)]
    assert out["discordant"] == only and out["test"] == "mcnemar_exact" and out["n"] == 40
    assert out["p_value"] == pytest.approx(sps.binomtest(only[0], sum(only), 0.5).pvalue)
    for key in ("diff", "se", "mde80"):
        assert out[key] == pytest.approx(want[key]), key
    assert out["ci95"] == pytest.approx(want["ci95"], abs=1e-6)


def test_paired_difference_continuous_every_field_is_scipy_s() -> None:
    rng = np.random.default_rng(22)
    a = rng.random(30).tolist()
    b = (np.array(a) + rng.normal(0.05, 0.2, 30)).tolist()
    out = paired_difference(a, b, False)
    assert set(out) == FIELDS and out["test"] == "paired_t"
    assert out["p_value"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    want = _scipy_paired(a, b)
    for key in ("n", "diff", "se", "mde80"):
        assert out[key] == pytest.approx(want[key]), key


@pytest.mark.parametrize("binary", [True, False])
def test_paired_difference_clustered_is_statsmodels_cluster_robust_t(binary: bool) -> None:
    """se = max(CR1 of d (statsmodels' cluster-robust SE of an intercept-only OLS), SD(d)/sqrt(n)); the
    test a t on G - 1 degrees of freedom (scipy), the CI diff -/+ t(G-1) se, mde80 (t_.975 + t_.80) se."""
    import statsmodels.api as sm

    rng = np.random.default_rng(23 + binary)
    groups = [f"g{i % 5}" for i in range(35)]
    shared = {f"g{g}": s for g, s in enumerate([0.3, -0.2, 0.4, 0.1, 0.25])}
    if binary:
        a = [float(rng.random() < 0.5 + shared[g] / 2) for g in groups]
        b = [float(rng.random() < 0.5 - shared[g] / 2) for g in groups]
    else:
        a = [0.5 + shared[g] + rng.normal(0, 0.1) for g in groups]
        b = [0.5 + rng.normal(0, 0.1) for _ in groups]
    out = paired_difference(a, b, binary, groups)
    d = np.array(a) - np.array(b)
    codes = np.array([int(g[1:]) for g in groups])
    cr1 = float(sm.OLS(d, np.ones(len(d))).fit(cov_type="cluster", cov_kwds={"groups": codes}).bse[0])
    se = max(cr1, float(sps.sem(d)))
    assert set(out) == FIELDS | {"n_groups", "se_clustered"} | ({"discordant"} if binary else set())
    assert (out["test"], out["n_groups"], out["n"]) == ("clustered_t", 5, 35)
    assert out["se_clustered"] == pytest.approx(cr1, rel=1e-9) and out["se"] == pytest.approx(se, rel=1e-9)
    assert out["diff"] == pytest.approx(d.mean())
    q = sps.t.ppf(0.975, 4)
    assert out["ci95"] == pytest.approx([d.mean() - q * se, d.mean() + q * se], abs=1e-6)
    assert [round(x, 6) for x in out["ci95"]] == out["ci95"]  # rounded to 6 places, as every interval
    assert out["p_value"] == pytest.approx(2 * sps.t.sf(abs(d.mean()) / se, 4), rel=1e-9)
    assert out["mde80"] == pytest.approx((q + sps.t.ppf(0.80, 4)) * se, rel=1e-9)


def test_a_clustered_difference_uses_the_plain_se_when_it_is_larger() -> None:
    """Groups whose deviations cancel: CR1 comes out below SD(d)/sqrt(n), and the larger one is used."""
    a = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    b = [0.0] * 6
    groups = ["x", "x", "y", "y", "z", "z"]
    out = paired_difference(a, b, False, groups)
    assert out["se_clustered"] == pytest.approx(0.0, abs=1e-12)  # every group's sum of deviations is 0
    assert out["se"] == pytest.approx(float(sps.sem(a)))
    assert out["p_value"] == pytest.approx(2 * sps.t.sf(0.5 / float(sps.sem(a)), 2))


def test_a_clustered_difference_without_spread_is_p_one_or_zero() -> None:
    same = paired_difference([0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5], False, ["a", "a", "b", "b"])
    assert same["se"] == 0 and same["p_value"] == 1.0 and same["ci95"] == [0.0, 0.0]
    moved = paired_difference([0.7, 0.7, 0.7, 0.7], [0.5, 0.5, 0.5, 0.5], False, ["a", "a", "b", "b"])
    assert moved["se"] == pytest.approx(0.0, abs=1e-12) and moved["p_value"] == 0.0
    assert moved["test"] == "clustered_t" and moved["n_groups"] == 2


def test_a_constant_shift_is_p_zero_and_no_shift_p_one() -> None:
    shift = paired_difference([1.0, 0.5, 0.25], [0.75, 0.25, 0.0], False)  # every d exactly 0.25
    assert shift["p_value"] == 0.0 and shift["test"] == "paired_t" and shift["se"] == pytest.approx(0.0, abs=1e-12)
    none = paired_difference([0.9, 0.6, 0.4], [0.9, 0.6, 0.4], False)
    assert none["p_value"] == 1.0 and none["diff"] == 0.0
    # 0/1 answers all alike: no discordant question, McNemar's p is 1
    alike = paired_difference([1.0, 0.0, 1.0], [1.0, 0.0, 1.0], True)
    assert alike["p_value"] == 1.0 and alike["discordant"] == [0, 0] and alike["test"] == "mcnemar_exact"


def test_paired_difference_at_zero_one_and_two_questions() -> None:
    empty = paired_difference([], [], True)
    assert empty == {
        "n": 0,
        "diff": None,
        "se": None,
        "ci95": None,
        "p_value": None,
        "test": None,
        "mde80": None,
        "discordant": [0, 0],
    }
    one = paired_difference([1.0], [0.0], False)
    assert one["diff"] == 1.0 and one["test"] is None and one["se"] is None and one["p_value"] is None
    two = paired_difference([1.0, 0.0], [0.0, 0.0], False)
    assert two["test"] == "paired_t" and two["se"] == pytest.approx(0.5)
    one_group = paired_difference([1.0, 0.0], [0.0, 0.0], False, ["g", "g"])
    assert one_group["test"] is None and one_group["n_groups"] == 1 and one_group["se_clustered"] is None
    two_groups = paired_difference([1.0, 0.0], [0.0, 0.0], False, ["g", "h"])
    assert two_groups["test"] == "clustered_t" and two_groups["se"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one cluster per question"):
        paired_difference([1.0, 0.0], [0.0, 0.0], False, ["g"])
    with pytest.raises(ValueError, match="same questions"):
        paired_difference([1.0, 0.0], [0.0], False)
