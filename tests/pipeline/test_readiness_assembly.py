"""The collector's pure parts (pipeline/readiness.py, pipeline/assembly.py) on the shipped suites' pipelines."""

from __future__ import annotations

from pathlib import Path

from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline import assembly, readiness
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.types import Question

SUITES = Path(__file__).resolve().parents[2] / "suites"


def _q(i: int, **meta: str) -> Question:
    return Question(
        benchmark="b", task="t", id=f"q{i}", index=i, text="?", choices={"A": "x", "B": "y"}, gold="A", meta=meta
    )


def test_a_released_layer_that_leaves_fields_unspecified_names_them_prompt_first() -> None:
    suite = load_suite(SUITES / "secbench" / "suite.toml")
    pipe = suite.pipeline("saq_en", "released")  # data only: nothing set by released code
    problems = readiness.runnable_problems(pipe, suite.templates)
    assert problems[:2] == ["prompt.format.mode", "prompt.template"] and "scoring.metric" in problems
    assert "aggregation.method" not in problems
    reason = readiness.skip_reason(readiness.where_of("secbench", "saq_en"), pipe, problems, "a judge")
    assert reason is not None and reason.startswith("secbench.saq_en under 'released': prompt.format.mode, ")
    assert reason.endswith("unspecified; choose with --set FIELD=VALUE")  # fields first, the judge after


def test_a_runnable_standardized_layer_has_no_problem_and_a_judge_is_the_next_reason() -> None:
    suite = load_suite(SUITES / "seceval" / "suite.toml")
    pipe = suite.pipeline("mcq", "standardized")
    assert readiness.runnable_problems(pipe, suite.templates) == []
    assert readiness.skip_reason("seceval.mcq", pipe, [], None) is None
    assert readiness.skip_reason("seceval.mcq [v]", pipe, [], "it needs one") == "seceval.mcq [v]: it needs one"
    assert readiness.where_of("seceval", "mcq", "max_tokens=5") == "seceval.mcq [max_tokens=5]"


def test_a_template_the_suite_lacks_and_an_aggregation_by_no_question_has() -> None:
    suite = load_suite(SUITES / "seceval" / "suite.toml")
    pipe = suite.pipeline("mcq", "standardized")
    assert readiness.template_problem("seceval", pipe, list(suite.templates)) is None
    other = apply_overrides(pipe, [("prompt.template", "nope")])
    assert readiness.template_problem("seceval", other, ["a", "b"]) == (
        "prompt.template 'nope' is not a template of seceval; allowed: a, b"
    )
    by = apply_overrides(pipe, [("aggregation.by", "topic")])
    assert readiness.aggregation_by_problem(by, [_q(0, topic="x"), _q(1)]) is None  # one question holding it is enough
    said = readiness.aggregation_by_problem(by, [_q(0, topics="x")])
    assert said is not None and "'topic' is not a metadata field" in said and "allowed: topics, or null" in said
    assert "none (this task has no metadata)" in (readiness.aggregation_by_problem(by, [_q(0)]) or "")
    unset = apply_overrides(pipe, [("aggregation.by", None)])
    assert readiness.aggregation_by_problem(by, []) is None and readiness.aggregation_by_problem(unset, [_q(0)]) is None


def test_the_task_card_adds_what_run_json_shows_and_leaves_the_hash_alone() -> None:
    suite = load_suite(SUITES / "seceval" / "suite.toml")
    pipe = apply_overrides(suite.pipeline("mcq", "standardized"), [("inference.max_tokens", 9)])
    mats = assembly.materials(suite.templates, pipe, [], {"q.json": "ab" * 32}, {}, None)
    card = pipe.card(mats)
    hashed = (card["hash"], card["upstream_hash"])
    shown = assembly.TaskMaterials(
        dataset_checksums={"q.json": "ab" * 32},
        suite_files={"suites/x.toml": "cd" * 32},
        questions_total=7,
        warnings=[{"kind": "data_checksum", "message": "m"}],
    )
    out = assembly.task_card(card, shown, variant={"kind": "layer"}, judge={"model": "j"}, providers={})
    assert out is card and (out["hash"], out["upstream_hash"]) == hashed
    assert out["dataset_checksums"] == {"q.json": "ab" * 32} and out["questions_total"] == 7
    assert out["override_origins"] == {"inference.max_tokens": "--set"} and out["variant"] == {"kind": "layer"}
    assert out["judge"] == {"model": "j"} and "providers" not in out  # no hosted model: no providers entry
    assert list(out)[-1] == "questions_total"
    base = assembly.task_card(suite.pipeline("mcq", "standardized").card(mats), assembly.TaskMaterials({}, {}, 0))
    assert not {"variant", "judge", "warnings", "override_origins"} & set(base)


def test_a_pinned_checksum_that_differs_is_one_warning_naming_the_file() -> None:
    pins = {"a.json": {"sha256": "11" * 32}, "b.json": {"sha256": "22" * 32}}
    out = assembly.pin_warnings(
        pins, {"a.json": "11" * 32, "b.json": "33" * 32, "c.json": "44" * 32}, "seceval", "seceval", "seceval"
    )
    assert [w["kind"] for w in out] == ["data_checksum"]
    assert out[0]["message"].startswith("seceval/b.json: sha256 333333333333… differs from the 222222222222…")
    assert "benchaudit fetch seceval --force" in out[0]["message"]
