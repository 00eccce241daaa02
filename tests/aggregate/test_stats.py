"""stats.py against direct computations on small hand-made matrices."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_benchaudit.aggregate import stats

# --------------------------------------------------------------------------- ranks


def test_ranks_are_direction_aware_and_average_ties():
    assert stats.rank_scores([0.9, 0.5, 0.9, 0.1]).tolist() == [1.5, 3.0, 1.5, 4.0]
    # lower is better (a MAD): the smallest error is rank 1
    assert stats.rank_scores([1.2, 0.3, 0.3, 2.0], lower_is_better=True).tolist() == [3.0, 1.5, 1.5, 4.0]
    # three-way tie in the middle
    assert stats.rank_scores([5, 3, 3, 3, 1]).tolist() == [1.0, 3.0, 3.0, 3.0, 5.0]
    # a missing score ranks last, in either direction; two missing tie for last
    assert stats.rank_scores([0.2, math.nan, 0.7]).tolist() == [2.0, 3.0, 1.0]
    assert stats.rank_scores([0.2, math.nan, 0.7], lower_is_better=True).tolist() == [1.0, 3.0, 2.0]
    assert stats.rank_scores([math.nan, 1.0, math.nan]).tolist() == [2.5, 1.0, 2.5]


def test_ranks_along_rows_equal_ranks_of_each_row():
    m = np.array([[0.1, 0.4, 0.4, 0.2], [3.0, 1.0, 2.0, 2.0]])
    by_row = stats.rank_scores(m, axis=1)
    for row, ranks in zip(m, by_row):
        assert ranks.tolist() == stats.rank_scores(row).tolist()
    assert by_row[0].tolist() == [4.0, 1.5, 1.5, 3.0]


def test_mean_rank_ranking():
    task_ranks = [[1, 2, 3, 4], [2, 1, 4, 3], [1, 3, 2, 4]]
    mean, rank = stats.mean_rank_ranking(task_ranks)
    assert mean.tolist() == pytest.approx([4 / 3, 2.0, 3.0, 11 / 3])
    assert rank.tolist() == [1.0, 2.0, 3.0, 4.0]
    _, tied = stats.mean_rank_ranking([[1, 2, 3], [2, 1, 3]])
    assert tied.tolist() == [1.5, 1.5, 3.0]


# --------------------------------------------------------------------------- tau-b, inversions, Spearman


def _manual_tau_b(x, y):
    """Kendall tau-b from a direct count of concordant, discordant and tied pairs."""
    conc = disc = tie_x = tie_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            tie_x += 1
            tie_y += 1
        elif dx == 0:
            tie_x += 1
        elif dy == 0:
            tie_y += 1
        elif dx * dy > 0:
            conc += 1
        else:
            disc += 1
    n0 = len(x) * (len(x) - 1) // 2
    return (conc - disc) / math.sqrt((n0 - tie_x) * (n0 - tie_y)), disc


@pytest.mark.parametrize(
    "x, y",
    [
        ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
        ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
        ([0.9, 0.7, 0.7, 0.4, 0.1, 0.3], [0.8, 0.9, 0.6, 0.6, 0.2, 0.1]),  # ties on both sides
        ([3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8]),
    ],
)
def test_tau_b_and_inversions_equal_a_manual_count(x, y):
    tau, disc = _manual_tau_b(x, y)
    res = stats.kendall_tau_b(x, y)
    assert res["tau"] == pytest.approx(tau)
    assert res["inversions"] == disc == stats.discordant_pairs(x, y)
    assert res["n_models"] == len(x)
    assert res["p_value"] == pytest.approx(st.kendalltau(x, y, variant="b").pvalue)


def test_inversions_count_opposite_orders_only():
    assert stats.discordant_pairs([1, 2, 3], [1, 2, 3]) == 0
    assert stats.discordant_pairs([1, 2, 3], [3, 2, 1]) == 3
    assert stats.discordant_pairs([1, 2, 3], [2, 1, 3]) == 1
    assert stats.discordant_pairs([1, 1, 3], [2, 1, 3]) == 0  # a tie is not an inversion


def test_tau_b_of_a_constant_ranking_is_undefined():
    res = stats.kendall_tau_b([1, 1, 1], [1, 2, 3])
    assert res["tau"] is None and res["p_value"] is None and res["inversions"] == 0


def test_spearman_equals_scipy_on_the_same_vectors():
    rng = np.random.default_rng(7)
    for _ in range(20):
        x = rng.integers(0, 5, size=9).astype(float)  # plenty of ties
        y = x + rng.integers(-2, 3, size=9)
        if np.all(x == x[0]) or np.all(y == y[0]):
            continue
        assert stats.spearman_rho(x, y) == pytest.approx(st.spearmanr(x, y).statistic)
    a = rng.normal(size=(30, 8))
    b = a + rng.normal(size=(30, 8))
    ra, rb = st.rankdata(a, axis=1), st.rankdata(b, axis=1)
    expected = [st.spearmanr(a[i], b[i]).statistic for i in range(30)]
    assert stats.rowwise_spearman(ra, rb).tolist() == pytest.approx(expected)
    assert math.isnan(stats.rowwise_spearman(np.array([[2.0, 2.0, 2.0]]), np.array([[1.0, 2.0, 3.0]]))[0])


# --------------------------------------------------------------------------- win rate


def test_mean_win_rate_is_direction_aware_and_counts_ties_half():
    scores = {"acc": {"a": 0.9, "b": 0.5, "c": 0.5}, "mad": {"a": 2.0, "b": 1.0, "c": 3.0}}
    wr = stats.mean_win_rate(scores, {"acc": False, "mad": True})
    # acc: a beats 2 -> 1; b beats 0, ties c -> 0.25; c likewise 0.25
    # mad (lower is better): b beats 2 -> 1; a beats c -> 0.5; c -> 0
    assert wr == pytest.approx({"a": (1 + 0.5) / 2, "b": (0.25 + 1) / 2, "c": (0.25 + 0) / 2})
    # a model missing from a task is averaged over the tasks it has
    wr = stats.mean_win_rate({"t1": {"a": 1, "b": 0}, "t2": {"a": 0, "b": 1, "c": 2}}, {})
    assert wr == pytest.approx({"a": (1 + 0) / 2, "b": (0 + 0.5) / 2, "c": 1.0})


# --------------------------------------------------------------------------- PCA, parallel analysis


def test_pca_variance_shares_sum_to_one_and_match_the_correlation_matrix():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 6)) + np.outer(rng.normal(size=12), np.ones(6))
    res = stats.pca(x)
    assert res["variance_explained"].sum() == pytest.approx(1.0)
    assert res["eigenvalues"].sum() == pytest.approx(6.0)  # trace of a correlation matrix
    expected = np.sort(np.linalg.eigvalsh(np.corrcoef(x, rowvar=False)))[::-1]
    assert res["eigenvalues"] == pytest.approx(expected)
    assert np.all(np.diff(res["variance_explained"]) <= 1e-12)
    assert res["cumulative"][-1] == pytest.approx(1.0)
    # loadings: correlation of each column with the component; rows' squares sum to 1
    assert (res["loadings"] ** 2).sum(axis=1) == pytest.approx(np.ones(6))
    # scaling a column does not change standardized PCA
    y = x.copy()
    y[:, 2] *= 100
    assert stats.pca(y)["eigenvalues"] == pytest.approx(res["eigenvalues"])
    with pytest.raises(ValueError, match="constant"):
        stats.pca(np.column_stack([x[:, 0], np.ones(12)]))


def test_parallel_analysis_finds_one_component_in_a_rank_one_matrix():
    rng = np.random.default_rng(0)
    x = np.outer(rng.normal(size=12), rng.uniform(0.5, 2.0, size=6)) + 0.01 * rng.normal(size=(12, 6))
    res = stats.parallel_analysis(x, n_permutations=500, seed=1)
    assert res["n_components"] == 1
    assert res["observed"][0] > res["threshold"][0] and res["observed"][1] < res["threshold"][1]
    again = stats.parallel_analysis(x, n_permutations=500, seed=1)
    assert np.array_equal(res["threshold"], again["threshold"])  # seeded nulls
    # pure noise: nothing beyond the null
    noise = rng.normal(size=(40, 5))
    assert stats.parallel_analysis(noise, n_permutations=500, seed=2)["n_components"] == 0


def test_parallel_analysis_finds_two_components_in_two_blocks():
    rng = np.random.default_rng(5)
    f1, f2 = rng.normal(size=30), rng.normal(size=30)
    x = np.column_stack([f1, f1, f1, f2, f2, f2]) + 0.05 * rng.normal(size=(30, 6))
    assert stats.parallel_analysis(x, n_permutations=300, seed=0)["n_components"] == 2


# --------------------------------------------------------------------------- bootstrap


def test_resample_counts_count_each_drawn_index():
    idx = np.array([[0, 0, 2], [1, 2, 2]])
    assert stats.resample_counts(idx, 3).tolist() == [[2, 0, 1], [0, 1, 2]]


def test_bootstrap_task_scores_follow_each_models_denominator():
    scores = np.array([[1, 0, 1, 0], [1, 0, 0, 0]], dtype=float)
    valid = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=bool)
    counts = np.array([[1, 1, 1, 1], [0, 0, 1, 3]], dtype=float)
    total = stats.bootstrap_task_scores(scores, valid, [False, False], counts)
    assert total.tolist() == [[0.5, 0.25], [0.25, 0.0]]
    by_valid = stats.bootstrap_task_scores(scores, valid, [True, True], counts)
    assert by_valid[0].tolist() == pytest.approx([2 / 3, 1.0])
    assert by_valid[1, 0] == pytest.approx(1.0) and math.isnan(by_valid[1, 1])  # model 2: no valid answer drawn
    mixed = stats.bootstrap_task_scores(scores, valid, [True, False], counts)
    assert mixed[:, 0].tolist() == pytest.approx([2 / 3, 1.0]) and mixed[:, 1].tolist() == [0.25, 0.0]


def _toy_tasks(rng, n_models=5, sizes=(40, 25, 30), shift=0.0):
    tasks = []
    ability = np.linspace(0.8, 0.3, n_models)
    for t, n in enumerate(sizes):
        p = np.clip(ability[:, None] + shift * (t - 1) + 0.05 * rng.normal(size=(n_models, 1)), 0.05, 0.95)
        scores = (rng.random((n_models, n)) < p).astype(float)
        valid = rng.random((n_models, n)) > 0.1
        scores[~valid] = 0.0
        lib = t == 2
        if lib:  # an error metric: lower is better
            scores = 5 * (1 - scores) + rng.random((n_models, n))
        tasks.append(stats.TaskItems(scores, valid, rng.random(n_models) < 0.5, lower_is_better=lib))
    return tasks


def test_paired_bootstrap_uses_the_same_resamples_for_every_model_and_both_pipelines():
    rng = np.random.default_rng(11)
    a = _toy_tasks(rng)
    b = _toy_tasks(rng, shift=0.1)
    res = stats.paired_bootstrap(a, b, n_resamples=200, seed=4, return_indices=True)
    idx = res["indices"]
    assert [i.shape for i in idx] == [(200, 40), (200, 25), (200, 30)]
    # every model, under both pipelines, is scored on exactly the resampled questions idx[t][r]
    for t, (ta, tb) in enumerate(zip(a, b)):
        counts = stats.resample_counts(idx[t], ta.scores.shape[1])
        for items in (ta, tb):
            boot = stats.bootstrap_task_scores(items.scores, items.valid, items.use_valid, counts)
            for r in (0, 57, 199):
                for m in range(5):
                    s, v = items.scores[m, idx[t][r]], items.valid[m, idx[t][r]]
                    direct = s[v].mean() if items.use_valid[m] else s.mean()
                    assert boot[r, m] == pytest.approx(direct)
    # identical pipelines -> identical rankings in every resample (rho = 1): the resamples are paired
    same = stats.paired_bootstrap(a, a, n_resamples=200, seed=4)
    assert np.array_equal(same["boot_rank_a"], same["boot_rank_b"]) and np.all(same["boot_rho"] == 1.0)
    # two identical models get identical scores, hence tied ranks, in every resample
    twin = [
        stats.TaskItems(
            np.vstack([t.scores, t.scores[:1]]),
            np.vstack([t.valid, t.valid[:1]]),
            np.append(t.use_valid, t.use_valid[0]),
            t.lower_is_better,
        )
        for t in a
    ]
    tw = stats.paired_bootstrap(twin, twin, n_resamples=100, seed=0)
    assert np.array_equal(tw["boot_rank_a"][:, 0], tw["boot_rank_a"][:, -1])


def test_paired_bootstrap_is_reproducible_with_its_seed():
    rng = np.random.default_rng(2)
    a, b = _toy_tasks(rng), _toy_tasks(rng, shift=0.2)
    r1 = stats.paired_bootstrap(a, b, n_resamples=300, seed=9)
    r2 = stats.paired_bootstrap(a, b, n_resamples=300, seed=9)
    r3 = stats.paired_bootstrap(a, b, n_resamples=300, seed=10)
    assert np.array_equal(r1["boot_rho"], r2["boot_rho"], equal_nan=True)
    assert np.array_equal(r1["boot_rank_b"], r2["boot_rank_b"])
    assert not np.array_equal(r1["boot_rank_b"], r3["boot_rank_b"])
    # point estimate: rho between rankings by mean task rank, as scipy computes it
    assert r1["rho"] == pytest.approx(st.spearmanr(r1["rank_a"], r1["rank_b"]).statistic)
    manual = [stats.rank_scores(t.point_scores(), t.lower_is_better) for t in a]
    assert r1["rank_a"].tolist() == stats.rank_scores(np.mean(manual, axis=0), lower_is_better=True).tolist()
    ci = stats.percentile_ci(r1["boot_rho"])
    assert ci[0] <= ci[1]


def test_direction_stability_counts_resamples_keeping_the_sign():
    shift = [3.0, -4.0, 1.0, 0.0]
    boot_a = np.array([[5, 1, 2, 3], [5, 1, 2, 3], [4, 2, 2, 3], [1, 5, 3, 3]], dtype=float)
    boot_b = np.array([[1, 5, 1, 3], [2, 5, 3, 3], [4, 6, 1, 3], [2, 2, 1, 3]], dtype=float)
    # model 0: a-b = 4, 3, 0, -1 -> 2/4 keep +; model 1: -4, -4, -4, 3 -> 3/4 keep -
    assert stats.direction_stability(shift, boot_a, boot_b) == [0.5, 0.75, None, None]


def test_percentile_ci_ignores_undefined_resamples():
    assert stats.percentile_ci(np.array([np.nan, np.nan])) is None
    lo, hi = stats.percentile_ci(np.append(np.linspace(0, 1, 101), np.nan))
    assert lo == pytest.approx(0.025) and hi == pytest.approx(0.975)
