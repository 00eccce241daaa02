"""Tests for pytest_benchaudit.aggregate.results: per-task results (both denominators, the
headline, stage rates, invalid reasons, Wilson intervals, breakdowns) and the
per-benchmark micro / macro / unspecified / single-task combination.

Records are plain dicts built by hand, exactly the fields aggregation reads."""

from __future__ import annotations

from typing import Any

import pytest
from scipy import stats

from pytest_benchaudit.aggregate.results import benchmark_scores, confidence_interval, group_key, summarize

# --------------------------------------------------------------------------- helpers


def rec(
    *,
    correct: bool = False,
    valid: bool = True,
    reason: str | None = None,
    stage: str | None = None,
    benchmark: str = "b",
    task: str = "t",
    model: str = "m",
    variant: str = "",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One record; an invalid record defaults to an extraction failure ("unparseable")."""
    if not valid:
        reason = reason or "unparseable"
        stage = stage or ("extraction" if reason == "unparseable" else "inference")
        correct = False
    return {
        "benchmark": benchmark,
        "task": task,
        "model": model,
        "variant": variant,
        "pipeline": "p",
        "pipeline_hash": "h",
        "valid": valid,
        "invalid_reason": reason if not valid else None,
        "invalid_stage": stage if not valid else None,
        "score": 1.0 if correct else 0.0,
        "correct": correct,
        "metric": "exact_match",
        "question_meta": meta or {},
    }


def card(denominator: str = "total", method: str = "micro", by: str | None = None) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "scoring.metric": "exact_match",
        "scoring.denominator": denominator,
        "aggregation.method": method,
    }
    if by is not None:
        fields["aggregation.by"] = by
    return {"fields": fields}


def wilson(k: int, n: int) -> list[float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return [round(ci.low, 6), round(ci.high, 6)]


def two_of_thousand() -> list[dict[str, Any]]:
    """1000 items, only 2 parseable, both right."""
    return [rec(correct=True), rec(correct=True)] + [rec(valid=False) for _ in range(998)]


# --------------------------------------------------------------------------- denominators / headline


def test_two_of_thousand_parseable_under_total_denominator():
    (r,) = summarize(two_of_thousand(), {"b.t": card("total")})
    assert r["n"] == 1000 and r["n_valid"] == 2 and r["n_correct"] == 2
    assert r["score_valid"] == pytest.approx(1.0)
    assert r["score_total"] == pytest.approx(0.002)
    assert r["score"] == pytest.approx(0.002)
    assert r["denominator"] == "total"
    assert r["invalid_rate"] == pytest.approx(0.998)
    assert r["ci95"] == wilson(2, 1000)


def test_two_of_thousand_parseable_under_valid_denominator():
    (r,) = summarize(two_of_thousand(), {"b.t": card("valid")})
    assert r["score_valid"] == pytest.approx(1.0)
    assert r["score_total"] == pytest.approx(0.002)
    assert r["score"] == pytest.approx(1.0)
    assert r["denominator"] == "valid"
    # the interval is over the headline's items: 2 of 2
    assert r["ci95"] == wilson(2, 2)
    assert r["ci95"][1] == pytest.approx(1.0)
    assert r["ci95"][0] < 0.5  # two items say little


def test_unspecified_denominator_has_no_headline_and_no_interval():
    (r,) = summarize(two_of_thousand(), {"b.t": card("unspecified")})
    assert r["score"] is None
    assert r["ci95"] is None
    # both denominators are still reported
    assert r["score_total"] == pytest.approx(0.002)
    assert r["score_valid"] == pytest.approx(1.0)
    assert r["denominator"] == "unspecified"


def test_no_card_means_unspecified_denominator():
    (r,) = summarize([rec(correct=True), rec()])
    assert r["denominator"] == "unspecified"
    assert r["score"] is None and r["ci95"] is None
    assert r["metric"] == "exact_match"  # taken from the records


def test_valid_denominator_with_no_valid_item_has_no_score():
    recs = [rec(valid=False) for _ in range(3)]
    (r,) = summarize(recs, {"b.t": card("valid")})
    assert r["score_valid"] is None
    assert r["score"] is None and r["ci95"] is None
    assert r["score_total"] == 0.0
    assert r["invalid_rate"] == 1.0


def test_result_carries_identity_and_metric_fields():
    (r,) = summarize([rec(benchmark="cti_bench", task="mcq", model="qwen", variant="v1")], {"cti_bench.mcq": card()})
    assert (r["benchmark"], r["task"], r["model"], r["variant"]) == ("cti_bench", "mcq", "qwen", "v1")
    assert r["pipeline"] == "p" and r["pipeline_hash"] == "h"
    assert r["metric"] == "exact_match"
    assert r["lower_is_better"] is False
    assert "breakdown" not in r  # no aggregation.by


# --------------------------------------------------------------------------- rates and reasons


def test_stage_rates_invalid_rate_and_reasons():
    recs = (
        [rec(correct=True)] * 4
        + [rec(correct=False)] * 2
        + [rec(valid=False, reason="unparseable")] * 2
        + [rec(valid=False, reason="inference_error")]
        + [rec(valid=False, reason="truncated")]
    )
    (r,) = summarize(recs, {"b.t": card("total")})
    assert r["n"] == 10 and r["n_valid"] == 6 and r["n_correct"] == 4
    assert r["invalid_rate"] == pytest.approx(0.4)
    assert r["invalid_reasons"] == {"unparseable": 2, "inference_error": 1, "truncated": 1}
    # cumulative pass rates: inference (2 failed there), extraction (= valid share), correct
    assert r["stage_rates"]["inference_ok"] == pytest.approx(0.8)
    assert r["stage_rates"]["extraction_ok"] == pytest.approx(0.6)
    assert r["stage_rates"]["correct"] == pytest.approx(0.4)
    assert r["score"] == pytest.approx(0.4)
    assert r["score_valid"] == pytest.approx(4 / 6)


def test_all_valid_has_no_invalid_reasons():
    (r,) = summarize([rec(correct=True), rec()], {"b.t": card()})
    assert r["invalid_reasons"] == {}
    assert r["invalid_rate"] == 0.0
    assert r["stage_rates"] == {"inference_ok": 1.0, "extraction_ok": 1.0, "correct": 0.5}


# --------------------------------------------------------------------------- confidence interval


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (1, 1), (437, 1000)])
def test_wilson_interval_matches_scipy(k: int, n: int):
    values = [1.0] * k + [0.0] * (n - k)
    ci = confidence_interval(values, binary=True)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert ci == pytest.approx([ref.low, ref.high], abs=1e-6)
    assert 0.0 <= ci[0] <= k / n <= ci[1] <= 1.0


def test_interval_of_nothing_is_none():
    assert confidence_interval([], binary=True) is None
    assert confidence_interval([], binary=False) is None


def test_continuous_interval_is_student_t():
    values = [0.2, 0.4, 0.6, 0.8]
    low, high = confidence_interval(values, binary=False)
    ref = stats.t.interval(0.95, 3, loc=0.5, scale=stats.sem(values))
    assert (low, high) == pytest.approx(ref, abs=1e-6)
    # No spread to measure (one question, or all alike): no interval, never a zero-width one (issue 33).
    assert confidence_interval([0.3], binary=False) is None
    assert confidence_interval([0.5, 0.5, 0.5], binary=False) is None


def test_summary_interval_matches_scipy_for_headline():
    recs = [rec(correct=True)] * 7 + [rec()] * 13
    (r,) = summarize(recs, {"b.t": card("total")})
    assert r["ci95"] == wilson(7, 20)
    assert r["ci95"][0] < r["score"] < r["ci95"][1]


# --------------------------------------------------------------------------- breakdown


def test_breakdown_counts_list_valued_meta_in_each_topic():
    recs = [
        rec(correct=True, meta={"topic": ["crypto", "web"]}),
        rec(correct=False, meta={"topic": ["web"]}),
        rec(correct=True, meta={"topic": "network"}),
        rec(valid=False, meta={"topic": ["crypto"]}),
    ]
    (r,) = summarize(recs, {"b.t": card("total", by="topic")})
    bd = r["breakdown"]["topic"]
    assert list(bd) == ["crypto", "network", "web"]  # sorted
    assert bd["crypto"] == {"n": 2, "score": 0.5}
    assert bd["web"] == {"n": 2, "score": 0.5}
    assert bd["network"] == {"n": 1, "score": 1.0}
    # an item in two topics is counted in both
    assert sum(v["n"] for v in bd.values()) == 5 > r["n"]


def test_breakdown_under_valid_denominator_skips_invalid_items_in_score():
    recs = [
        rec(correct=True, meta={"topic": ["crypto"]}),
        rec(valid=False, meta={"topic": ["crypto"]}),
        rec(valid=False, meta={"topic": ["web"]}),
    ]
    (r,) = summarize(recs, {"b.t": card("valid", by="topic")})
    bd = r["breakdown"]["topic"]
    assert bd["crypto"] == {"n": 2, "score": 1.0}
    assert bd["web"] == {"n": 1, "score": None}


def test_breakdown_missing_meta_field_groups_under_none():
    recs = [rec(correct=True, meta={"topic": "a"}), rec(correct=True)]
    (r,) = summarize(recs, {"b.t": card("total", by="topic")})
    assert r["breakdown"]["topic"] == {"None": {"n": 1, "score": 1.0}, "a": {"n": 1, "score": 1.0}}


# --------------------------------------------------------------------------- grouping


def test_grouping_by_model_and_variant_in_first_seen_order():
    recs = [
        rec(model="m2", correct=True),
        rec(model="m1", correct=False),
        rec(model="m2", variant="cot", correct=False),
        rec(model="m1", correct=True),
        rec(model="m2", correct=True),
    ]
    results = summarize(recs, {"b.t": card("total")})
    keys = [(r["model"], r["variant"]) for r in results]
    assert keys == [("m2", ""), ("m1", ""), ("m2", "cot")]
    by_key = {(r["model"], r["variant"]): r for r in results}
    assert by_key[("m2", "")]["n"] == 2 and by_key[("m2", "")]["score"] == 1.0
    assert by_key[("m1", "")]["n"] == 2 and by_key[("m1", "")]["score"] == 0.5
    assert by_key[("m2", "cot")]["n"] == 1 and by_key[("m2", "cot")]["score"] == 0.0


def test_group_key_defaults_variant():
    r = rec()
    del r["variant"]
    assert group_key(r) == ("b", "t", "m", "")


def test_variant_specific_card_wins_over_task_card():
    recs = [rec(correct=True), rec(valid=False), rec(variant="v", correct=True), rec(variant="v", valid=False)]
    cards = {"b.t": card("total"), "b.t|v": card("valid")}
    plain, variant = summarize(recs, cards)
    assert plain["denominator"] == "total" and plain["score"] == 0.5
    assert variant["denominator"] == "valid" and variant["score"] == 1.0


# --------------------------------------------------------------------------- benchmark scores


def two_tasks(denominators: tuple[str, str] = ("total", "total"), method: str = "micro"):
    """Task t1: 1 of 2 right (both valid); task t2: 9 of 10 valid, 8 right."""
    recs = [rec(task="t1", correct=True), rec(task="t1")]
    recs += [rec(task="t2", correct=True)] * 8 + [rec(task="t2")] + [rec(task="t2", valid=False)]
    cards = {"b.t1": card(denominators[0], method), "b.t2": card(denominators[1], method)}
    return summarize(recs, cards), cards


def test_benchmark_micro_pools_items():
    results, cards = two_tasks(method="micro")
    (b,) = benchmark_scores(results, cards)
    assert b["method"] == "micro"
    assert b["score"] == pytest.approx((1 + 8) / (2 + 10))
    assert b["tasks"] == ["t1", "t2"] and b["n"] == 12
    assert b["note"] == ""


def test_benchmark_micro_uses_each_tasks_denominator():
    results, cards = two_tasks(denominators=("total", "valid"), method="micro")
    (b,) = benchmark_scores(results, cards)
    # t1 over 2 items, t2 over its 9 valid items
    assert b["score"] == pytest.approx((1 + 8) / (2 + 9))
    assert b["method"] == "micro"


def test_benchmark_macro_is_unweighted_mean():
    results, cards = two_tasks(method="macro")
    (b,) = benchmark_scores(results, cards)
    assert b["method"] == "macro"
    assert b["score"] == pytest.approx((0.5 + 0.8) / 2)
    # and differs from the pooled score
    assert b["score"] != pytest.approx(9 / 12)


def test_benchmark_unspecified_method_has_no_score_and_says_why():
    results, cards = two_tasks(method="unspecified")
    (b,) = benchmark_scores(results, cards)
    assert b["score"] is None and b["method"] is None
    assert b["note"] == "aggregation unspecified"


def test_benchmark_tasks_disagreeing_on_method_have_no_score():
    results, _ = two_tasks()
    cards = {"b.t1": card("total", "micro"), "b.t2": card("total", "macro")}
    (b,) = benchmark_scores(results, cards)
    assert b["score"] is None
    assert "disagree" in b["note"]


def test_benchmark_without_cards_is_unspecified():
    results, _ = two_tasks()
    (b,) = benchmark_scores(results)
    assert b["score"] is None and b["note"] == "aggregation unspecified"


def test_benchmark_with_a_task_without_headline_has_no_score():
    results, cards = two_tasks(denominators=("total", "unspecified"), method="micro")
    (b,) = benchmark_scores(results, cards)
    assert b["score"] is None
    assert b["note"] == "a task has no headline score"


def test_single_task_benchmark_takes_the_task_score_whatever_the_method():
    recs = [rec(correct=True)] * 3 + [rec()]
    cards = {"b.t": card("total", "unspecified")}
    results = summarize(recs, cards)
    (b,) = benchmark_scores(results, cards)
    assert b["score"] == pytest.approx(0.75)
    assert b["method"] == "single task"
    assert b["note"] == ""


def test_benchmark_scores_group_by_model_and_variant():
    recs = []
    for model, variant, k in [("m1", "", 1), ("m2", "", 2), ("m1", "cot", 0)]:
        for task in ("t1", "t2"):
            recs += [rec(task=task, model=model, variant=variant, correct=i < k) for i in range(2)]
    cards = {"b.t1": card("total", "macro"), "b.t2": card("total", "macro")}
    out = benchmark_scores(summarize(recs, cards), cards)
    got = {(b["model"], b["variant"]): b["score"] for b in out}
    assert got == {("m1", ""): 0.5, ("m2", ""): 1.0, ("m1", "cot"): 0.0}
    assert all(b["n"] == 4 and b["tasks"] == ["t1", "t2"] for b in out)


def test_benchmark_score_refuses_to_mix_metric_kinds():
    """An accuracy and a mean absolute error cannot be averaged into one benchmark number."""
    from pytest_benchaudit.aggregate.results import benchmark_scores

    results = [
        {
            "benchmark": "b",
            "task": "acc",
            "model": "m",
            "variant": "",
            "pipeline": "p",
            "n": 10,
            "n_valid": 10,
            "score": 0.8,
            "metric": "exact_match",
            "lower_is_better": False,
            "denominator": "total",
        },
        {
            "benchmark": "b",
            "task": "mad",
            "model": "m",
            "variant": "",
            "pipeline": "p",
            "n": 10,
            "n_valid": 10,
            "score": 1.7,
            "metric": "cvss_abs_error",
            "lower_is_better": True,
            "denominator": "total",
        },
    ]
    cards = {f"b.{t}": {"fields": {"aggregation.method": "micro"}} for t in ("acc", "mad")}
    (entry,) = benchmark_scores(results, cards)
    assert entry["score"] is None and "lower-is-better" in entry["note"]


def test_summarize_streams_records_without_keeping_them():
    """A generator of many large records (what the controller reads back from records.jsonl) is
    summarised in memory that does not grow with the records: compact columns, not the dicts."""
    import tracemalloc

    def many(n: int):
        for i in range(n):
            r = rec(correct=i % 3 == 0, valid=i % 10 != 0, meta={"topic": "a" if i % 2 else "b"})
            r["raw_output"] = "x" * 2000 + str(i)
            yield r

    tracemalloc.start()
    try:
        (r,) = summarize(many(20_000), {"b.t": card("valid", by="topic")})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (r["n"], r["n_valid"]) == (20_000, 18_000)
    assert r["breakdown"]["topic"]["a"]["n"] == 10_000
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MiB for 20,000 records (they alone are ~45 MiB)"
    # The same numbers as summarising a list.
    assert summarize(list(many(300)), {"b.t": card("valid", by="topic")}) == summarize(
        many(300), {"b.t": card("valid", by="topic")}
    )
