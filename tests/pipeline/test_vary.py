"""--vary: single-field counterfactuals in one run (variants, items, deltas, requests at the server)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.aggregate.results import summarize, summary_document, variant_deltas
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, build_pipeline
from pytest_benchaudit.pipeline.variants import (
    build_variants,
    card_key,
    short_field,
    variant_name,
)
from pytest_benchaudit.report.terminal import render_variant_deltas
from pytest_benchaudit.scoring.names import check_vary
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.toy import TOY_QUESTIONS, toy_script

VARY = ["--vary", "inference.max_tokens=5,16,2048", "--vary", "scoring.denominator=valid"]
VARIANTS = ["max_tokens=5", "max_tokens=16", "max_tokens=2048", "denominator=valid"]


def base_pipeline(**fields: Any) -> Pipeline:
    data = {
        "prompt": {"template": "plain", "format": {"mode": "chat", "system_role": "none", "few_shot": 0}},
        "inference": {"max_tokens": 2048, "stop": []},
        "extraction": {"rule": "final_answer_letter", "reasoning": "strip"},
        "scoring": {"metric": "exact_match", "denominator": "total"},
        "aggregation": {"method": "micro"},
    }
    data.update(fields)
    return build_pipeline("standardized", "toy", "mcq", data)


# -- variants.py (pure) ---------------------------------------------------------------


def test_variants_one_field_each_base_first() -> None:
    base = base_pipeline()
    variants = build_variants(base, [("inference.max_tokens", [5, 16, 2048]), ("scoring.denominator", ["valid"])])
    assert [v.name for v in variants] == ["", *VARIANTS]
    assert variants[0].pipeline is base and variants[0].is_base
    for v in variants[1:]:
        changed = {k for k, val in v.pipeline.card()["fields"].items() if base.card()["fields"][k] != val}
        assert changed <= {v.field}  # exactly one field changes (none when equal to the base)
        assert v.pipeline.overrides == {v.field: v.value}
    five, _sixteen, same, denom = variants[1:]
    assert five.pipeline.inference.max_tokens == 5 and five.upstream and five.stage == "inference"
    assert five.pipeline.hash != base.hash and five.pipeline.upstream_hash != base.upstream_hash
    # downstream: same upstream hash (same request), different pipeline hash
    assert not denom.upstream and denom.info()["kind"] == "downstream"
    assert denom.pipeline.upstream_hash == base.upstream_hash and denom.pipeline.hash != base.hash
    # a value equal to the base value is kept, flagged, and needs no generation
    assert same.same_as_base and not same.upstream and same.pipeline.hash == base.hash
    assert same.info()["kind"] == "upstream" and same.info()["needs_generations"] is False
    assert not five.same_as_base and five.info()["base_value"] == 2048


def test_variant_names_readable_and_stable() -> None:
    assert short_field("inference.max_tokens") == "max_tokens"
    assert short_field("scoring.denominator") == "denominator"
    assert short_field("extraction.rule") == "extraction.rule"  # "rule" alone says nothing
    assert short_field("aggregation.method") == "aggregation.method"
    assert short_field("inference") == "inference"
    assert variant_name("inference.stop", ["\n"]) == 'stop=["\\n"]'
    assert variant_name("inference.decoding.temperature", 0.7) == "temperature=0.7"
    assert variant_name("extraction.rule", "final_line") == "extraction.rule=final_line"
    assert "::" not in variant_name("dataset.subset", "a::b")
    # the validated value names the variant, however it was typed; duplicates collapse
    variants = build_variants(base_pipeline(), [("inference.max_tokens", [5, 5.0]), ("inference.stop", [["\n"], []])])
    assert [v.name for v in variants] == ["", "max_tokens=5", 'stop=["\\n"]', "stop=[]"]
    assert variants[-1].same_as_base  # the base already sends stop=[]
    assert card_key("toy", "mcq", "") == "toy.mcq" and card_key("toy", "mcq", "max_tokens=5") == "toy.mcq|max_tokens=5"


def test_variant_values_checked_against_names() -> None:
    with pytest.raises(PipelineError, match=r"--vary extraction.rule=psychic.*not a known rule.*final_answer_letter"):
        check_vary([("extraction.rule", ["final_line", "psychic"])])
    with pytest.raises(PipelineError, match=r"--vary scoring.metric=nope.*not a known metric"):
        check_vary([("scoring.metric", ["nope"])])
    check_vary([("inference.max_tokens", [5])])


# -- aggregate.variant_deltas (pure) ----------------------------------------------------


def _rec(
    qid: str,
    variant: str,
    *,
    valid: bool = True,
    correct: bool = False,
    stage: str | None = None,
    reason: str | None = None,
    score: float | None = None,
) -> dict[str, Any]:
    return {
        "benchmark": "toy",
        "task": "mcq",
        "model": "m",
        "variant": variant,
        "question_id": qid,
        "pipeline": "standardized",
        "pipeline_hash": "h",
        "valid": valid,
        "correct": correct,
        "score": float(correct) if score is None else score,
        "invalid_reason": reason,
        "invalid_stage": stage,
        "metric": "exact_match",
    }


def _cards(**denominators: str) -> dict[str, dict[str, Any]]:
    return {
        card_key("toy", "mcq", name): {"fields": {"scoring.metric": "exact_match", "scoring.denominator": d}}
        for name, d in denominators.items()
    }


def test_moved_by_inference_extraction_scoring() -> None:
    base = [
        _rec("a", "", correct=True),
        _rec("b", "", correct=True),
        _rec("c", ""),
        _rec("d", "", valid=False, stage="extraction", reason="unparseable"),
    ]
    trunc = [_rec(q, "max_tokens=5", valid=False, stage="inference", reason="truncated") for q in "abc"] + [
        _rec("d", "max_tokens=5", valid=False, stage="extraction", reason="unparseable")
    ]
    unread = [
        _rec("a", "extraction.rule=x", correct=True),
        _rec("b", "extraction.rule=x", valid=False, stage="extraction", reason="unparseable"),
        _rec("c", "extraction.rule=x"),
        _rec("d", "extraction.rule=x", valid=False, stage="extraction", reason="unparseable"),
    ]
    valid = [{**r, "variant": "denominator=valid"} for r in base]
    verdicts = [
        _rec("a", "metric=y", correct=True),
        _rec("b", "metric=y"),
        _rec("c", "metric=y"),
        _rec("d", "metric=y", valid=False, stage="extraction", reason="unparseable"),
    ]
    cards = _cards(
        **{
            "": "total",
            "max_tokens=5": "total",
            "extraction.rule=x": "total",
            "denominator=valid": "valid",
            "metric=y": "total",
        }
    )
    results = summarize(base + trunc + unread + valid + verdicts, cards)
    rows = {r["variant"]: r for r in variant_deltas(results, cards)}
    assert list(rows) == ["max_tokens=5", "extraction.rule=x", "denominator=valid", "metric=y"]
    five = rows["max_tokens=5"]
    assert (five["score"], five["base_score"]) == (0.0, 0.5) and five["delta_pp"] == pytest.approx(-50)
    assert five["moved_by"] == "inference" and "truncated +3" in five["moved_by_detail"]
    assert five["invalid_rate"] == 1.0 and five["base_invalid_rate"] == 0.25 and five["better"] is False
    assert sum(five["contributions"].values()) == pytest.approx(five["delta"])
    assert rows["extraction.rule=x"]["moved_by"] == "extraction"
    assert "unparseable +1" in rows["extraction.rule=x"]["moved_by_detail"]
    d = rows["denominator=valid"]
    assert d["moved_by"] == "scoring" and d["moved_by_detail"] == "denominator total -> valid"
    assert d["delta_pp"] == pytest.approx(100 * (2 / 3 - 1 / 2)) and d["better"] is True
    assert rows["metric=y"]["moved_by"] == "scoring" and "different verdicts" in rows["metric=y"]["moved_by_detail"]


def test_lower_is_better_delta_in_metric_unit() -> None:
    base = [_rec("a", "", score=1.0), _rec("b", "", score=2.0)]
    var = [_rec("a", "v", score=0.5), _rec("b", "v", score=0.5)]
    for r in base + var:
        r["metric"] = "cvss_abs_error"
    cards = {
        "toy.mcq": {"fields": {"scoring.metric": "cvss_abs_error", "scoring.denominator": "total"}},
        "toy.mcq|v": {"fields": {"scoring.metric": "cvss_abs_error", "scoring.denominator": "total"}},
    }
    (row,) = variant_deltas(summarize(base + var, cards), cards)
    assert row["lower_is_better"] and row["delta_pp"] is None and row["unit"] == "cvss_abs_error"
    assert row["delta"] == pytest.approx(-1.0) and row["better"] is True and row["moved_by"] == "scoring"
    text = render_variant_deltas([row])
    assert "-1.000 MAE better" in text and "Δ (metric unit)" in text


def test_summary_document_has_variants() -> None:
    doc = summary_document([], [], [])
    assert doc == {"results": [], "benchmarks": [], "gates": [], "variants": []}


# -- end to end -------------------------------------------------------------------------


def budget_script() -> Any:
    """The toy replies, except that a budget under 16 tokens stops inside the reasoning."""
    toy = toy_script()

    def script(call: Call) -> Reply:
        if call.path.endswith("/chat/completions") and call.body.get("max_tokens", 10**6) < 16:
            return Reply(content="Let me weigh the options one by", finish_reason="length")
        return toy(call)

    return script


def run_vary(pytester: pytest.Pytester, server: ScriptedServer, *extra: str, out: str = "out") -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        out,
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        "--no-cache",
        "-k",
        "mcq",
        *extra,
    )


def completions(server: ScriptedServer) -> list[Call]:
    return [c for c in server.calls if c.path.endswith("/chat/completions")]


def test_vary_end_to_end(pytester: pytest.Pytester, toy) -> None:
    n = len(TOY_QUESTIONS)
    with ScriptedServer(budget_script()) as server:
        result = run_vary(pytester, server, *VARY, "-rA")
        calls = completions(server)
    # base 6 passed / 6 failed; max_tokens=5 all fail; 16 and 2048 as the base; denominator as the base
    result.assert_outcomes(passed=6 * 4, failed=6 * 4 + n)
    out = read_run(only_run_dir(pytester.path / "out"))
    # item ids: the base keeps q0001[toy-model], each variant q0001[toy-model|<variant>]
    ids = {r["item_id"].split("::")[-1] for r in out["records"]}
    assert "q0001[toy-model]" in ids and "q0001[toy-model|max_tokens=5]" in ids
    assert "q0012[toy-model|denominator=valid]" in ids and len(ids) == n * 5
    assert Counter(r["variant"] for r in out["records"]) == Counter({v: n for v in ["", *VARIANTS]})
    # cards per variant, with what the variant is
    cards = out["run"]["pipeline_cards"]
    assert cards["toy.mcq"]["fields"]["inference.max_tokens"] == 64
    assert cards["toy.mcq|max_tokens=5"]["fields"]["inference.max_tokens"] == 5
    assert cards["toy.mcq|max_tokens=5"]["variant"]["kind"] == "upstream"
    assert cards["toy.mcq|denominator=valid"]["variant"] == {
        "name": "denominator=valid",
        "field": "scoring.denominator",
        "value": "valid",
        "base_value": "total",
        "stage": "scoring",
        "kind": "downstream",
        "needs_generations": False,
        "same_as_base": False,
    }
    # the summary per variant, and the deltas
    results = {r["variant"]: r for r in out["summary"]["results"]}
    assert results["denominator=valid"]["denominator"] == "valid"
    assert results["max_tokens=5"]["invalid_reasons"] == {"truncated": n}
    rows = {r["variant"]: r for r in variant_deltas(out["summary"]["results"], cards)}
    assert list(rows) == VARIANTS
    assert rows["max_tokens=5"]["moved_by"] == "inference" and "truncated" in rows["max_tokens=5"]["moved_by_detail"]
    assert rows["max_tokens=5"]["delta_pp"] == pytest.approx(-50)
    assert rows["max_tokens=16"]["moved_by"] == rows["max_tokens=2048"]["moved_by"] == "none"
    assert rows["denominator=valid"]["moved_by"] == "scoring"
    assert rows["denominator=valid"]["delta_pp"] == pytest.approx(100 * (6 / 7 - 6 / 12))
    # the terminal table
    result.stdout.fnmatch_lines(
        [
            "*single-field counterfactuals*",
            "*task*model*variant*score vs base*Δ pp*invalid % vs base*moved by*",
            "*toy.mcq*toy-model*max_tokens=5 *0.0 vs 50.0*-50.0*100.0 vs 41.7*inference: *truncated +11*",
            "*toy.mcq*toy-model*max_tokens=16 *50.0 vs 50.0*+0.0*none*",
            "*toy.mcq*toy-model*denominator=valid*85.7 vs 50.0*+35.7*41.7 vs 41.7*scoring: denominator total -> val*",
        ]
    )
    # requests at the server: one set per upstream variant; the downstream variant sends none of its own
    by_budget = Counter(c.body["max_tokens"] for c in calls)
    assert set(by_budget) == {64, 5, 16, 2048}
    assert len({repr(sorted(c.body.items())) for c in calls if c.body["max_tokens"] == 64}) == n
    with ScriptedServer(budget_script()) as alone:
        run_vary(pytester, alone, "--vary", "inference.max_tokens=5,16,2048", out="out-no-denominator")
        without = Counter(c.body["max_tokens"] for c in completions(alone))
    assert by_budget == without  # adding the downstream variant added no request at all


def test_vary_item_ids_work_with_lf_and_k(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(budget_script()) as server:
        first = run_vary(pytester, server, "--vary", "inference.max_tokens=5")
        first.assert_outcomes(passed=6, failed=6 + 12)
        again = run_vary(pytester, server, "--vary", "inference.max_tokens=5", "--lf")
        again.assert_outcomes(failed=18, deselected=6 + 2)  # the passed base items, task extra
        only = pytester.runpytest(
            "suites/toy/suite.toml::mcq::q0001[toy-model|max_tokens=5]",
            "--data-dir",
            "data",
            "--model",
            f"toy-model@{server.url}",
            "--vary",
            "inference.max_tokens=5",
            "--collect-only",
            "-q",
        )
    only.stdout.fnmatch_lines(["suites/toy/suite.toml::mcq::q0001[[]toy-model|max_tokens=5[]]", "*1 test*"])


def test_value_equal_to_base_costs_no_request(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(budget_script()) as server:
        result = run_vary(pytester, server, "--vary", "inference.max_tokens=64", "-k", "t01")
        result.assert_outcomes(passed=2)
        assert len(completions(server)) == 1
    result.stdout.fnmatch_lines(["*max_tokens=64 (= base)*none (same as base)*"])


def test_vary_skips_apply_per_variant(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(budget_script()) as server:
        result = run_vary(pytester, server, "--vary", "scoring.denominator=unspecified", "-k", "t01", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*toy.mcq [[]denominator=unspecified[]]*scoring.denominator unspecified*"])


def test_invalid_vary_is_a_usage_error_naming_the_field(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(budget_script()) as server:
        result = run_vary(pytester, server, "--vary", "inference.max_tokens=5,zero")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--vary*inference.max_tokens*"])
        result = run_vary(pytester, server, "--vary", "scoring.denominator=valid,some")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--vary*scoring.denominator*'total'*'valid'*"])
        result = run_vary(pytester, server, "--vary", "inference.max_tokenz=5")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*unknown field 'inference.max_tokenz'*"])
        # a rule name only the registry knows: named with the field, before anything is asked
        result = run_vary(pytester, server, "--vary", "extraction.rule=psychic")
        assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED)
        assert "extraction.rule=psychic" in result.stdout.str() + result.stderr.str()
        assert not completions(server)


def test_vary_on_real_seceval_rows(pytester: pytest.Pytester, real_data: Path) -> None:
    def script(call: Call) -> Reply:
        if call.body.get("max_tokens", 10**6) < 16:
            return Reply(content="<think>The question asks", finish_reason="length")
        return Reply(content="Answer: B")

    with ScriptedServer(script) as server:
        # the command, on the first 10 SecEval rows
        result = pytester.runpytest(
            str(SUITES / "seceval"),
            "--model",
            f"m@{server.url}",
            "--data-dir",
            str(real_data),
            "--limit",
            "10",
            "--report-dir",
            "out",
            "--no-cache",
            "-p",
            "no:randomly",
            *VARY,
        )
        calls = completions(server)
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) == 10 * 5
    golds = [r["gold"] for r in out["records"] if r["variant"] == ""]
    k = golds.count("B")
    # standardized SecEval already uses 2048 tokens: that variant is the base, asked once
    assert Counter(c.body["max_tokens"] for c in calls) == {2048: 10, 5: 10, 16: 10}
    rows = {r["variant"]: r for r in variant_deltas(out["summary"]["results"], out["run"]["pipeline_cards"])}
    assert rows["max_tokens=5"]["moved_by"] == ("inference" if k else "none")
    assert rows["max_tokens=5"]["invalid_rate"] == 1.0
    assert rows["max_tokens=2048"]["same_as_base"] and rows["max_tokens=2048"]["moved_by"] == "none"
    assert rows["max_tokens=16"]["delta"] == 0
    assert rows["denominator=valid"]["moved_by"] in ("scoring", "none")
    assert rows["denominator=valid"]["score"] == pytest.approx(k / 10)  # every answer readable here
    result.stdout.fnmatch_lines(
        [
            "*single-field counterfactuals*",
            "*seceval.mcq*m*max_tokens=5*inference*",
            "*seceval.mcq*m*max_tokens=2048 (= base)*none (same as base)*",
        ]
    )


def test_vary_under_xdist(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(budget_script()) as server:
        result = pytester.runpytest_subprocess(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"toy-model@{server.url}",
            "--report-dir",
            "out",
            "--max-retries",
            "2",
            "--no-cache",
            "-k",
            "mcq",
            "-n",
            "2",
            *VARY,
        )
    result.assert_outcomes(passed=6 * 4, failed=6 * 4 + len(TOY_QUESTIONS))
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) == 5 * len(TOY_QUESTIONS)  # every record reached the controller once
    assert set(out["run"]["pipeline_cards"]) == {
        "toy.mcq",
        "toy.extra",
        *(f"toy.mcq|{v}" for v in VARIANTS),
        *(f"toy.extra|{v}" for v in VARIANTS),
    }
    rows = {r["variant"]: r for r in variant_deltas(out["summary"]["results"], out["run"]["pipeline_cards"])}
    assert list(rows) == VARIANTS
    assert rows["max_tokens=5"]["moved_by"] == "inference" and rows["denominator=valid"]["moved_by"] == "scoring"
    result.stdout.fnmatch_lines(["*single-field counterfactuals*"])


def test_a_metric_change_gives_no_meaningless_delta():
    from pytest_benchaudit.aggregate.results import variant_deltas

    def result(variant, metric, score, lib):
        return {
            "benchmark": "b",
            "task": "vsp",
            "model": "m",
            "variant": variant,
            "metric": metric,
            "lower_is_better": lib,
            "denominator": "valid",
            "n": 10,
            "score": score,
            "invalid_rate": 0.0,
            "stage_rates": {"inference_ok": 1.0, "extraction_ok": 1.0, "correct": 0.2},
            "invalid_reasons": {},
        }

    (row,) = variant_deltas(
        [result("", "cvss_closeness_athena", 0.86, False), result("metric=cvss_abs_diff", "cvss_abs_diff", 1.08, True)]
    )
    assert row["delta"] is None and row["moved_by"] == "scoring"
    assert "metric changed: cvss_closeness_athena -> cvss_abs_diff" in row["moved_by_detail"]
