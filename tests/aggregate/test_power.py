"""aggregate/power.py against oracles it does not use (issue 33, item 15: the mutation check).

McNemar's exact power is recomputed by brute force (every discordant count m, every split k, scipy's
``binomtest`` deciding each), the paired t test's power by statsmodels' ``TTestPower``, the normal
quantiles by ``scipy.stats.norm``, and the variance components with numpy on hand-made score tables.
The plan's rows are checked for the fewest questions that reach the power (the row's n reaches it,
n - 1 does not) with the test compare runs.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import special, stats
from statsmodels.stats.power import TTestPower

from pytest_benchaudit.aggregate import power
from pytest_benchaudit.aggregate.power import Variances


@functools.cache
def rejecting(m: int, alpha: float) -> tuple[bool, ...]:
    """For each split k of m discordant questions, whether the two-sided exact binomial test at p = 1/2
    rejects: its p-value is the chance of every split no likelier than k (scipy's binomtest rule, checked
    against binomtest itself in :func:`test_the_brute_force_p_values_are_binomtest_s`)."""
    pmf = stats.binom.pmf(np.arange(m + 1), m, 0.5)
    return tuple(bool(pmf[pmf <= x * (1 + 1e-7)].sum() < alpha) for x in pmf)


def brute_mcnemar(n: int, psi: float, mde: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact McNemar test, summed over every outcome (m, k)."""
    psi = max(psi, mde)
    q = (psi + mde) / (2 * psi)
    total = 0.0
    for m in range(1, n + 1):
        reject = np.array(rejecting(m, alpha))
        total += stats.binom.pmf(m, n, psi) * float(stats.binom.pmf(np.arange(m + 1), m, q)[reject].sum())
    return total


def test_the_brute_force_p_values_are_binomtest_s() -> None:
    for m in (1, 2, 7, 20, 33):
        for alpha in (0.05, 0.01):
            assert list(rejecting(m, alpha)) == [stats.binomtest(k, m).pvalue < alpha for k in range(m + 1)]


# --------------------------------------------------------------------------- quantiles and the normal plan


def test_z_total_is_scipy_s_and_refuses_levels_outside_zero_one() -> None:
    assert power.z_total(0.05, 0.80) == pytest.approx(stats.norm.ppf(0.975) + stats.norm.ppf(0.80))
    assert power.z_total(0.01, 0.9) == pytest.approx(stats.norm.ppf(0.995) + stats.norm.ppf(0.9))
    for alpha in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="alpha must lie in"):
            power.z_total(alpha, 0.8)
    for p in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="power must lie in"):
            power.z_total(0.05, p)


def test_questions_for_is_the_closed_form_with_its_floor_of_two() -> None:
    v = Variances(between=0.1, within=0.3, source="given")
    for k, alpha, pw in ((1, 0.05, 0.8), (3, 0.01, 0.9), (10, 0.05, 0.8)):
        z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(pw)
        assert power.questions_for(0.05, v, k, alpha, pw) == math.ceil(z * z * (0.1 + 0.3 / k) / 0.05**2)
    assert power.questions_for(0.05, v, 1) == power.questions_for(0.05, v, 1, 0.05, 0.80)  # the defaults
    assert power.questions_for(5.0, v, 1) == 2
    for bad in (0.0, -0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="the difference to detect must be a number > 0"):
            power.questions_for(bad, v, 1)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        power.questions_for(0.1, v, 0)
    assert power.questions_for(0.1, v, 1) > 2  # one repeat is allowed


def test_float_noise_above_a_whole_number_of_questions_adds_no_question() -> None:
    # a variance that puts the closed form 3e-10 above 236 (noise, not a 237th question); 1e-6 above is not noise
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.80)
    for excess, expected in ((3e-10, 236), (1e-6, 237)):
        v = Variances(between=(236 + excess) * 0.01 / (z * z), within=0.0, source="given")
        assert power.questions_for(0.1, v, 1) == expected, excess


def test_variances_total_divides_the_within_part_by_the_repeats() -> None:
    v = Variances(between=0.2, within=0.6, source="given")
    assert v.total(1) == pytest.approx(0.8) and v.total(3) == pytest.approx(0.4)


# --------------------------------------------------------------------------- McNemar's exact power


@pytest.mark.parametrize(
    "n,psi,mde,alpha",
    [(12, 0.4, 0.2, 0.05), (25, 0.3, 0.1, 0.05), (30, 0.5, 0.25, 0.01), (18, 0.05, 0.2, 0.05), (40, 0.9, 0.3, 0.10)],
)
def test_mcnemar_power_is_the_sum_over_every_outcome(n: int, psi: float, mde: float, alpha: float) -> None:
    assert power.mcnemar_power(n, psi, mde, alpha) == pytest.approx(brute_mcnemar(n, psi, mde, alpha), abs=1e-10)


def test_mcnemar_power_default_level_and_refusals() -> None:
    assert power.mcnemar_power(25, 0.3, 0.1) == pytest.approx(brute_mcnemar(25, 0.3, 0.1, 0.05), abs=1e-10)
    assert power.mcnemar_power(10, 0.3, 1.0) == pytest.approx(brute_mcnemar(10, 0.3, 1.0), abs=1e-10)  # mde 1 allowed
    assert power.mcnemar_power(10, 0.0, 0.2) == pytest.approx(brute_mcnemar(10, 0.2, 0.2), abs=1e-10)  # psi raised
    assert power.mcnemar_power(10, 1.0, 0.2) == pytest.approx(brute_mcnemar(10, 1.0, 0.2), abs=1e-10)  # psi 1 allowed
    for mde, psi in ((0.0, 0.3), (1.1, 0.3), (0.1, -0.1), (0.1, 1.1)):
        with pytest.raises(ValueError, match="McNemar's power needs"):
            power.mcnemar_power(10, psi, mde)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_rejection_bounds_are_the_largest_rejecting_split(alpha: float) -> None:
    """For each number m of discordant questions, the largest split c <= m/2 that rejects (-1: none)."""
    power._BOUNDS.pop(alpha, None)
    small = power._rejection_bounds(10, alpha)  # memoised for 64; a larger n must extend it
    bounds = power._rejection_bounds(150, alpha)
    assert len(small) == 11 and len(bounds) == 151 and list(small) == list(bounds[:11])
    for m in range(151):
        rejects = rejecting(m, alpha)
        c = max((k for k in range(m // 2 + 1) if rejects[k]), default=-1)
        assert bounds[m] == c, m


def test_the_discordance_of_the_alternative() -> None:
    v = Variances(between=0.3, within=0.1, source="given")
    assert power.mcnemar_discordance(v, 0.2) == pytest.approx(0.44)  # Var(D) + mde^2
    assert power.mcnemar_discordance(Variances(0.0, 0.0, "given"), 0.3) == pytest.approx(0.3)  # at least mde
    assert power.mcnemar_discordance(Variances(0.9, 0.3, "given"), 0.5) == 1.0  # at most 1


# --------------------------------------------------------------------------- McNemar's rejection region
# Checked against its definition with scipy.stats.binom at levels and sizes where the normal-approximation
# start of _rejection_bounds is far from the bound (large m) or below -1 (tiny alpha), at an exact tie
# (a p-value equal to alpha does not reject, as binomtest decides), and through the memo.


def assert_is_the_rejection_region(bounds: np.ndarray, alpha: float) -> None:
    """Each bound is the largest split that rejects, by the definition, with scipy's binomial cdf."""
    m = np.arange(len(bounds))
    assert (bounds >= -1).all() and (bounds <= m // 2).all()
    rejects = (bounds == -1) | (2 * stats.binom.cdf(bounds, m, 0.5) < alpha)
    one_more_does_not = 2 * stats.binom.cdf(bounds + 1, m, 0.5) >= alpha
    bad = m[~(rejects & one_more_does_not)]
    assert bad.size == 0, f"wrong bound at m = {bad[:10].tolist()}: {bounds[bad[:10]].tolist()}"


@pytest.mark.parametrize(
    "n,alpha",
    [
        (300, 1e-4),  # at m = 15 the normal start is one below the bound
        (300, 1e-8),  # ... and below -1 for the small m (bdtr is nan there)
        (300, 1e-10),  # some bounds two steps above their start
        (300, 1e-15),
        (20_000, 1e-6),  # large m: a start off by z sqrt(m) / 2 or more is beyond the 64 correcting steps
        (20_000, 0.45),
        (120_000, 0.99),
    ],
)
def test_the_rejection_bounds_hold_at_any_level_and_size(n: int, alpha: float) -> None:
    power._BOUNDS.pop(alpha, None)
    bounds = power._rejection_bounds(n, alpha)
    assert len(bounds) == n + 1
    assert_is_the_rejection_region(bounds, alpha)


def test_a_split_of_none_rejects_at_a_small_level_when_its_p_value_is_below_it() -> None:
    """Hand count: 28 discordant questions all on one side have p = 2 / 2^28 = 7.45e-9 < 1e-8, so the
    exact test rejects at k = 0 (the bound is 0, not -1); one question on the other side gives
    p = 2 * 29 / 2^28 = 2.2e-7, which does not.  (The start of the search is below -1 there.)"""
    power._BOUNDS.pop(1e-8, None)
    assert stats.binomtest(0, 28, 0.5).pvalue == pytest.approx(2 / 2**28) and 2 / 2**28 < 1e-8
    assert stats.binomtest(1, 28, 0.5).pvalue > 1e-8
    bounds = power._rejection_bounds(40, 1e-8)
    assert bounds[28] == 0 and bounds[27] == -1  # 27 on one side: p = 1.49e-8
    # the power the plan reads: at mde 1 every question is discordant and on a's side, so it rejects
    # exactly when at least 28 of the n questions are discordant, which they all are
    assert power.mcnemar_power(28, 1.0, 1.0, 1e-8) == pytest.approx(1.0)


def test_a_p_value_equal_to_the_level_does_not_reject() -> None:
    """At alpha = 1/16 and m = 5, all five on one side has p = 2 / 32 = 1/16 exactly (in binary, no
    rounding): not below alpha, so no split of 5 rejects; at m = 6, p = 2 / 64 < 1/16 rejects."""
    alpha = 1 / 16
    assert stats.binomtest(0, 5, 0.5).pvalue == alpha and stats.binomtest(0, 6, 0.5).pvalue < alpha
    power._BOUNDS.pop(alpha, None)
    bounds = power._rejection_bounds(200, alpha)
    assert bounds[5] == -1 and bounds[6] == 0
    assert_is_the_rejection_region(bounds, alpha)
    # the same through the memo (the second call reads the bounds the first one stored)
    assert power._rejection_bounds(5, alpha)[5] == -1


def test_the_memo_returns_exactly_n_plus_one_bounds() -> None:
    alpha = 0.05
    power._BOUNDS.pop(alpha, None)
    first = power._rejection_bounds(10, alpha).tolist()
    # from the memo (64 bounds stored after the first call): shorter, then one longer than it holds
    for n in (5, 10, 63, 64, 65, 200, 3):
        got = power._rejection_bounds(n, alpha)
        assert len(got) == n + 1, n
        assert_is_the_rejection_region(got, alpha)
    assert power._rejection_bounds(10, alpha).tolist() == first


def test_the_bounds_are_memoised_per_level_and_grow_by_doubling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docstring's promise (a plan's bisection asks at every step): bounds already computed for a
    level are served without a binomial tail, and a call past them stores twice as many, so that the
    bisection's doubling recomputes once per doubling, not at every step."""
    alpha = 0.03
    power._BOUNDS.pop(alpha, None)
    first = power._rejection_bounds(100, alpha).tolist()
    tails: list[int] = []
    bdtr = special.bdtr
    monkeypatch.setattr(special, "bdtr", lambda *args: tails.append(1) or bdtr(*args))
    assert power._rejection_bounds(60, alpha).tolist() == first[:61] and not tails  # from the memo
    assert power._rejection_bounds(101, alpha).tolist()[:101] == first and tails  # one past it: computed
    tails.clear()
    assert_is_the_rejection_region(power._rejection_bounds(200, alpha), alpha)  # stored then: 2 x 101
    assert not tails
    power._BOUNDS.pop(0.04, None)
    assert_is_the_rejection_region(power._rejection_bounds(10, 0.04), 0.04)
    assert tails  # another level: its own bounds


# --------------------------------------------------------------------------- the paired t test


@pytest.mark.parametrize(
    "n,mde,var,alpha", [(10, 0.2, 0.3, 0.05), (40, 0.1, 0.25, 0.05), (7, 0.5, 1.0, 0.01), (200, 0.05, 0.4, 0.1)]
)
def test_paired_t_power_is_statsmodels(n: int, mde: float, var: float, alpha: float) -> None:
    expected = TTestPower().power(effect_size=mde / math.sqrt(var), nobs=n, alpha=alpha, alternative="two-sided")
    assert power.paired_t_power(n, mde, var, alpha) == pytest.approx(float(expected), rel=1e-9)


def test_paired_t_power_is_a_number_far_in_the_lower_tail() -> None:
    """scipy's nct.cdf(-crit) is nan at n = 60 or 100 here (its lower tail is ~1e-20): the power is the
    upper tail then, and the plan's bisection from a start of 100 finds statsmodels' 9 questions."""
    var = 0.049558080808080815
    for n in (9, 30, 60, 100, 113, 500):
        df, nc = n - 1, 0.25 * math.sqrt(n / var)
        upper = float(stats.nct.sf(stats.t.ppf(0.975, df), df, nc))
        got = power.paired_t_power(n, 0.25, var)
        assert math.isfinite(got) and upper <= got <= upper + 1e-6, n
    solved = TTestPower().solve_power(effect_size=0.25 / math.sqrt(var), alpha=0.05, power=0.8)
    assert power.questions_for_power(lambda n: power.paired_t_power(n, 0.25, var), 0.8, 100)[0] == math.ceil(solved)


def test_paired_t_power_edges() -> None:
    assert power.paired_t_power(1, 0.2, 0.3) == 0.0  # no standard error from one question
    assert power.paired_t_power(2, 0.2, 0.0) == 1.0  # every question moves by the same amount
    expected = TTestPower().power(effect_size=0.2 / math.sqrt(0.3), nobs=2, alpha=0.05, alternative="two-sided")
    assert power.paired_t_power(2, 0.2, 0.3) == pytest.approx(float(expected))  # two questions are enough
    assert power.paired_t_power(30, 0.2, 0.3) == pytest.approx(power.paired_t_power(30, 0.2, 0.3, 0.05))


# --------------------------------------------------------------------------- solving for n


def test_questions_for_power_finds_the_fewest_questions() -> None:
    def curve(n: int) -> float:
        return 1 - 0.97**n  # rises with n; 0.8 first reached at n = 53

    first = next(n for n in range(1, 1000) if curve(n) >= 0.8)
    for start in (1, 2, 10, 53, 54, 400):
        n, reached = power.questions_for_power(curve, 0.8, start)
        assert (n, reached) == (first, curve(first)), start
    assert power.questions_for_power(lambda n: 1.0, 0.8, 1) == (2, 1.0)  # never under two questions
    assert power.questions_for_power(lambda n: 1.0, 0.8, 50) == (2, 1.0)  # however far above the start is
    # reaching the target exactly is reaching it
    assert power.questions_for_power(lambda n: 0.8, 0.8, 10) == (2, 0.8)
    with pytest.raises(ValueError, match="more than 100 million"):
        power.questions_for_power(lambda n: 0.0, 0.8, 10)


def test_questions_for_power_allows_up_to_one_hundred_million() -> None:
    start = 12_500_000  # doubled: 25, 50, 100 million
    assert power.questions_for_power(lambda n: float(n >= 10**8), 0.8, start) == (10**8, 1.0)
    with pytest.raises(ValueError, match="more than 100 million"):  # the next doubling, 200 million, is refused
        power.questions_for_power(lambda n: float(n >= 150_000_000), 0.8, start)


def test_a_plan_past_one_hundred_million_questions_is_refused_before_its_power_is_computed() -> None:
    """McNemar's power at n holds n + 1 rejection bounds: a start of 3.9e10 questions (mde 1e-5 on the
    assumed variance) would ask for a 292 GiB array before the doubling's check was reached."""

    def power_at(n: int) -> float:
        assert n <= 10**8, n
        return 0.9

    with pytest.raises(ValueError, match="more than 100 million"):
        power.questions_for_power(power_at, 0.8, 10**8 + 1)
    assert power.questions_for_power(power_at, 0.8, 10**8) == (2, 0.9)  # 100 million itself is allowed


def test_levels_and_differences_past_floating_point_are_refused() -> None:
    assert 1 - 1e-20 / 2 == 1.0  # the quantile of 1 is infinite
    with pytest.raises(ValueError, match="alpha 1e-20 is too small"):
        power.z_total(1e-20, 0.8)
    assert power.z_total(1e-15, 0.8) > power.z_total(1e-12, 0.8) > 7  # small, but still a number
    assert (1e-200) ** 2 == 0.0  # underflows
    with pytest.raises(ValueError, match="the difference to detect, 1e-200, is too small to plan for"):
        power.questions_for(1e-200, power.assumed_binary_variances(), 1)
    assert power.questions_for(1e-150, Variances(0.0, 0.0, "given"), 1) == 2  # no variance: two questions


def test_questions_for_power_brackets_by_doubling_from_the_start() -> None:
    """The exact test's power is not monotone in n: the answer is the crossing inside the first bracket
    (start, 2 start, 4 start, ...) that reaches the target, here 12 (reached on 12..16 and from 50 on)."""

    def saw(n: int) -> float:
        return 0.9 if 12 <= n <= 16 or n >= 50 else 0.5

    assert power.questions_for_power(saw, 0.8, 2) == (12, 0.9)
    # a start below two starts the bracket at two questions
    assert power.questions_for_power(lambda n: 0.5 if n == 3 else 0.9, 0.8, 1) == (2, 0.9)


def test_plan_rows_start_from_the_normal_plan_at_their_own_level_and_power(monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[int] = []
    bisect = power.questions_for_power

    def spy(power_at, target, start):  # type: ignore[no-untyped-def]
        starts.append(start)
        return bisect(power_at, target, start)

    monkeypatch.setattr(power, "questions_for_power", spy)
    v = Variances(between=0.1, within=0.2, source="given", binary=True)
    power.plan_rows(0.1, v, None, (1, 3), 0.01, 0.9)
    assert starts == [power.questions_for(0.1, v, k, 0.01, 0.9) for k in (1, 3)]


def test_a_plan_that_needs_every_question_of_the_task_fits() -> None:
    v = Variances(between=0.1, within=0.2, source="given")
    (row,) = power.plan_rows(0.1, v, None, (2,))
    assert power.plan_rows(0.1, v, row.questions, (2,))[0].fits is True
    assert power.plan_rows(0.1, v, row.questions - 1, (2,))[0].fits is False


@pytest.mark.parametrize("binary", [True, False])
def test_plan_rows_reach_their_power_at_the_fewest_questions(binary: bool) -> None:
    v = Variances(between=0.05, within=0.3, source="given", binary=binary)
    mde, alpha, target = 0.25, 0.05, 0.8
    rows = power.plan_rows(mde, v, 60, (1, 2, 4), alpha, target)
    assert [r.repeats for r in rows] == [1, 2, 4]
    for row in rows:
        if row.repeats == 1 and binary:
            psi = power.mcnemar_discordance(v, mde)
            assert row.test == "mcnemar_exact"
            reach = [brute_mcnemar(n, psi, mde, alpha) for n in (row.questions - 1, row.questions)]
        else:
            assert row.test == "paired_t"
            es = mde / math.sqrt(v.total(row.repeats))
            reach = [
                float(TTestPower().power(effect_size=es, nobs=n, alpha=alpha, alternative="two-sided"))
                for n in (row.questions - 1, row.questions)
            ]
        assert reach[0] < target <= reach[1], row
        assert row.power == pytest.approx(reach[1], abs=1e-9)
        assert row.generations == row.questions * row.repeats
        assert row.fits is (row.questions <= 60)
    assert all(r.fits is None for r in power.plan_rows(mde, v, None, (1, 2)))
    assert power.plan_rows(mde, v, 0, (1,))[0].fits is False
    # the defaults: the repeat counts of DEFAULT_REPEATS, 5% and 80%
    assert [r.repeats for r in power.plan_rows(mde, v, None)] == list(power.DEFAULT_REPEATS) == [1, 2, 3, 5, 10]
    assert power.plan_rows(mde, v, None, (2,)) == power.plan_rows(mde, v, None, (2,), 0.05, 0.80)


def test_a_stricter_level_or_a_higher_power_needs_more_questions() -> None:
    v = Variances(between=0.1, within=0.2, source="given", binary=True)
    base = power.plan_rows(0.1, v, None, (1, 3))
    assert all(s.questions > b.questions for s, b in zip(power.plan_rows(0.1, v, None, (1, 3), 0.01), base))
    assert all(s.questions > b.questions for s, b in zip(power.plan_rows(0.1, v, None, (1, 3), 0.05, 0.9), base))


# --------------------------------------------------------------------------- variance components


def test_paired_variances_are_numpy_s_method_of_moments() -> None:
    a = {"q1": [1.0, 0.0, 1.0], "q2": [0.0, 0.0, 1.0], "q3": [1.0, 1.0, 1.0], "q4": [0.0, 1.0]}
    b = {"q1": [0.0, 0.0, 1.0], "q2": [1.0, 1.0], "q3": [0.0, 1.0, 0.0], "q4": [0.0, 0.0], "only_b": [1.0, 1.0]}
    common = ["q1", "q2", "q3", "q4"]
    d = [np.mean(a[q]) - np.mean(b[q]) for q in common]
    within = np.mean([np.var(a[q], ddof=1) + np.var(b[q], ddof=1) for q in common])
    left = np.mean([np.var(a[q], ddof=1) / len(a[q]) + np.var(b[q], ddof=1) / len(b[q]) for q in common])
    est = power.paired_variances(a, b, "m1 vs m2")
    assert est.within == pytest.approx(within) and est.between == pytest.approx(max(np.var(d, ddof=1) - left, 0))
    assert (est.questions, est.repeats, est.within_measured, est.binary) == (4, 3, True, True)
    assert est.source == "measured: paired difference m1 vs m2 on 4 questions, up to 3 repeats each"


@pytest.mark.parametrize("twice", ["a", "b"])
def test_paired_variances_need_both_models_asked_again(twice: str) -> None:
    """One model asked twice, the other once: the within part is not measured for the pair."""
    again = {f"q{i}": [float(i % 2), 1.0] for i in range(3)}
    once = {f"q{i}": [float(i % 3 == 0)] for i in range(3)}
    a, b = (again, once) if twice == "a" else (once, again)
    est = power.paired_variances(a, b)
    d = [np.mean(a[q]) - np.mean(b[q]) for q in a]
    assert est.within_measured is False and est.within == 0.0 and est.between == pytest.approx(np.var(d, ddof=1))
    assert (est.questions, est.repeats, est.binary) == (3, 2, True)


def test_two_common_questions_are_enough() -> None:
    est = power.paired_variances({"q1": [1.0], "q2": [0.0]}, {"q1": [0.0], "q2": [0.0]})
    assert est.between == pytest.approx(0.5) and est.within_measured is False and est.binary is True
    assert est.source.startswith("measured: paired difference a vs b on 2 questions asked once (the within-question")
    assert est.source.endswith("counted as between, so repeats are assumed to average nothing away)")
    one = power.one_model_variances({"q1": [1.0, 1.0], "q2": [0.0, 1.0]})
    assert one.questions == 2 and one.within == pytest.approx(2 * 0.25)  # mean of s2 = (0 + 0.5) / 2


def test_paired_variances_asked_once_count_everything_between() -> None:
    a = {"q1": [1.0], "q2": [0.5], "q3": [0.0], "q4": [1.0, 1.0]}
    b = {"q1": [0.0], "q2": [0.5], "q3": [0.0], "q4": [0.0, 1.0]}
    est = power.paired_variances(a, b)
    d = [1.0, 0.0, 0.0, 0.5]
    assert est.between == pytest.approx(np.var(d, ddof=1)) and est.within == 0.0 and not est.within_measured
    assert (est.questions, est.repeats, est.binary) == (4, 2, False)  # 0.5 is not a 0/1 score
    assert "a vs b on 4 questions asked once" in est.source
    with pytest.raises(ValueError, match="share 1 answered question"):
        power.paired_variances({"q1": [1.0], "q2": []}, {"q1": [0.0], "q2": [1.0]})


def test_between_is_floored_at_zero() -> None:
    # Noisy repeats around equal means: Var(D) is smaller than the noise left in the means.
    a = {f"q{i}": [0.0, 1.0] for i in range(4)}
    b = {f"q{i}": [1.0, 0.0] for i in range(4)}
    assert power.paired_variances(a, b).between == 0.0
    assert power.one_model_variances(a).between == 0.0


def test_one_model_variances_double_one_model_s() -> None:
    scores = {"q1": [1.0, 0.0, 1.0], "q2": [0.0, 0.0, 0.0], "q3": [1.0, 1.0, 0.0], "q4": [], "q5": [1.0, 1.0, 1.0]}
    asked = ["q1", "q2", "q3", "q5"]
    means = [np.mean(scores[q]) for q in asked]
    s2 = [np.var(scores[q], ddof=1) for q in asked]
    est = power.one_model_variances(scores, "m")
    assert est.within == pytest.approx(2 * np.mean(s2))
    assert est.between == pytest.approx(2 * max(np.var(means, ddof=1) - np.mean([v / 3 for v in s2]), 0))
    assert (est.questions, est.repeats, est.within_measured, est.binary) == (4, 3, True, True)
    assert "m's per-question variance on 4 questions" in est.source and "up to 3 repeats" in est.source
    once = power.one_model_variances({"q1": [1.0], "q2": [0.0], "q3": [1.0, 0.0]})
    assert once.between == pytest.approx(2 * np.var([1.0, 0.0, 0.5], ddof=1)) and once.within == 0.0
    assert (once.within_measured, once.repeats, once.questions, once.binary) == (False, 2, 3, True)
    assert once.source == (
        "measured and assumed: the model's per-question variance on 3 questions, doubled for a "
        "second, independent model (questions asked once: the within-question part cannot be "
        "told apart, counted as between)"
    )
    # asked twice each: the within part is measured (two repeats are enough)
    twice = power.one_model_variances({"q1": [1.0, 0.0], "q2": [0.0, 0.0], "q3": [1.0, 1.0]})
    assert twice.within_measured is True and twice.within == pytest.approx(2 * np.mean([0.5, 0.0, 0.0]))
    with pytest.raises(ValueError, match="the model: 1 answered question"):
        power.one_model_variances({"q1": [1.0], "q2": []})


def test_the_assumed_binary_variances() -> None:
    v = power.assumed_binary_variances()
    assert (v.between, v.within, v.within_measured, v.binary, v.questions, v.repeats) == (0.5, 0.0, False, True, 0, 0)
    assert v.total(1) == 0.5 == v.total(10)  # repeats assumed to help nothing
    # what the plan prints: an assumption, its numbers, and how to measure instead
    assert v.source.startswith(
        "assumed (no runs given): 0/1 scores, each model right with probability 0.5 on each "
        "answer, independent models: Var(difference) = 0.5 per question, all of it counted as "
        "between-question"
    )
    assert v.source.endswith("(repeats assumed to help nothing); measure it with --from RUN")
