"""Tests for pytest_benchaudit.aggregate.summary_documents: the summary.json the aggregation writes validates
against its declared type (SUMMARY, extra="forbid"), every optional part present, after a JSON round
trip; so do an imported run's summary (no variants) and a re-scored run's (skipped); an undeclared key
does not."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
from pytest_benchaudit.aggregate.summary_documents import SUMMARY, TASK_RESULT
from pytest_benchaudit.report.gates import evaluate_gates, gate_results, parse_gate


def _rec(
    model: str, task: str, q: int, correct: bool, *, repeat: int = 0, variant: str = "", valid: bool = True
) -> dict[str, Any]:
    return {
        "benchmark": "b",
        "task": task,
        "model": model,
        "variant": variant,
        "pipeline": "p",
        "pipeline_hash": "h",
        "question_id": f"q{q}",
        "repeat": repeat,
        "valid": valid,
        "invalid_reason": None if valid else "unparseable",
        "invalid_stage": None if valid else "extraction",
        "score": 1.0 if correct and valid else 0.0,
        "correct": correct and valid,
        "metric": "exact_match",
        "question_meta": {"topic": ["x", "y"] if q % 2 else "z"},
        "score_extras": {"plausible": 1.0 if q % 3 else 0.0},
    }


def _card(**variant: Any) -> dict[str, Any]:
    card: dict[str, Any] = {
        "fields": {
            "scoring.metric": "exact_match",
            "scoring.denominator": "total",
            "aggregation.method": "macro",
            "aggregation.by": "topic",
            "aggregation.reducer": "majority",
        }
    }
    if variant:
        card["variant"] = variant
    return card


@pytest.fixture()
def full_summary() -> dict[str, Any]:
    """Three models, two tasks (ranks and tau-b), two repeats (the repeat fields), a breakdown, an
    extra, a --vary variant (variants) and a gate: every part a pytest run's summary can hold."""
    records = []
    for m, model in enumerate(["m1", "m2", "m3"]):
        for task in ("t1", "t2"):
            for q in range(8):
                for repeat in (0, 1):
                    records.append(_rec(model, task, q, q < 3 + 2 * m, repeat=repeat, valid=q != 7))
        records += [_rec(model, "t1", q, q < 6, variant="max_tokens=8") for q in range(8)]
    cards = {
        "b.t1": _card(),
        "b.t2": _card(),
        "b.t1|max_tokens=8": _card(
            name="max_tokens=8",
            field="inference.max_tokens",
            value=8,
            base_value=512,
            stage="inference",
            kind="upstream",
            needs_generations=True,
            same_as_base=False,
        ),
    }
    results = summarize(records, cards)
    benchmarks = benchmark_scores(results, cards)
    gates = gate_results(evaluate_gates([parse_gate("b>=0.5"), parse_gate("b.t1:ci_low>=0.1")], results, benchmarks))
    return dict(summary_document(results, benchmarks, gates, cards))


def test_a_full_summary_validates_after_a_json_round_trip(full_summary: dict[str, Any]) -> None:
    assert {"ranks", "tau_b"} <= set(full_summary) and full_summary["variants"] and full_summary["gates"]
    row = full_summary["results"][0]
    assert row["repeats"] == 2 and "breakdown" in row and "extras" in row
    written = json.loads(json.dumps(full_summary))
    assert SUMMARY.validate_python(written) == written


def test_task_results_keep_the_declared_key_order(full_summary: dict[str, Any]) -> None:
    """summarize's rows are TASK_RESULT's output: keys in TaskResult's order, as summary.json has always had them."""
    declared = list(TASK_RESULT.json_schema()["properties"])
    for row in full_summary["results"]:
        assert list(row) == [k for k in declared if k in row]


def test_imported_and_rescored_summaries_validate(full_summary: dict[str, Any]) -> None:
    imported = {k: full_summary[k] for k in ("results", "benchmarks", "gates")}  # benchaudit import writes these
    assert SUMMARY.validate_python(imported) == imported
    rescored = {**full_summary, "skipped": [{"task": "b.t3", "records": 4, "reason": "no pipeline"}]}
    assert SUMMARY.validate_python(rescored) == rescored


def test_an_undeclared_key_is_an_error(full_summary: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        SUMMARY.validate_python({**full_summary, "tasks": []})
    bad_row = {**full_summary["results"][0], "surprise": 1}
    with pytest.raises(pydantic.ValidationError):
        TASK_RESULT.validate_python(bad_row)
