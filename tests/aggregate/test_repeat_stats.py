"""Repeated generations (inference.repeats): the reducers, the headline's standard errors, the
sampling SD across repeats and retest agreement (pytest_benchaudit/aggregate/repeat_stats.py and the
summary rows of aggregate/results.py).

Every statistic is checked against something the package did not compute: scipy, a closed form
or an enumeration written out here.  Repeated records are written with the run-directory store and
read back by ``benchaudit summarize`` / ``show``, as a run's would be.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pytest_benchaudit.aggregate.repeat_stats import (
    clt_se,
    clustered_se,
    expected_best_of_k,
    paired_difference,
    pass_at_k,
    questions_needed,
    reduce_scores,
    reduce_verdicts,
)
from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.pipeline.stages import build_pipeline
from pytest_benchaudit.runs.store import RunDirectory
from pytest_benchaudit.testing.runs import complete_record

Z = stats.norm.ppf(0.975)


# --------------------------------------------------------------------------- helpers


def _card(denominator: str = "total", metric: str = "exact_match", by: str | None = None, **aggregation: Any) -> dict:
    fields: dict[str, Any] = {
        "scoring": {"metric": metric, "denominator": denominator},
        "aggregation": {"method": "micro", **({"by": by} if by else {}), **aggregation},
    }
    return build_pipeline("standardized", "toy", "mcq", fields).card()


def _rec(
    qid: str,
    repeat: int,
    correct: bool,
    *,
    model: str = "m",
    valid: bool = True,
    score: float | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return complete_record(
        {
            "benchmark": "toy",
            "task": "mcq",
            "question_id": qid,
            "question_index": int(qid[1:]),
            "model": model,
            "repeat": repeat,
            "valid": valid,
            "correct": correct and valid,
            "score": (1.0 if correct and valid else 0.0) if score is None else score,
            "invalid_reason": None if valid else "unparseable",
            "invalid_stage": None if valid else "extraction",
            "metric": "exact_match",
            "question_meta": meta or {},
        }
    )


def _known_p_records(p: list[float], k: int, seed: int, model: str = "m") -> list[dict[str, Any]]:
    """K records per question, question i correct with probability p[i] (what a server answering
    correctly with a known probability per question gives)."""
    rng = random.Random(seed)
    return [_rec(f"q{i}", r, rng.random() < pi, model=model) for r in range(k) for i, pi in enumerate(p)]


def _write_run(root: Path, records: list[dict[str, Any]], card: dict[str, Any]) -> Path:
    run = RunDirectory(root)
    run.write_run(pipeline_cards={"toy.mcq": card})
    for r in records:  # each record carries its card's hash, as a run's records do
        run.append({**r, "pipeline_hash": r.get("pipeline_hash") or card["hash"]})
    run.finish()
    return run.path


def _summarize(run_dir: Path) -> list[dict[str, Any]]:
    assert main(["summarize", str(run_dir)]) == 0
    return json.loads((run_dir / "summary.json").read_text())["results"]


# --------------------------------------------------------------------------- reducers


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_best_and_worst_of_k_are_the_mean_over_every_k_subset(n: int) -> None:
    rng = random.Random(n)
    values = [rng.choice([0.0, 0.25, 1.0, 3.5]) for _ in range(n)]
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(values, k))
        assert reduce_scores(values, "any", k=k) == pytest.approx(np.mean([max(s) for s in subsets]))
        assert reduce_scores(values, "all", k=k) == pytest.approx(np.mean([min(s) for s in subsets]))
        # lower is better (a MAD): the best is the smallest
        assert reduce_scores(values, "any", lower_is_better=True, k=k) == pytest.approx(
            np.mean([min(s) for s in subsets])
        )


@pytest.mark.parametrize(("n", "c", "k"), [(5, 0, 1), (5, 2, 1), (5, 2, 3), (10, 3, 5), (10, 10, 4), (4, 1, 4)])
def test_pass_at_k_is_chen_et_al_unbiased_estimator(n: int, c: int, k: int) -> None:
    closed = 1 - math.comb(n - c, k) / math.comb(n, k)
    # Chen et al. 2021's numerically stable product form, written out here.
    stable = 1.0 if n - c < k else 1 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    assert pass_at_k(n, c, k) == pytest.approx(closed) == pytest.approx(stable)
    values = [1.0] * c + [0.0] * (n - c)
    assert reduce_scores(values, "any", k=k) == pytest.approx(closed)
    assert expected_best_of_k(values, k) == pytest.approx(closed)


def test_majority_needs_more_than_half_and_mean_is_the_mean() -> None:
    assert reduce_scores([1, 0, 1], "majority") == 1.0
    assert reduce_scores([1, 0, 1, 0], "majority") == 0.0  # a tie is no majority
    assert reduce_scores([1, 1, 1, 0], "majority") == 1.0
    assert reduce_scores([0.2, 0.9, 0.4], "majority") == 0.4  # the median on a continuous score
    assert reduce_scores([3.0, 1.0, 2.0, 9.0], "majority", lower_is_better=True) == 3.0  # the worse middle
    assert reduce_scores([1, 0, 1, 1], "mean") == 0.75
    assert reduce_verdicts([True, False, False], "any") and not reduce_verdicts([True, False, True], "all")
    assert not reduce_verdicts([True, False], "majority") and reduce_verdicts([True, True, False], "mean")


# --------------------------------------------------------------------------- standard errors


def test_clt_se_is_scipy_sem_and_clustered_se_is_cr1_as_statsmodels() -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(3)
    values = rng.random(40).round(2).tolist()
    clusters = [f"c{i % 7}" for i in range(40)]
    assert clt_se(values) == pytest.approx(stats.sem(values))
    # statsmodels' cluster-robust SE of an intercept-only regression (its small-sample correction
    # G/(G-1) (N-1)/(N-K) is G/(G-1) at K = 1): CR1, an implementation we did not write.
    codes = [int(c[1:]) for c in clusters]
    fit = sm.OLS(np.array(values), np.ones(40)).fit(cov_type="cluster", cov_kwds={"groups": np.array(codes)})
    assert clustered_se(values, clusters) == pytest.approx(float(fit.bse[0]), rel=1e-12)
    # ...and Miller (2024) eq. 4 written out, times G/(G-1): SE_CLT^2 (n-1)/n + 1/n^2 sum_c sum_{i != j in c}.
    x, m, n = np.array(values), np.mean(values), len(values)
    cross = sum((x[i] - m) * (x[j] - m) for i in range(n) for j in range(n) if i != j and clusters[i] == clusters[j])
    miller0 = ((x - m) ** 2).sum() / n**2 + cross / n**2
    assert clustered_se(values, clusters) == pytest.approx(math.sqrt(7 / 6 * miller0))
    # Singleton clusters: the CLT standard error exactly (G/(G-1) = n/(n-1) turns sum d^2/n^2 into s^2/n).
    assert clustered_se(values, list(range(40))) == pytest.approx(stats.sem(values))
    assert clt_se([0.5]) is None and clustered_se([0.5], ["a"]) is None
    assert clustered_se([0.5, 1.0, 0.0], ["a", "a", "a"]) is None  # one group: no clustered SE


def test_questions_in_alike_clusters_widen_the_clustered_se(tmp_path: Path) -> None:
    # 10 topics of 6 questions: a topic is all right or all wrong, so its questions are one observation.
    records = [_rec(f"q{i}", 0, (i // 6) % 2 == 0, meta={"topic": f"t{i // 6}"}) for i in range(60)]
    (row,) = _summarize(_write_run(tmp_path, records, _card(by="topic")))
    values = [1.0 if (i // 6) % 2 == 0 else 0.0 for i in range(60)]
    topic_means = [np.mean(values[t * 6 : (t + 1) * 6]) for t in range(10)]
    assert row["se"] == pytest.approx(stats.sem(values))
    assert row["se_clustered"] > 2 * row["se"]
    # Hand count: each topic's deviations sum to +-3 (6 x +-0.5); CR1^2 = 10/9 * 10 * 9 / 60^2 = 1/36.
    assert row["se_clustered"] == pytest.approx(1 / 6)
    assert (row["n_groups"], row["clustered_by"], row["ci95_clustered_method"]) == (10, "topic", "wilson_effective_n")
    # Wilson on the design-effect n = 0.25 / (1/36) = 9 trials with t(9): the 10 topics, not the 60 questions.
    q = stats.t.ppf(0.975, 9)
    centre, half = (0.5 + q * q / 18) / (1 + q * q / 9), q * math.sqrt(0.25 / 9 + q * q / 324) / (1 + q * q / 9)
    assert row["ci95_clustered"] == pytest.approx([centre - half, centre + half], abs=1e-6)
    assert np.std(topic_means) > 0  # (the topics do differ)


# --------------------------------------------------------------------------- a repeated run


P_KNOWN = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0] * 25  # 300 questions


def test_known_probabilities_reproduce_sampling_sd_and_retest_agreement(tmp_path: Path) -> None:
    k = 5
    run_dir = _write_run(tmp_path, _known_p_records(P_KNOWN, k, seed=11), _card())
    (row,) = _summarize(run_dir)
    n = len(P_KNOWN)
    assert (row["repeats"], row["n_questions"], row["n"], row["reducer"]) == (k, n, n * k, "mean")
    # The headline's SD across repeats: each repeat's headline is a mean of n independent Bernoullis,
    # SD = sqrt(sum p(1-p)) / n.  The K = 5 estimate's 95% interval (chi-square, K-1 dof) holds it.
    true_sd = math.sqrt(sum(p * (1 - p) for p in P_KNOWN)) / n
    s = row["sampling_sd"]
    lo = s * math.sqrt((k - 1) / stats.chi2.ppf(0.975, k - 1))
    hi = s * math.sqrt((k - 1) / stats.chi2.ppf(0.025, k - 1))
    assert lo <= true_sd <= hi
    # A question's K verdicts all agree with probability p^K + (1-p)^K; Wilson's interval on n questions.
    true_agreement = float(np.mean([p**k + (1 - p) ** k for p in P_KNOWN]))
    agree = round(row["retest_agreement"] * n)
    ci = stats.binomtest(agree, n).proportion_ci(method="wilson")
    assert ci.low <= true_agreement <= ci.high
    # The headline: the mean over questions of each question's mean, i.e. a hand count of correct records.
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert row["score"] == pytest.approx(sum(r["correct"] for r in records) / (n * k))
    per_question = [np.mean([r["score"] for r in records if r["question_id"] == f"q{i}"]) for i in range(n)]
    assert row["se"] == pytest.approx(stats.sem(per_question))
    # ...and the sampling SD a hand count per repeat index.
    per_repeat = [np.mean([r["score"] for r in records if r["repeat"] == j]) for j in range(k)]
    assert s == pytest.approx(np.std(per_repeat, ddof=1))
    assert row["se_clustered"] is None and row["ci95_clustered"] is None  # no aggregation.by


def test_the_reducer_is_read_from_the_card(tmp_path: Path) -> None:
    records = _known_p_records(P_KNOWN[:24], 4, seed=2)
    by_q: dict[str, list[float]] = {}
    for r in records:
        by_q.setdefault(r["question_id"], []).append(r["score"])
    for reducer, pass_k, expect in [
        ("majority", None, lambda v: float(sum(v) * 2 > len(v))),
        ("all", None, lambda v: float(all(v))),
        ("any", None, lambda v: float(any(v))),
        ("any", 2, lambda v: 1 - math.comb(len(v) - int(sum(v)), 2) / math.comb(len(v), 2)),
    ]:
        agg = {"reducer": reducer, **({"pass_k": pass_k} if pass_k else {})}
        card = build_pipeline(
            "standardized",
            "toy",
            "mcq",
            {
                "inference": {"repeats": 4},
                "scoring": {"metric": "exact_match", "denominator": "total"},
                "aggregation": {"method": "micro", **agg},
            },
        ).card()
        (row,) = summarize(records, {"toy.mcq": card})
        assert row["reducer"] == reducer
        assert row["score"] == pytest.approx(np.mean([expect(v) for v in by_q.values()])), reducer


def test_a_valid_denominator_reduces_each_question_over_its_valid_repeats() -> None:
    records = [
        _rec("q0", 0, True),
        _rec("q0", 1, False, valid=False),
        _rec("q0", 2, False),
        _rec("q1", 0, False, valid=False),
        _rec("q1", 1, False, valid=False),
        _rec("q2", 0, True),
        _rec("q2", 1, True),
    ]
    (row,) = summarize(records, {"toy.mcq": _card("valid")})
    # q0: 1 of its 2 valid repeats; q1: no valid repeat, left out; q2: 2 of 2.
    assert row["score"] == pytest.approx((0.5 + 1.0) / 2) and row["n_questions"] == 3
    (row,) = summarize(records, {"toy.mcq": _card("total")})
    assert row["score"] == pytest.approx((1 / 3 + 0 + 1) / 3)


# --------------------------------------------------------------------------- metamorphic


def test_reordering_records_or_renaming_repeats_changes_no_statistic(tmp_path: Path) -> None:
    records = _known_p_records(P_KNOWN[:60], 3, seed=5)
    cards = {"toy.mcq": _card(by="topic")}
    for r in records:
        r["question_meta"] = {"topic": f"t{int(r['question_id'][1:]) % 4}"}
    base = summarize(records, cards)
    shuffled = list(records)
    random.Random(0).shuffle(shuffled)
    # The same repeat indices permuted for every question (2 -> 0, 0 -> 1, 1 -> 2) is the same run.
    relabelled = [{**r, "repeat": (r["repeat"] + 1) % 3} for r in records]
    for other in (summarize(shuffled, cards), summarize(relabelled, cards)):
        for key in ("score", "se", "se_clustered", "sampling_sd", "retest_agreement", "repeats", "n_questions"):
            assert other[0][key] == pytest.approx(base[0][key]), key


def test_asked_once_the_headline_is_the_hand_count_it_always_was(tmp_path: Path) -> None:
    rng = random.Random(9)
    records = [_rec(f"q{i}", 0, rng.random() < 0.6, valid=rng.random() < 0.9) for i in range(200)]
    for r in records[::2]:
        del r["repeat"]  # a record from before the field
    run_dir = _write_run(tmp_path, records, _card())
    (row,) = _summarize(run_dir)
    correct = sum(r["correct"] for r in records)
    assert row["score"] == correct / 200 and row["score_valid"] == correct / sum(r["valid"] for r in records)
    ci = stats.binomtest(correct, 200).proportion_ci(method="wilson")
    assert row["ci95"] == pytest.approx([ci.low, ci.high], abs=1e-6)  # Wilson, as before repeats
    assert (row["repeats"], row["sampling_sd"], row["retest_agreement"]) == (1, None, None)
    assert row["se"] == pytest.approx(stats.sem([float(r["correct"]) for r in records]))


def test_show_prints_the_repeats_table_within_120_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _known_p_records(P_KNOWN[:40], 3, seed=1) + _known_p_records(
        P_KNOWN[:40], 3, seed=4, model="a-model-with-a-long-name"
    )
    run_dir = _write_run(tmp_path, records, _card())
    rows = _summarize(run_dir)
    capsys.readouterr()
    assert main(["show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "retest agree" in out and "sampling sd" in out and "40×3" in out
    assert f"{100 * rows[0]['retest_agreement']:.1f}%" in out and f"{100 * rows[0]['se']:.1f}" in out
    assert max(map(len, out.splitlines())) <= 120


def test_asked_once_no_repeats_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _write_run(tmp_path, [_rec(f"q{i}", 0, i % 2 == 0) for i in range(10)], _card())
    _summarize(run_dir)
    capsys.readouterr()
    assert main(["show", str(run_dir)]) == 0
    assert "retest agree" not in capsys.readouterr().out


# --------------------------------------------------------------------------- paired differences and power


def test_paired_difference_binary_is_exact_mcnemar() -> None:
    rng = np.random.default_rng(7)
    a = (rng.random(120) < 0.7).astype(float).tolist()
    b = (rng.random(120) < 0.6).astype(float).tolist()
    out = paired_difference(a, b, binary=True)
    only_a = sum(1 for x, y in zip(a, b) if x == 1 and y == 0)
    only_b = sum(1 for x, y in zip(a, b) if x == 0 and y == 1)
    assert out["p_value"] == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    d = np.array(a) - np.array(b)
    assert out["diff"] == pytest.approx(d.mean()) and out["se"] == pytest.approx(stats.sem(d))
    assert out["ci95"] == pytest.approx([d.mean() - Z * stats.sem(d), d.mean() + Z * stats.sem(d)], abs=1e-6)
    assert out["mde80"] == pytest.approx((Z + stats.norm.ppf(0.8)) * d.std(ddof=1) / math.sqrt(120))


def test_paired_difference_continuous_is_scipy_ttest_rel() -> None:
    rng = np.random.default_rng(8)
    a = rng.random(50).tolist()
    b = (np.array(a) - 0.05 + 0.1 * rng.random(50)).tolist()
    out = paired_difference(a, b, binary=False)
    assert out["test"] == "paired_t" and out["p_value"] == pytest.approx(stats.ttest_rel(a, b).pvalue)


def test_questions_needed_matches_a_simulated_power_of_80_percent() -> None:
    # Closed form: n = (z_.975 + z_.8)^2 var / mde^2.
    n = questions_needed(0.05, 0.2, 0.3, 3)
    assert n == math.ceil((Z + stats.norm.ppf(0.8)) ** 2 * (0.2 + 0.3 / 3) / 0.05**2)
    # A simulation written here: paired differences with that variance and mean 0.05 on n questions
    # are significant (two-sided z test at 5%) about 80% of the time.
    rng = np.random.default_rng(0)
    d = rng.normal(0.05, math.sqrt(0.2 + 0.1), size=(4000, n))
    power = np.mean(np.abs(d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))) > Z)
    assert 0.77 <= power <= 0.83


def test_both_tables_print_the_same_interval_and_say_which(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33: the main table and the repeats table both said "95% CI" for different intervals.  A grouped
    run asked 3 times: both print the clustered interval, marked ‡, and the legend says how each was made."""
    records = _known_p_records(P_KNOWN[:48], 3, seed=6)
    for r in records:
        r["question_meta"] = {"topic": f"t{int(r['question_id'][1:]) % 6}"}
    run_dir = _write_run(tmp_path, records, _card(by="topic"))
    (row,) = _summarize(run_dir)
    capsys.readouterr()
    assert main(["show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    low, high = row["ci95_clustered"]
    cell = f"{100 * low:.1f}–{100 * high:.1f}‡"
    assert out.count(cell) == 2  # the main table's row and the repeats table's
    # The plain interval is not printed as if it were the one a gate reads.
    assert f"{100 * row['ci95'][0]:.1f}–{100 * row['ci95'][1]:.1f} " not in out
    legend = " ".join(line for line in out.splitlines() if line.startswith("95% CI") or "clustered by" in line)
    assert "‡ clustered by topic (6 groups): Wilson on the design-effect n, t quantile" in legend
    assert "about 2 runs in 3" in out and max(map(len, out.splitlines())) <= 120
