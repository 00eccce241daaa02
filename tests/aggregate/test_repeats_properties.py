"""aggregate/repeats.py's reducers and repeat statistics against hand counts and brute force (issue 33,
item 15: the mutation check).

Expected values are computed here without the module: every k-subset enumerated with itertools (best
and worst of k, pass@k), ``statistics.stdev`` and ``statistics.median_low``, and questions counted by
hand.  Each test kills mutants that the other repeats tests let through (questions asked once counted
in retest agreement, a tie taken for a majority, the boundaries of k and n).
"""

from __future__ import annotations

import itertools
import statistics
from math import comb

import pytest
from hypothesis import given, settings, strategies as st

from pytest_benchaudit.aggregate.repeat_stats import (expected_best_of_k, pass_at_k, reduce_scores, reduce_verdicts,
                                                 retest_agreement, sampling_sd)


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
@given(values=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), min_size=1, max_size=6),
       k=st.integers(1, 8), lower_is_better=st.booleans())
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
