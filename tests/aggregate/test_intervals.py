"""The headline's 95% intervals, plain and clustered (pytest_benchaudit/aggregate/intervals.py, issue 33
items 1 and 3): checked against statsmodels' cluster-robust covariance, against Wilson's quadratic
solved here with numpy, by properties that must hold whatever the scores, on the summary rows the
issue found broken, and by a seeded simulation of grouped questions with a known true accuracy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_benchaudit.aggregate.intervals import clustered_interval, headline_interval, wilson
from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.pipeline.stages import build_pipeline
from pytest_benchaudit.testing.runs import complete_record


def _card(metric: str = "exact_match", by: str | None = "topic", denominator: str = "total") -> dict[str, Any]:
    fields: dict[str, Any] = {
        "scoring": {"metric": metric, "denominator": denominator},
        "aggregation": {"method": "micro", **({"by": by} if by else {})},
    }
    return build_pipeline("standardized", "toy", "mcq", fields).card()


def _rows(
    scores: list[list[float]], topics: list[str] | None = None, metric: str = "exact_match", by: str | None = "topic"
) -> dict[str, Any]:
    """The summary row of questions whose repeats scored ``scores[i]`` (question i in ``topics[i]``)."""
    records = [
        complete_record(
            {
                "benchmark": "toy",
                "task": "mcq",
                "question_id": f"q{i}",
                "question_index": i,
                "model": "m",
                "repeat": k,
                "valid": True,
                "correct": s == 1.0,
                "score": float(s),
                "metric": metric,
                "question_meta": {"topic": topics[i]} if topics else {},
            }
        )
        for i, per in enumerate(scores)
        for k, s in enumerate(per)
    ]
    (row,) = summarize(records, {"toy.mcq": _card(metric, by)})
    return row


def _width(ci: list[float] | None) -> float:
    assert ci is not None
    return ci[1] - ci[0]


# --------------------------------------------------------------------------- references


def test_a_clustered_error_metric_interval_is_statsmodels_cluster_robust_t() -> None:
    """A MAD (not a share): mean ± t(G-1) CR1, what statsmodels' cluster-robust intercept-only OLS with
    use_t gives (questions alike within their CVE, so CR1 exceeds the plain SE and is the one used)."""
    import statsmodels.api as sm

    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(8), 5)
    values = np.round(np.abs(rng.normal(1.5, 1.0, 8))[groups] + rng.normal(0, 0.2, 40), 2).clip(0, 10)
    row = _rows([[v] for v in values.tolist()], [f"cve{g}" for g in groups], metric="cvss_abs_diff")
    fit = sm.OLS(values, np.ones(40)).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    assert row["se_clustered"] == pytest.approx(float(fit.bse[0]), rel=1e-10) and row["se_clustered"] > row["se"]
    assert row["ci95_clustered"] == pytest.approx(fit.conf_int(0.05)[0].tolist(), abs=2e-6)
    assert (row["n_groups"], row["ci95_clustered_method"], row["ci95_method"]) == (8, "cluster_t", "student_t")
    assert row["ci95"] == pytest.approx(
        list(stats.t.interval(0.95, 39, loc=values.mean(), scale=stats.sem(values))), abs=2e-6
    )


def _wilson_roots(p: float, n: float, q: float) -> list[float]:
    """Wilson's interval solved here: the roots of (1 + q^2/n) π^2 - (2p + q^2/n) π + p^2 = 0."""
    return sorted(float(r) for r in np.roots([1 + q * q / n, -(2 * p + q * q / n), p * p]).real)


def test_a_share_of_means_of_repeats_is_wilson_on_the_design_effect_n() -> None:
    """Per-question shares of 3 repeats: Wilson with t(n-1) on n_eff = p(1-p)/se^2 (Kish), capped at the 60
    records; the clustered one with t(G-1) on the larger of the CR1 and the plain SE."""
    scores = [
        [1, 1, 0],
        [0, 0, 0],
        [1, 1, 1],
        [0, 1, 0],
        [1, 1, 1],
        [1, 0, 0],
        [1, 1, 1],
        [0, 0, 1],
        [1, 1, 0],
        [0, 0, 0],
        [1, 1, 1],
        [1, 0, 1],
        [0, 0, 0],
        [1, 1, 1],
        [0, 1, 1],
        [1, 1, 1],
        [0, 0, 0],
        [1, 0, 1],
        [1, 1, 1],
        [0, 1, 0],
    ]
    topics = [f"t{i % 4}" for i in range(20)]
    row = _rows([[float(s) for s in per] for per in scores], topics)
    means = np.array([np.mean(per) for per in scores])
    p, se = means.mean(), stats.sem(means)
    n_eff = min(60.0, p * (1 - p) / se**2)
    assert row["ci95_method"] == "wilson_effective_n"
    assert row["ci95"] == pytest.approx(_wilson_roots(p, n_eff, stats.t.ppf(0.975, 19)), abs=2e-6)
    dev = means - p
    cr1 = math.sqrt(4 / 3 * sum(dev[[i for i in range(20) if topics[i] == t]].sum() ** 2 for t in set(topics))) / 20
    assert row["se_clustered"] == pytest.approx(cr1)
    n_eff_c = min(60.0, p * (1 - p) / max(cr1, se) ** 2)
    assert row["ci95_clustered"] == pytest.approx(_wilson_roots(p, n_eff_c, stats.t.ppf(0.975, 3)), abs=2e-6)


def test_zero_one_scores_asked_once_keep_scipys_wilson() -> None:
    row = _rows([[1.0]] * 17 + [[0.0]] * 3, by=None)
    ci = stats.binomtest(17, 20).proportion_ci(method="wilson")
    assert row["ci95"] == pytest.approx([ci.low, ci.high], abs=1e-6) and row["ci95_method"] == "wilson"
    assert row["ci95_clustered"] is None and row["n_groups"] is None and row["clustered_by"] is None


# --------------------------------------------------------------------------- the rows issue 33 found broken


def test_twenty_of_twenty_in_groups_has_a_real_clustered_interval() -> None:
    """20/20 right in 5 topics: the clustered interval was [1, 1]; now Wilson on 20 trials with t(4),
    low end 1 / (1 + t^2/20) (the Wilson root at p = 1), below the plain Wilson's 0.839."""
    row = _rows([[1.0]] * 20, [f"t{i % 5}" for i in range(20)])
    t4 = stats.t.ppf(0.975, 4)
    assert row["ci95_clustered"] == pytest.approx([1 / (1 + t4 * t4 / 20), 1.0], abs=1e-6)
    assert (
        row["ci95_clustered"][0]
        < row["ci95"][0]
        == pytest.approx(stats.binomtest(20, 20).proportion_ci(method="wilson").low, abs=1e-6)
    )


def test_twenty_eight_of_thirty_stays_inside_zero_one() -> None:
    """28/30 in 6 topics (the two misses in one topic): was [0.808, 1.059]; a share's interval is in [0, 1]."""
    row = _rows([[0.0]] * 2 + [[1.0]] * 28, [f"t{i // 5}" for i in range(30)])
    low, high = row["ci95_clustered"]
    assert 0.0 <= low < 28 / 30 < high <= 1.0 and low < row["ci95"][0]


def test_one_question_asked_three_times_has_no_zero_width_interval() -> None:
    """K = 3 on one question (1 of 3 right): was 33.3-33.3; now Wilson on its 3 records (z: no question
    spread can be measured), as scipy's Wilson of 1 in 3."""
    row = _rows([[1.0, 0.0, 0.0]], by=None)
    ci = stats.binomtest(1, 3).proportion_ci(method="wilson")
    assert row["ci95"] == pytest.approx([ci.low, ci.high], abs=1e-6) and _width(row["ci95"]) > 0.5


def test_equal_question_means_and_a_low_accuracy_give_a_proper_share_interval() -> None:
    """Every question 2 of 3 right: se = 0 but 30 records remain (was a zero-width interval); one question
    of ten right once in 3 and the rest never: the t interval went below 0, the share interval does not."""
    alike = _rows([[1.0, 1.0, 0.0]] * 10, by=None)
    assert alike["se"] == pytest.approx(0, abs=1e-12) and _width(alike["ci95"]) > 0.2
    assert alike["ci95"] == pytest.approx(_wilson_roots(2 / 3, 30, stats.t.ppf(0.975, 9)), abs=2e-6)
    low_accuracy = _rows([[1.0, 0.0, 0.0]] + [[0.0, 0.0, 0.0]] * 9, by=None)
    t_low = stats.t.interval(0.95, 9, loc=1 / 30, scale=stats.sem([1 / 3] + [0.0] * 9))[0]
    assert t_low < 0 <= low_accuracy["ci95"][0] < 1 / 30 < low_accuracy["ci95"][1] <= 1


def test_groups_of_one_never_narrow_the_interval() -> None:
    rng = np.random.default_rng(8)
    scores = [[float(v)] for v in (rng.random(25) < 0.7)]
    singletons = _rows(scores, [f"q{i}" for i in range(25)])
    assert singletons["se_clustered"] == pytest.approx(singletons["se"])  # CR1 on singletons: the plain SE
    assert (
        singletons["ci95_clustered"][0] <= singletons["ci95"][0]
        and singletons["ci95"][1] <= singletons["ci95_clustered"][1]
    )
    # Mostly singletons and one pair that disagrees (a negative within-group covariance): still not narrower.
    mixed = _rows([[1.0], [0.0]] + scores[2:], ["pair", "pair"] + [f"q{i}" for i in range(2, 25)])
    assert mixed["se_clustered"] < mixed["se"]
    assert mixed["ci95_clustered"][0] <= mixed["ci95"][0] and mixed["ci95"][1] <= mixed["ci95_clustered"][1]


def test_a_metric_without_spread_has_no_interval_rather_than_a_zero_width_one() -> None:
    row = _rows([[1.5]] * 6, [f"t{i % 3}" for i in range(6)], metric="cvss_abs_diff")
    assert (row["ci95"], row["ci95_method"], row["ci95_clustered"]) == (None, None, None)
    one_group = _rows([[1.0], [0.0], [1.0]], ["t", "t", "t"])
    assert one_group["n_groups"] == 1 and one_group["ci95_clustered"] is None and one_group["ci95"] is not None


# --------------------------------------------------------------------------- properties


_shares = st.integers(1, 4).flatmap(
    lambda k: st.lists(
        st.tuples(st.integers(0, k).map(lambda c, k=k: c / k), st.integers(0, 5)), min_size=1, max_size=40
    )
)


@settings(max_examples=150, deadline=None)
@given(_shares)
def test_share_intervals_stay_in_zero_one_contain_the_mean_and_nest(rows: list[tuple[float, int]]) -> None:
    """Whatever the per-question shares and groups: each interval of a share lies in [0, 1], has a positive
    width, holds the headline, and the clustered one contains the plain one."""
    values = [v for v, _ in rows]
    groups = [g for _, g in rows]
    mean = sum(values) / len(values)
    plain, _ = headline_interval(values, share=True, units=4 * len(values))
    assert plain is not None and 0.0 <= plain[0] <= mean + 1e-6 and mean - 1e-6 <= plain[1] <= 1.0
    assert plain[1] > plain[0]
    clustered, method = clustered_interval(values, groups, share=True, units=4 * len(values))
    if len(set(groups)) < 2 or len(values) < 2:
        assert clustered is None
        return
    assert method == "wilson_effective_n" and clustered is not None
    assert 0.0 <= clustered[0] <= plain[0] and plain[1] <= clustered[1] <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.integers(0, 4)), min_size=2, max_size=30))
def test_error_metric_intervals_nest_or_are_absent(rows: list[tuple[float, int]]) -> None:
    values = [v for v, _ in rows]
    groups = [g for _, g in rows]
    plain, _ = headline_interval(values, share=False)
    clustered, _ = clustered_interval(values, groups, share=False)
    if plain is None:
        assert max(values) - min(values) < 1e-9 and clustered is None
        return
    if clustered is not None:
        assert clustered[0] <= plain[0] and plain[1] <= clustered[1]


def test_wilson_is_scipys_on_whole_counts() -> None:
    for k, n in [(0, 7), (3, 10), (10, 10), (437, 1000)]:
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson(k / n, n) == pytest.approx([ci.low, ci.high], abs=1e-6)


# --------------------------------------------------------------------------- coverage, simulated


TRUE_MU, TRUE_SIGMA = 1.0, 1.0  # a topic's accuracy: logistic(1 + N(0, 1)); the questions of a topic share it


def _true_accuracy() -> float:
    """E[logistic(mu + sigma Z)] by Gauss-Hermite quadrature (numpy), not by simulation."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w / (1 + np.exp(-(TRUE_MU + TRUE_SIGMA * x)))) / np.sqrt(2 * np.pi))


@pytest.mark.parametrize("groups,per_group", [(5, 8), (10, 6), (52, 4)])
def test_the_clustered_interval_covers_the_true_accuracy_at_few_groups(groups: int, per_group: int) -> None:
    """Seeded: questions in topics whose accuracies differ (the questions of a topic answered alike more
    often than not), summarised as a run would be; the clustered interval holds the true accuracy in at
    least 95% - 3 Monte-Carlo SE of the trials at 5, 10 and 52 topics (Miller's eq. 4 with 1.96 held it
    84-91% of the time, issue 33), while the plain interval, blind to the topics, falls short."""
    truth = _true_accuracy()
    rng = np.random.default_rng(1000 + groups)
    trials = 400
    covered = plain_covered = 0
    card = {"toy.mcq": _card()}
    for _ in range(trials):
        accuracy = 1 / (1 + np.exp(-(TRUE_MU + TRUE_SIGMA * rng.normal(size=groups))))
        sizes = rng.integers(max(1, per_group // 2), per_group + per_group // 2 + 1, size=groups)
        topic = np.repeat(np.arange(groups), sizes)
        right = rng.random(len(topic)) < accuracy[topic]
        records = [
            {
                "benchmark": "toy",
                "task": "mcq",
                "model": "m",
                "pipeline": "standardized",
                "pipeline_hash": "h",
                "question_id": f"q{i}",
                "valid": True,
                "correct": bool(r),
                "score": float(r),
                "question_meta": {"topic": int(t)},
            }
            for i, (r, t) in enumerate(zip(right, topic))
        ]
        (row,) = summarize(records, card)  # type: ignore[arg-type]
        low, high = row["ci95_clustered"]
        covered += low <= truth <= high
        plain_covered += row["ci95"][0] <= truth <= row["ci95"][1]
    mcse = math.sqrt(0.95 * 0.05 / trials)
    assert covered / trials >= 0.95 - 3 * mcse, (groups, covered / trials)
    assert plain_covered / trials < 0.95 - 3 * mcse, (groups, plain_covered / trials)
