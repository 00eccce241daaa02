"""aggregate/stats.py against oracles it does not use (issue 33, item 15: the mutation check).

The bootstrap, PCA, parallel analysis and rank statistics are recomputed here the slow, obvious way
(a loop over resamples, ``np.corrcoef``, ``scipy.stats.spearmanr``, a hand count of pairs) or checked
by a property that holds whatever the data (the trace of a correlation matrix is its column count; a
resample of n questions draws each of them with probability 1/n).  Each test kills mutants of
``stats.py`` that the tests in ``test_stats.py`` let through: parallel analysis dividing by n instead of
n - 1, a bootstrap that never draws one question, a constant row given a correlation, ...
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_benchaudit.aggregate import ranks, stats

# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_indices_draw_every_question_uniformly() -> None:
    rng = np.random.default_rng(7)
    idx = stats.bootstrap_indices(4, 4000, rng)
    assert idx.shape == (4000, 4)
    counts = np.bincount(idx.ravel(), minlength=5)
    assert counts[4] == 0 and idx.min() == 0 and idx.max() == 3  # never outside 0..n-1
    # every question drawn about equally often: a chi-square test of uniformity (scipy) does not reject
    assert st.chisquare(counts[:4]).pvalue > 0.001
    one = stats.bootstrap_indices(1, 50, np.random.default_rng(0))  # one question is a valid bootstrap
    assert one.shape == (50, 1) and not one.any()
    with pytest.raises(ValueError, match="at least one question"):
        stats.bootstrap_indices(0, 10, np.random.default_rng(0))


def test_bootstrap_task_scores_equal_a_loop_over_resampled_questions() -> None:
    rng = np.random.default_rng(3)
    m, n, b = 3, 9, 40
    scores = rng.random((m, n)).round(2)
    valid = rng.random((m, n)) > 0.3
    idx = stats.bootstrap_indices(n, b, rng)
    counts = stats.resample_counts(idx, n)
    for row in range(b):
        assert sorted(np.repeat(np.arange(n), counts[row].astype(int)).tolist()) == sorted(idx[row].tolist())
    use_valid = np.array([True, False, True])
    got = stats.bootstrap_task_scores(scores, valid, use_valid, counts)
    for row, model in itertools.product(range(b), range(m)):
        s, v = scores[model, idx[row]], valid[model, idx[row]]
        if use_valid[model]:
            expected = s[v].mean() if v.any() else math.nan
        else:
            expected = s.mean()
        assert got[row, model] == pytest.approx(expected, nan_ok=True)


def test_point_scores_are_the_plain_means_under_each_denominator() -> None:
    scores = np.array([[1.0, 0.0, 0.5, 0.0], [0.2, 0.4, 0.6, 0.8]])
    valid = np.array([[True, True, True, False], [False, False, False, False]])
    items = stats.TaskItems(scores, valid, np.array([True, True]), lower_is_better=False)
    point = items.point_scores()
    assert point[0] == pytest.approx(0.5) and math.isnan(point[1])
    items = stats.TaskItems(scores, valid, np.array([False, False]), lower_is_better=False)
    assert items.point_scores().tolist() == pytest.approx([0.375, 0.5])


def test_paired_bootstrap_defaults_and_refusals() -> None:
    t = stats.TaskItems(
        np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]),
        np.ones((3, 3), bool),
        np.zeros(3, bool),
        lower_is_better=False,
    )
    res = stats.paired_bootstrap([t], [t])
    assert res["boot_rho"].shape == (5000,) and res["boot_rank_a"].shape == (5000, 3)
    assert "indices" not in res  # only on request
    again = stats.paired_bootstrap([t], [t], seed=0, return_indices=True)
    assert np.array_equal(res["boot_rank_a"], again["boot_rank_a"])  # the default seed is 0
    assert again["indices"][0].shape == (5000, 3)
    with pytest.raises(ValueError, match="non-empty"):
        stats.paired_bootstrap([t], [t, t])
    with pytest.raises(ValueError, match="non-empty"):
        stats.paired_bootstrap([], [])
    short = stats.TaskItems(t.scores[:, :2], t.valid[:, :2], t.use_valid, False)
    with pytest.raises(ValueError, match="shape"):
        stats.paired_bootstrap([t], [short])


# --------------------------------------------------------------------------- PCA and parallel analysis


def _data(seed: int, n: int = 15, p: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)) + np.outer(rng.normal(size=n), rng.uniform(0.2, 1.5, size=p))


def test_parallel_analysis_eigenvalues_are_those_of_the_correlation_matrices() -> None:
    x = _data(1)
    p = x.shape[1]
    res = stats.parallel_analysis(x, n_permutations=200, seed=3, quantile=0.9)
    expected = np.sort(np.linalg.eigvalsh(np.corrcoef(x, rowvar=False)))[::-1]
    assert res["observed"] == pytest.approx(expected)
    assert res["observed"].sum() == pytest.approx(p)  # the trace of a correlation matrix
    # The nulls, recomputed one by one with numpy's own correlation: column-permuted standardized data.
    z = (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)
    perms = np.random.default_rng(3).permuted(np.broadcast_to(z, (200, *z.shape)), axis=1)
    null = np.array([np.sort(np.linalg.eigvalsh(np.corrcoef(perm, rowvar=False)))[::-1] for perm in perms])
    assert null.sum(axis=1) == pytest.approx(np.full(200, p))
    assert res["threshold"] == pytest.approx(np.quantile(null, 0.9, axis=0))
    assert res["retained"].tolist() == (res["observed"] > res["threshold"]).tolist()
    assert (res["n_permutations"], res["seed"], res["quantile"]) == (200, 3, 0.9)
    default = stats.parallel_analysis(x, n_permutations=50)
    assert (default["seed"], default["quantile"]) == (0, 0.95)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own: no degrees of freedom on one row
def test_standardizing_needs_two_rows_and_no_constant_column() -> None:
    with pytest.raises(ValueError, match="constant"):
        stats.pca(np.array([[0.1, 0.2, 0.3]]))  # one row: no standard deviation at all
    with pytest.raises(ValueError, match="constant"):
        stats.parallel_analysis(np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]]), n_permutations=10)


def test_pca_loadings_are_correlations_with_the_component_scores() -> None:
    x = _data(4, n=20, p=4)
    res = stats.pca(x)
    z = (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)
    u, s, vt = np.linalg.svd(z, full_matrices=False)  # SVD of the data, not an eigen-decomposition
    assert res["eigenvalues"] == pytest.approx(s**2 / (len(x) - 1))
    component_scores = z @ vt.T
    for k in range(4):
        corr = [np.corrcoef(x[:, j], component_scores[:, k])[0, 1] for j in range(4)]
        sign = np.sign(corr[int(np.argmax(np.abs(corr)))])
        assert res["loadings"][:, k] == pytest.approx(sign * np.array(corr), abs=1e-9)
    assert res["loadings"][np.argmax(np.abs(res["loadings"]), axis=0), range(4)].min() > 0


# --------------------------------------------------------------------------- ranks and agreement


def test_rowwise_spearman_is_scipy_per_row_and_undefined_on_a_constant_row() -> None:
    rng = np.random.default_rng(8)
    a = np.vstack([st.rankdata(rng.normal(size=6)) for _ in range(20)])
    b = np.vstack([st.rankdata(np.round(rng.normal(size=6), 0)) for _ in range(20)])  # with ties
    got = stats.rowwise_spearman(a, b)
    for row in range(20):
        assert got[row] == pytest.approx(st.spearmanr(a[row], b[row]).statistic)
    const = stats.rowwise_spearman(np.array([[1.0, 2.0, 3.0]]), np.array([[2.0, 2.0, 2.0]]))
    assert math.isnan(const[0])
    assert stats.spearman_rho([1, 1, 1], [1, 2, 3]) is None
    assert stats.spearman_rho([3, 1, 2], [30, 10, 20]) == pytest.approx(1.0)


def test_ranks_of_missing_scores_come_last_tied() -> None:
    r = stats.rank_scores([0.5, np.nan, 0.9, np.nan], lower_is_better=False)
    assert r.tolist() == [2.0, 3.5, 1.0, 3.5]
    r = stats.rank_scores([0.5, np.nan, 0.9], lower_is_better=True)
    assert r.tolist() == [1.0, 3.0, 2.0]


def test_mean_win_rate_is_a_hand_count_and_skips_missing_scores() -> None:
    scores = {"t1": {"a": 0.9, "b": 0.5, "c": float("nan")}, "t2": {"a": 2.0, "b": 1.0, "c": 1.0}}
    wr = stats.mean_win_rate(scores, {"t2": True})  # t1's direction not given: higher is better
    # t1: a beats b (1), b loses (0), c has no score; t2 (lower better): b and c tie, both beat a
    assert wr == pytest.approx({"a": (1.0 + 0.0) / 2, "b": (0.0 + 0.75) / 2, "c": 0.75})
    assert stats.mean_win_rate({"t": {"a": 1.0}}, {}) == {"a": None}


def test_tau_b_table_pairs_tasks_on_common_models_oriented() -> None:
    scores = {
        "mad": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 0.5},
        "acc": {"a": 0.9, "b": 0.8, "c": 0.1},
        "tiny": {"a": 0.1, "b": 0.2},
    }
    rows = ranks.tau_b_table(scores, {"mad": True, "acc": False, "tiny": False})
    assert len(rows) == 1  # "tiny" shares only two models with each
    row = rows[0]
    assert (row["task_a"], row["task_b"]) == ("acc", "mad")
    # on a, b, c: lower MAD = better and higher accuracy = better order them alike: tau = 1, no inversion
    assert row["tau"] == pytest.approx(1.0) and row["inversions"] == 0 and row["n_models"] == 3
    tr = ranks.task_ranks(scores, {"mad": True, "acc": False, "tiny": False})
    assert tr["mad"] == {"a": 2.0, "b": 3.0, "c": 4.0, "d": 1.0}
    assert ranks.task_ranks({"empty": {}}, {"empty": False}) == {"empty": {}}


# --------------------------------------------------------------------------- boundaries the mutation check found


def test_two_models_leave_parallel_analysis_nothing_to_retain() -> None:
    """With two rows every permutation of a column is itself or its swap, which only flips the sign of
    that column's correlations: each null holds the observed eigenvalues, and a component that is no
    larger than chance is not retained (strictly larger is needed)."""
    x = np.array([[0.9, 0.2, 0.5], [0.4, 0.7, 0.1]])
    res = stats.parallel_analysis(x, n_permutations=50)
    assert res["observed"] == pytest.approx(res["threshold"], abs=1e-12)
    assert res["observed"][0] == pytest.approx(3.0)  # two points: every correlation is +-1, one component
    assert not res["retained"].any() and res["n_components"] == 0
    assert stats.parallel_analysis(x)["n_permutations"] == 1000  # the default


def test_parallel_analysis_counts_every_component_when_all_are_retained() -> None:
    # At a low quantile every observed eigenvalue can exceed its null's: n_components is then p, not 0.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3)) + np.outer(rng.normal(size=6), [1, 1, 1])
    res = stats.parallel_analysis(x, n_permutations=200, seed=1, quantile=0.05)
    assert res["retained"].all() and res["n_components"] == 3
    # the count stops at the first component not retained, as recomputed here from the flags
    res = stats.parallel_analysis(x, n_permutations=200, seed=1)
    flags = res["retained"].tolist()
    assert res["n_components"] == (flags.index(False) if False in flags else len(flags))


def test_collinear_tasks_have_no_negative_eigenvalue() -> None:
    """Tasks that are linear functions of one another: the correlation matrix has rank 1, its other
    eigenvalues are 0 (numpy returns them as -1e-15 noise: never reported below 0)."""
    col = np.random.default_rng(29 * 10 + 5).normal(size=29)
    x = np.column_stack([col * (k + 1) + k for k in range(5)])
    assert np.linalg.eigvalsh(np.corrcoef(x, rowvar=False)).min() < 0  # the noise this guards against
    res = stats.pca(x)
    assert res["eigenvalues"].min() >= 0 and res["variance_explained"].min() >= 0
    assert res["eigenvalues"][0] == pytest.approx(5.0)
    assert res["loadings"].dtype == np.float64 and res["eigenvalues"].dtype == np.float64
    pa = stats.parallel_analysis(x, n_permutations=20)
    assert pa["observed"].min() >= 0 and pa["threshold"].min() >= 0


def test_spearman_of_two_models_is_plus_or_minus_one() -> None:
    # Two models: the centred ranks are -1/2, 1/2, so the denominator is 1/2 (not 1)
    got = stats.rowwise_spearman(np.array([[1.0, 2.0], [1.0, 2.0]]), np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert got.tolist() == [1.0, -1.0]
    assert stats.spearman_rho([0.3, 0.9], [0.1, 0.2]) == 1.0


def test_scores_given_as_booleans_or_integers_rank_as_the_same_floats() -> None:
    """0/1 verdicts passed as Python bools, or ranks as ints, are numbers: the same results as floats."""
    verdicts = [True, False, True, False]
    floats = [1.0, 0.0, 1.0, 0.0]
    assert stats.orient(verdicts, True).tolist() == stats.orient(floats, True).tolist() == [-1.0, -0.0, -1.0, -0.0]
    assert stats.rank_scores(verdicts, True).tolist() == stats.rank_scores(floats, True).tolist()
    assert (
        stats.discordant_pairs(verdicts, [False, True, True, False])
        == stats.discordant_pairs(floats, [0.0, 1.0, 1.0, 0.0])
        == 1
    )  # only pair (0, 1); the others tie in x or in y, or agree
    tau = stats.kendall_tau_b([1, 2, 3, 4], [True, False, True, True])
    assert tau["tau"] == pytest.approx(st.kendalltau([1, 2, 3, 4], [1, 0, 1, 1]).statistic)


def test_win_rate_goes_on_past_a_task_with_one_model() -> None:
    scores = {"lonely": {"a": 0.5}, "pair": {"a": 0.9, "b": 0.1}}
    assert stats.mean_win_rate(scores, {}) == {"a": 1.0, "b": 0.0}


def test_paired_bootstrap_ranks_a_lower_is_better_task_under_each_denominator() -> None:
    """Recomputed here per resample: the resampled task score under each model's own denominator,
    oriented (lower is better: negated) and ranked with scipy."""
    rng = np.random.default_rng(11)
    m, n, b = 3, 8, 30
    scores = rng.random((m, n)).round(2)
    valid = rng.random((m, n)) > 0.35
    valid[:, 0] = True
    use_valid = np.array([True, False, True])
    mad = stats.TaskItems(scores, valid, use_valid, lower_is_better=True)
    res = stats.paired_bootstrap([mad], [mad], n_resamples=b, seed=4, return_indices=True)
    (idx,) = res["indices"]
    for row in range(b):
        task = []
        for model in range(m):
            s, v = scores[model, idx[row]], valid[model, idx[row]]
            task.append((s[v].mean() if v.any() else np.inf) if use_valid[model] else s.mean())
        expected = st.rankdata(np.where(np.isinf(task), np.inf, task))  # lower score = rank 1; missing last
        assert res["boot_rank_a"][row].tolist() == pytest.approx(expected.tolist())
    point = [scores[k][valid[k]].mean() if use_valid[k] else scores[k].mean() for k in range(m)]
    assert res["rank_a"].tolist() == pytest.approx(st.rankdata(point).tolist())
    assert res["mean_rank_a"].tolist() == pytest.approx(st.rankdata(point).tolist())  # one task: its ranks
    assert res["mean_rank_b"].tolist() == res["mean_rank_a"].tolist()


def test_tau_b_table_goes_on_past_a_pair_with_too_few_models_and_orients_each_task() -> None:
    # "a" (a MAD: lower is better) shares 3 models with "c" but only 2 with "b", which comes first
    scores = {"a": {"x": 1.0, "y": 2.0, "z": 3.0}, "b": {"x": 0.1, "y": 0.2}, "c": {"x": 0.9, "y": 0.5, "z": 0.1}}
    rows = ranks.tau_b_table(scores, {"a": True, "b": False, "c": False})
    assert [(r["task_a"], r["task_b"]) for r in rows] == [("a", "c")]
    # lower MAD and higher accuracy order x, y, z alike: tau-b 1 (scipy on the oriented scores)
    assert rows[0]["tau"] == pytest.approx(st.kendalltau([-1.0, -2.0, -3.0], [0.9, 0.5, 0.1]).statistic) == 1.0
    assert rows[0]["inversions"] == 0
