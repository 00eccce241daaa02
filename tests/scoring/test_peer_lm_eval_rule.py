"""lm-eval's readers (rules lm_eval_exact_match, lm_eval_loglikelihood) against lm-eval 0.4.13's own output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchaudit.pipeline.types import ContinuationLogprobs, Generation, Question
from pytest_benchaudit.scoring.extract import extract
from pytest_benchaudit.scoring.tasks.peer_lm_eval import lm_eval_exact_match, lm_eval_filtered

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "peers" / "lm_eval-0.4.13"
QUESTION = Question(
    benchmark="mmlu_cs", task="mcq", id="q", index=0, gold="C", choices={"A": "", "B": "", "C": "", "D": ""}
)


def test_the_filter_chain_gives_what_lm_eval_filtered_on_the_captured_answers() -> None:
    capture = json.loads((FIXTURES / "generative.json").read_text(encoding="utf-8"))
    seen = set()
    for request in capture["requests"]:
        (lm_eval_says,) = capture["per_question"][str(request["doc_id"])]["filtered_resps"]
        assert lm_eval_filtered(request["scripted_answer"]) == lm_eval_says, request["scripted_answer"]
        seen.add(request["scripted_answer"])
    assert len(seen) >= 10  # the answer kinds the capture scripted: " c.", " (B)", "Answer: A", "", ...


@pytest.mark.parametrize(
    ("text", "prediction"),
    [
        (" C", "C"),
        (" c.", "C"),
        ("(C)", "C"),
        ("  C  ", "C"),
        ("C\nD", "C"),
        ("C.\n", "C"),
        # Not an option under lm-eval's normalisation: a valid answer, scored 0 by exact_match.
        ("Answer: C", "Answer: C"),
        ("The answer is C", "The answer is C"),
        ("C D", "C D"),
        ("C .", "C ."),
    ],
)
def test_exact_match_reads_an_option_only_where_lm_eval_would_match_it(text: str, prediction: str) -> None:
    got = extract("lm_eval_exact_match", Generation(text=text), QUESTION, "keep")
    assert got.valid and got.prediction == prediction


@pytest.mark.parametrize("text", ["", "\nC", "   "])
def test_an_empty_first_line_is_no_answer(text: str) -> None:
    assert lm_eval_exact_match(text, QUESTION, Generation(text=text))[0] is None
    assert not extract("lm_eval_exact_match", Generation(text=text), QUESTION, "keep").valid


def _read(*values: float | None) -> Generation:
    return Generation(
        continuations=tuple(
            ContinuationLogprobs(continuation=f" {label}", tokens=(f" {label}",), logprobs=(v,))
            if v is not None
            else ContinuationLogprobs(continuation=f" {label}", missing="the prompt was not echoed (...)")
            for label, v in zip("ABCD", values)
        )
    )


def test_loglikelihood_picks_the_highest_and_the_first_of_equals() -> None:
    assert extract("lm_eval_loglikelihood", _read(-3.0, -1.0, -2.0, -4.0), QUESTION, "keep").prediction == "B"
    assert extract("lm_eval_loglikelihood", _read(-1.0, -2.0, -1.0, -1.0), QUESTION, "keep").prediction == "A"
    assert extract("lm_eval_loglikelihood", _read(-5.0, -2.0, -2.0, -9.0), QUESTION, "keep").prediction == "B"
    # Metamorphic: adding the same constant to every continuation (a shared prompt term) moves nothing.
    assert extract("lm_eval_loglikelihood", _read(-4.0, -2.0, -3.0, -5.0), QUESTION, "keep").prediction == "B"


def test_loglikelihood_without_logprobs_is_no_logprobs_naming_the_continuation() -> None:
    got = extract("lm_eval_loglikelihood", _read(-1.0, None, -2.0, -3.0), QUESTION, "keep")
    assert got.invalid_reason == "no_logprobs" and "' B': the prompt was not echoed" in got.detail
    plain = extract("lm_eval_loglikelihood", Generation(text="Answer: A"), QUESTION, "keep")
    assert plain.invalid_reason == "no_logprobs" and "inference.request = 'loglikelihood'" in plain.detail
    three = Generation(continuations=_read(-1.0, -2.0, -3.0, -4.0).continuations[:3])  # type: ignore[index]
    assert extract("lm_eval_loglikelihood", three, QUESTION, "keep").invalid_reason == "no_logprobs"
