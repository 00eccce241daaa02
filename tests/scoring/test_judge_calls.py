"""Judge orchestration (scoring/judge_calls.py) without pytest: what it asks the judge, what the reply makes.

The judge model is a callable here (the end-to-end runs through the plugin and a real HTTP judge are
tests/scoring/test_judge_prompts.py); what is checked is which requests it builds, from which text, and how
each reply (JSON, NONE, garbage, a failed call) becomes the record's extraction and score.
"""

from __future__ import annotations

import json

import pytest

from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Generation, Question, Request
from pytest_benchaudit.scoring import judge_prompts
from pytest_benchaudit.scoring.judge_calls import judge_answer, judge_problem, needs_judge

Q = Question(
    benchmark="toy",
    task="mcq",
    id="q1",
    index=0,
    text="Which port?",
    choices={"A": "21", "B": "22", "C": "23", "D": "25"},
    gold="B",
)
BASE = Pipeline(
    name="standardized",
    benchmark="toy",
    task="mcq",
    inference={"max_tokens": 64},
    extraction={"rule": "judge", "reasoning": "strip"},
    scoring={"metric": "exact_match", "denominator": "total"},
)


class Judge:
    """The judge model: answers each request with ``reply`` and keeps what it was asked."""

    def __init__(self, reply: str = "", error: str | None = None) -> None:
        self.reply, self.error, self.asked = reply, error, []  # type: ignore[var-annotated]

    def __call__(self, request: Request) -> Generation:
        self.asked.append(request)
        return Generation(text=self.reply, error=self.error)


def with_(**fields: object) -> Pipeline:
    return apply_overrides(BASE, list(fields.items()))


def test_extraction_reads_the_judges_json_verdict_from_the_text_left_after_reasoning() -> None:
    ask = Judge(json.dumps({"answer": "B"}))
    got = judge_answer(Q, BASE, Generation(text="<think>A? no</think>It is ssh, so the second one."), "judge:j", ask)
    assert got.extraction is not None and got.extraction.prediction == "B" and got.score is None
    assert got.extra["regex_prediction"] is None  # the strict rule read no final answer
    assert got.extra["judge"]["purpose"] == "extraction" and got.extra["judge"]["parse_status"] == "json"
    assert got.extra["judge"]["prompt_version"] == judge_prompts.EXTRACTION_PROMPT_VERSION
    assert ask.asked == [judge_prompts.extraction_request(Q, "It is ssh, so the second one.", ("A", "B", "C", "D"))]


def test_extraction_for_a_label_set_metric_cuts_the_text_with_the_label_set_reader() -> None:
    ask = Judge(json.dumps({"answer": "AC"}))
    got = judge_answer(
        Q, with_(**{"scoring.metric": "label_set_match"}), Generation(text="Final answer: C, A"), "judge:j", ask
    )
    assert got.extra["regex_prediction"] == "AC"  # final_answer_letters (one label's reader would say none)
    one = judge_answer(Q, BASE, Generation(text="Final answer: C, A"), "judge:j", Judge(json.dumps({"answer": "C"})))
    assert one.extra["regex_prediction"] != "AC"


@pytest.mark.parametrize(
    "reply, error, reason, status",
    [
        ('{"answer": "NONE"}', None, "unparseable", "json"),
        ("no idea", None, "judge_error", "failed"),
        ("", "HTTP 500", "judge_error", "failed"),
    ],
)
def test_a_verdict_that_names_no_option_or_cannot_be_read_is_invalid_with_its_reason(
    reply: str, error: str | None, reason: str, status: str
) -> None:
    got = judge_answer(Q, BASE, Generation(text="I would say the second."), "judge:j", Judge(reply, error))
    assert got.extraction is not None and got.extraction.invalid_reason == reason and got.score is None
    assert got.extra["judge"]["parse_status"] == status
    if error:
        assert got.extraction.detail == error


def test_nothing_to_read_asks_no_judge() -> None:
    ask = Judge('{"answer": "B"}')
    got = judge_answer(Q, BASE, Generation(text="<think>unfinished", finish_reason="length"), "judge:j", ask)
    assert ask.asked == [] and got.extraction is not None and not got.extraction.valid
    failed = judge_answer(Q, BASE, Generation(error="connection refused"), "judge:j", ask)
    assert ask.asked == [] and failed.extraction is None and failed.extra == {}


def test_grading_scores_the_rules_reading_by_the_judges_verdict() -> None:
    graded = with_(**{"extraction.rule": "final_line", "scoring.metric": "judge_graded"})
    for verdict, value in (("CORRECT", 1.0), ("INCORRECT", 0.0)):
        ask = Judge(json.dumps({"verdict": verdict}))
        got = judge_answer(Q, graded, Generation(text="Thinking.\nport 22 (ssh)"), "judge:j", ask)
        assert got.score is not None and got.score.value == value and got.score.correct is (value == 1.0)
        assert ask.asked == [judge_prompts.grading_request(Q, "port 22 (ssh)")]
        assert got.extra["judge"]["purpose"] == "grading"
    bad = judge_answer(Q, graded, Generation(text="port 22"), "judge:j", Judge("maybe"))
    assert bad.score is None and bad.extraction is not None and bad.extraction.invalid_reason == "judge_error"


def test_who_needs_a_judge_and_what_the_skip_says() -> None:
    assert needs_judge(BASE) and needs_judge(
        with_(**{"extraction.rule": "final_line", "scoring.metric": "judge_graded"})
    )
    plain = with_(**{"extraction.rule": "final_answer_letter"})
    assert not needs_judge(plain) and judge_problem(plain) is None
    assert judge_problem(BASE) == (
        "extraction.rule 'judge' needs an LLM judge (--judge SPEC); collected but never scored without one"
    )
    assert judge_problem(BASE, judge_given=True) is None
    assert judge_answer(Q, plain, Generation(text="Answer: B"), "judge:j", Judge("x")).extraction is None
