"""The answer readers' conformance table of docs/scoring.md, checked row by row.

The table is the published contract: each row is an answer string and what ``final_answer_letter``,
``final_answer_letters`` and the released ``answer_regex`` read from it (a letter set or the invalid
reason), written by hand.  This test reads the rows from the document itself, so the page and the
code cannot drift apart.  Issue 23 point 6: a hedge between options is ``hedged`` under the
standardized readers, never the first letter.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from pytest_benchaudit.pipeline.types import INVALID_STAGE, Generation, Question
from pytest_benchaudit.scoring.extract import extract

DOC = Path(__file__).resolve().parents[2] / "docs" / "scoring.md"
START, END = "<!-- conformance table: start", "<!-- conformance table: end -->"
# Each rule with the extraction.reasoning its layers use (standardized: strip; CyberMetric released: keep).
RULES = {"final_answer_letter": "strip", "final_answer_letters": "strip", "answer_regex": "keep"}
QUESTION = Question(
    benchmark="b",
    task="mcq",
    id="q",
    index=0,
    prompt="p",
    gold="A",
    choices={label: f"option {label}" for label in "ABCD"},
)


def _rows() -> list[tuple[int, str, dict[str, str]]]:
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index(START) : text.index(END)].splitlines()[1:]
    header = [c.strip().strip("`") for c in table[0].strip().strip("|").split("|")]
    assert header == ["#", "answer", *RULES], header
    rows = []
    for line in table[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        number, answer, *readings = cells
        if answer == "(empty string)":
            answer = ""
        else:
            assert answer.startswith("`") and answer.endswith("`"), line
            answer = answer[1:-1].replace("\\n", "\n")
        rows.append((int(number), answer, dict(zip(RULES, readings))))
    return rows


ROWS = _rows()


def test_the_table_has_at_least_150_distinct_answers_covering_each_kind():
    assert len(ROWS) >= 150
    answers = [answer for _, answer, _ in ROWS]
    assert len(set(answers)) == len(answers), "an answer string listed twice"
    assert [n for n, _, _ in ROWS] == list(range(1, len(ROWS) + 1))
    single = Counter(r["final_answer_letter"] for _, _, r in ROWS)
    multi = [r["final_answer_letters"] for _, _, r in ROWS]
    assert single["hedged"] >= 30
    assert sum(1 for m in multi if re.fullmatch(r"[A-D]{2,4}", m)) >= 25  # several letters, multi-answer
    kinds = {
        "markers": r"(?i)answer",
        "markdown": r"\*\*|#|\\boxed",
        "parentheses": r"[()\[\]]",
        "option text": r"[A-D][).:] \w",
        "reasoning spans": r"(?i)</?think>",
        "lower case": r"(?i:answer)\W+[a-d]\b",
    }
    for kind, pattern in kinds.items():
        assert sum(1 for a in answers if re.search(pattern, a)) >= 4, kind


@pytest.mark.parametrize("number, answer, readings", ROWS, ids=[f"row{n}" for n, _, _ in ROWS])
def test_conformance_row(number, answer, readings):
    for rule, reasoning in RULES.items():
        got = extract(rule, Generation(text=answer, finish_reason="stop"), QUESTION, reasoning)
        expected = readings[rule]
        if expected in INVALID_STAGE:  # an invalid reason
            assert (got.valid, got.invalid_reason) == (False, expected), (rule, answer, got.prediction, got.detail)
        else:
            assert (got.valid, got.prediction) == (True, expected), (rule, answer, got.invalid_reason, got.detail)


@pytest.mark.parametrize("text", ["Answer: A or B", "Answer: A, B", "Answer: B and C", "Answer: AB"])
def test_the_issue_hedges_are_never_the_first_letter(text):
    """The four strings of issue 23 point 6: the first option was credited (AB was already invalid)."""
    got = extract("final_answer_letter", Generation(text=text), QUESTION, "strip")
    assert got.invalid_reason == "hedged" and got.prediction is None
    assert INVALID_STAGE["hedged"] == "extraction"


@pytest.mark.parametrize(
    "rule, text, expected",
    [
        ("final_answer_tfx", "Answer: True or False", "hedged"),
        ("final_answer_tfx", "Answer: T or F", "hedged"),
        ("final_answer_tfx", "Answer: True", "T"),
        ("final_answer_tfx", "Answer: F", "F"),
        ("final_answer_or_x", "Answer: A or X", "hedged"),
        ("final_answer_or_x", "Answer: X", "X"),
        ("final_answer_or_x", "Answer: C, or possibly X", "hedged"),
    ],
)
def test_label_set_readers_treat_hedges_alike(rule, text, expected):
    got = extract(rule, Generation(text=text), QUESTION, "strip")
    assert (got.prediction if got.valid else got.invalid_reason) == expected


def test_a_hedged_record_is_invalid_and_scored_as_such():
    """Through evaluate: the record names the reason and its stage, and scores no credit."""
    from pytest_benchaudit.pipeline.stages import build_pipeline
    from pytest_benchaudit.scoring.evaluate import evaluate, failure_message

    pipe = build_pipeline(
        "standardized",
        "b",
        "mcq",
        {
            "extraction": {"rule": "final_answer_letter", "reasoning": "strip"},
            "scoring": {"metric": "exact_match", "denominator": "total"},
        },
    )
    rec = evaluate(QUESTION, pipe, {}, Generation(text="Between the two:\nAnswer: A or B"), model="m")
    assert (rec.valid, rec.invalid_reason, rec.invalid_stage, rec.score, rec.correct) == (
        False,
        "hedged",
        "extraction",
        0.0,
        False,
    )
    assert failure_message(rec).startswith("INVALID (hedged) at the extraction stage")


def test_a_pytest_run_marks_hedged_answers_invalid_and_states_their_credit(pytester, scripted):
    """End to end (scripted OpenAI-compatible server on 127.0.0.1, a real pytest run): a hedge fails
    as INVALID (hedged), never passes when its first option is the gold; the summary counts it among
    the invalid reasons and says what an invalid answer scores."""
    from pytest_benchaudit.testing.runs import only_run_dir, read_run
    from pytest_benchaudit.testing.scripted_server import Reply, by_marker
    from pytest_benchaudit.testing.toy import write_mcq_suite

    replies = {
        "HEDGE_OR": "Answer: A or B",
        "HEDGE_COMMA": "Answer: A, B",
        "HEDGE_AND": "Answer: A and C",
        "HEDGE_RUN": "Answer: AB",
        "PLAIN": "Answer: A",
    }
    scripted.script = by_marker({marker: Reply(content=text) for marker, text in replies.items()}, Reply(content="?"))
    write_mcq_suite(
        pytester.path,
        "hedges",
        [
            {
                "id": marker.lower(),
                "question": f"Question {marker}?",
                "options": ["one", "two", "three", "four"],
                "gold": "A",
            }
            for marker in replies
        ],
    )
    result = pytester.runpytest(
        "suites/hedges",
        "--data-dir",
        "data",
        "--report-dir",
        "out",
        "--cache-dir",
        "cache",
        "--model",
        f"m@{scripted.url}",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=1, failed=4)
    out = result.stdout.str()
    assert "INVALID (hedged) at the extraction stage" in out
    assert "hedged 4" in out
    assert "invalid answers, where counted (score/all; scoring.invalid_credit): 0 (no credit) on exact_match" in out
    run = read_run(only_run_dir(pytester.path / "out"))
    by_id = {r["question_id"]: r for r in run["records"]}
    assert {qid: (r["valid"], r["invalid_reason"], r["score"]) for qid, r in by_id.items()} == {
        "hedge_or": (False, "hedged", 0.0),
        "hedge_comma": (False, "hedged", 0.0),
        "hedge_and": (False, "hedged", 0.0),
        "hedge_run": (False, "hedged", 0.0),
        "plain": (True, None, 1.0),
    }
    (row,) = run["summary"]["results"]
    assert (row["score_total"], row["invalid_reasons"], row["invalid_credit"], row["invalid_score"]) == (
        0.2,
        {"hedged": 4},
        0.0,
        0.0,
    )
