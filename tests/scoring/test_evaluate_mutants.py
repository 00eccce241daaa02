"""scoring/evaluate.py where the mutation check found it untested (issue 33, item 15): the message a
failed item shows (:func:`failure_message`, hand-written expected text for each kind of failure), a
log-likelihood continuation's optional fields in the record, and the task's resources and invalid credit
reaching the metric."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.records import QUESTION, REQUEST, pipe
from pytest_benchaudit.pipeline.types import ContinuationLogprobs, Extraction, Generation, Question, Score
from pytest_benchaudit.scoring.evaluate import evaluate, failure_message

# A toy alias graph written for this test (not benchmark data): "fancy bear" is an alias of APT28.
GRAPHS = {"aliases": {"apt28": ["fancy bear"]}, "related": {"apt28": ["apt29"]}}


def row(**fields: Any) -> dict[str, Any]:
    """A record row as failure_message reads it (only the keys it reads)."""
    base: dict[str, Any] = {
        "raw_output": "Answer: D",
        "valid": True,
        "invalid_reason": None,
        "invalid_stage": None,
        "extraction_detail": None,
        "error": None,
        "gold": "B",
        "prediction": "D",
        "score": 0.0,
    }
    return {**base, **fields}


def test_a_wrong_answer_names_gold_prediction_score_and_the_raw_output() -> None:
    assert failure_message(row()) == "wrong: gold 'B', predicted 'D' (score 0); raw output: Answer: D"
    assert failure_message(row(score=0.5, prediction="C")) == (
        "wrong: gold 'B', predicted 'C' (score 0.5); raw output: Answer: D"
    )
    assert failure_message(row(raw_output="")) == "wrong: gold 'B', predicted 'D' (score 0); raw output: (empty)"
    # the same from a record (a model, not a row)
    record = evaluate(QUESTION, pipe(), REQUEST, Generation(text="Answer: D"), model="m")
    assert failure_message(record) == "wrong: gold 'B', predicted 'D' (score 0); raw output: Answer: D"


def test_the_raw_output_is_flattened_and_cut_at_120_characters() -> None:
    words = "x" * 60 + "\n\n  " + "y" * 59  # 60 + 1 + 59 = 120 characters once flattened: kept whole
    assert failure_message(row(raw_output=words)).endswith("raw output: " + "x" * 60 + " " + "y" * 59)
    longer = words + "z"  # 121: cut to 119 and an ellipsis, 120 in all
    assert failure_message(row(raw_output=longer)).endswith("raw output: " + "x" * 60 + " " + "y" * 58 + "…")


def test_an_invalid_item_names_its_reason_and_stage_or_its_error() -> None:
    invalid = {"valid": False, "prediction": None, "score": 0.0}
    assert failure_message(row(**invalid, invalid_reason="unparseable", invalid_stage="extraction")) == (
        "INVALID (unparseable) at the extraction stage: gold 'B'; raw output: Answer: D"
    )
    assert failure_message(
        row(**invalid, raw_output="", invalid_reason="unparseable", invalid_stage="extraction")
    ).endswith("raw output: (empty)")
    # an inference error: the error itself, cut at 200 characters
    error = "HTTP 500:   boom\n" + "e" * 300
    expected = ("HTTP 500: boom " + "e" * 300)[:199] + "…"
    assert failure_message(row(**invalid, raw_output="", invalid_reason="inference_error", error=error)) == (
        f"INVALID (inference_error): {expected} | gold 'B'"
    )
    assert failure_message(row(**invalid, invalid_reason="inference_error", error="HTTP 500: boom")) == (
        "INVALID (inference_error): HTTP 500: boom | gold 'B'"
    )


def test_a_judge_error_names_the_judge_s_failure() -> None:
    invalid = {"valid": False, "prediction": None, "invalid_reason": "judge_error", "invalid_stage": "extraction"}
    detail = "judge HTTP 503: " + "d" * 300
    assert failure_message(row(**invalid, extraction_detail=detail)) == (
        f"INVALID (judge_error): {detail[:199]}… | gold 'B'"
    )
    assert failure_message(row(**invalid)) == "INVALID (judge_error): the judge failed | gold 'B'"
    # the judge's failure is the reason even when the generation had an error too
    assert failure_message(row(**invalid, extraction_detail="unreadable verdict", error="boom")) == (
        "INVALID (judge_error): unreadable verdict | gold 'B'"
    )


def test_a_continuation_s_optional_fields_reach_the_record_only_when_set() -> None:
    full = ContinuationLogprobs(
        continuation=" B", tokens=(" B",), logprobs=(-0.25,), context_tokens=12, prompt="Which? B", note="echoed"
    )
    bare = ContinuationLogprobs(continuation=" A", tokens=(" A",), logprobs=(-1.5,))
    generation = Generation(text="", continuations=(full, bare))
    record = evaluate(
        QUESTION,
        pipe(),
        REQUEST,
        generation,
        model="m",
        extraction=Extraction(prediction="B", answer_text="B"),
        score=Score(value=1.0, correct=True),
    )
    assert list(record.continuations or ()) == [full, bare]
    rows = record.model_dump(mode="json")["continuations"]
    assert rows[0] == {
        "continuation": " B",
        "tokens": [" B"],
        "logprobs": [-0.25],
        "missing": None,
        "context_tokens": 12,
        "prompt": "Which? B",
        "note": "echoed",
    }
    assert rows[1] == {"continuation": " A", "tokens": [" A"], "logprobs": [-1.5], "missing": None}


def test_the_task_s_resources_and_invalid_credit_reach_the_metric() -> None:
    base = pipe()
    graph = base.model_copy(update={"scoring": base.scoring.model_copy(update={"metric": "actor_graph"})})
    question = Question(benchmark="athenabench", task="taa", id="t1", index=0, text="Who?", gold="APT28")
    alias = Extraction(prediction="Fancy Bear", answer_text="Fancy Bear")
    record = evaluate(
        question, graph, REQUEST, Generation(text="Fancy Bear"), model="m", resources=GRAPHS, extraction=alias
    )
    assert (record.score, record.correct) == (1.0, True)  # an alias of the gold actor, through the graph
    with pytest.raises(KeyError):  # the metric needs the graphs: without them, no score
        evaluate(question, graph, REQUEST, Generation(text="Fancy Bear"), model="m", extraction=alias)
    # an invalid item scores the pipeline's invalid_credit (a quarter of full credit on a share)
    credit = base.model_copy(update={"scoring": base.scoring.model_copy(update={"invalid_credit": 0.25})})
    invalid = evaluate(QUESTION, credit, REQUEST, Generation(text="I cannot tell."), model="m")
    assert (invalid.valid, invalid.score, invalid.correct) == (False, 0.25, False)
    assert evaluate(QUESTION, base, REQUEST, Generation(text="I cannot tell."), model="m").score == 0.0
