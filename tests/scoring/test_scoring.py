"""Tests for pytest_benchaudit.scoring.metrics: metrics, their released quirks, invalid handling,
and the CTI-Bench / SecEval released computations on real rows (skipped without
``BENCHAUDIT_DATA``)."""

from __future__ import annotations

import json

import pytest

from pytest_benchaudit.pipeline.types import Extraction, Generation, Question, Score
from pytest_benchaudit.scoring.extract import extract
from pytest_benchaudit.scoring.metrics import METRIC_INFO, METRICS, MetricInfo, metric_names, score
from pytest_benchaudit.testing.data import data_file, read_tsv


def q(gold: str) -> Question:
    return Question(
        benchmark="t", task="t", id="1", index=0, gold=gold, choices={"A": "a", "B": "b", "C": "c", "D": "d"}
    )


def valid(prediction: str) -> Extraction:
    return Extraction(prediction=prediction, answer_text=prediction)


# --------------------------------------------------------------------------- registry / API


def test_metric_names_and_info_cover_every_metric():
    assert metric_names() == sorted(METRICS)
    assert {"exact_match", "letter_set_exact", "judge_graded"} <= set(METRICS)
    assert set(METRIC_INFO) == set(METRICS)
    for info in METRIC_INFO.values():
        assert isinstance(info, MetricInfo) and info.description


def test_invalid_extraction_scores_the_metric_invalid_value():
    q = Question(benchmark="b", task="t", id="1", index=0, gold="A")
    bad = Extraction(invalid_reason="unparseable")
    assert score("exact_match", bad, q) == Score(value=0.0, correct=False)


def test_judge_graded_is_never_scored_without_a_judge():
    assert METRIC_INFO["judge_graded"].needs_judge
    q = Question(benchmark="b", task="t", id="1", index=0, gold="reference answer")
    with pytest.raises(RuntimeError, match="need a judge"):
        score("judge_graded", valid("some answer"), q)


def test_metric_info_is_frozen():
    with pytest.raises(AttributeError):
        METRIC_INFO["exact_match"].lower_is_better = True  # type: ignore[misc]


def test_unknown_metric_is_keyerror_listing_known_metrics():
    with pytest.raises(KeyError) as err:
        score("accuracy", valid("A"), q("A"))
    assert "exact_match" in str(err.value) and "letter_set_exact" in str(err.value)


# --------------------------------------------------------------------------- exact_match


@pytest.mark.parametrize(
    ("prediction", "gold", "correct"),
    [
        ("B", "B", True),
        ("B", "b", True),  # CTI-Bench has one lower-case gold "b"
        ("b", "B", True),
        (" C ", "C", True),
        ("C", "D", False),
        ("", "A", False),
        ("CWE-79", "cwe-79", True),
        ("X", "A", False),  # CTI-Bench refusal marker: valid but wrong
    ],
)
def test_exact_match(prediction, gold, correct):
    result = score("exact_match", valid(prediction), q(gold))
    assert result == Score(value=1.0 if correct else 0.0, correct=correct)


# --------------------------------------------------------------------------- letter_set_exact


@pytest.mark.parametrize(
    ("prediction", "gold", "correct"),
    [
        ("AC", "AC", True),
        ("ac", "AC", True),  # case-insensitive, as released
        ("A", "AC", False),
        ("ABCD", "AC", False),
        ("", "", True),  # quirk: empty gold matched by an answer with no letters at all
        ("A", "", False),
        ("A", "AA", False),  # quirk: "AA" is compared as stored ...
        ("AA", "AA", True),  # ... only a repeated-letter prediction, which no rule emits, matches
        ("AC", "CA", False),  # the gold is not sorted before comparing
    ],
)
def test_letter_set_exact(prediction, gold, correct):
    assert score("letter_set_exact", valid(prediction), q(gold)).correct is correct


def test_letter_set_exact_never_matches_aa_from_a_rule():
    # Whatever the model writes, SecEval's rule emits sorted unique letters, so "AA" fails.
    for text in ("Answer: AA", "A A", "AAAA", "Answer: A, A"):
        extraction = extract("all_capital_letters", Generation(text=text), q("AA"), "keep")
        assert extraction.prediction == "A"
        assert score("letter_set_exact", extraction, q("AA")).value == 0.0


def test_letter_set_exact_docstring_documents_quirks():
    doc = METRICS["letter_set_exact"].__doc__ or ""
    assert "empty gold" in doc and '"AA"' in doc


# --------------------------------------------------------------------------- invalid extractions


@pytest.mark.parametrize("reason", ["inference_error", "empty", "truncated", "unclosed_reasoning", "unparseable"])
@pytest.mark.parametrize("metric", ["exact_match", "letter_set_exact"])
def test_invalid_extraction_scores_zero(metric, reason):
    # Even against an empty gold, which an empty *valid* prediction would match.
    for gold in ("A", ""):
        assert score(metric, Extraction(invalid_reason=reason), q(gold)) == Score(value=0.0, correct=False)


def test_end_to_end_extract_then_score():
    question = q("B")
    ok = extract("answer_regex", Generation(text="Answer: because"), question, "strip")
    assert score("exact_match", ok, question).correct  # the CyberMetric quirk scores a hit
    failed = extract("answer_regex", Generation(text="", finish_reason="length"), question, "strip")
    assert failed.invalid_reason == "truncated"
    assert score("exact_match", failed, question).value == 0.0


# --------------------------------------------------------------------------- real data rows


CTI_MODELS = ("ChatGPT-3.5", "ChatGPT-4", "Gemini-1.5", "LLAMA3-70B", "LLAMA3-8B")


def released_cti_mcq_accuracy(responses: list[dict[str, str]], col: str) -> float:
    """``compute_mcq_accuracy`` from CTI-Bench ``evaluation/evaluation.ipynb``, re-typed."""
    correct = total = 0
    for row in responses:
        pred, gt = row[col].upper(), row["GT"].upper()
        if pred in ["A", "B", "C", "D", "X"]:
            total += 1
        if pred == gt:
            correct += 1
    return correct / total * 100


def test_real_cti_mcq_exact_match_reproduces_released_accuracy():
    rows = read_tsv(data_file("cti-bench", "cti-mcq.tsv"))
    responses = read_tsv(data_file("cti-bench", "responses", "cti-mcq-responses.tsv"))
    questions = [
        Question(
            benchmark="cti-bench",
            task="cti-mcq",
            id=str(i),
            index=i,
            text=r["Question"],
            choices={k: r[f"Option {k}"] for k in "ABCD"},
            gold=r["GT"],
            prompt=r["Prompt"],
        )
        for i, r in enumerate(rows)
    ]
    assert [x.gold for x in questions] == [r["GT"] for r in responses]
    accuracy = {}
    for model in CTI_MODELS:
        scores = []
        for question, resp in zip(questions, responses):
            answer = resp[model].upper()
            # The released denominator counts only rows whose answer is in {A,B,C,D,X}.
            if answer in {"A", "B", "C", "D", "X"}:
                scores.append(score("exact_match", valid(answer), question))
        accuracy[model] = 100 * sum(s.value for s in scores) / len(scores)
        assert accuracy[model] == pytest.approx(released_cti_mcq_accuracy(responses, model))
    # ChatGPT-4 is the notebook's default column; its printed output is "Accuracy: 71.0".
    assert accuracy["ChatGPT-4"] == pytest.approx(71.0)
    assert {m: round(a, 2) for m, a in accuracy.items()} == {
        "ChatGPT-3.5": 54.12,
        "ChatGPT-4": 71.0,
        "Gemini-1.5": 65.44,
        "LLAMA3-70B": 65.76,
        "LLAMA3-8B": 61.32,
    }


def test_real_cti_lowercase_gold_row_counts_as_correct():
    responses = read_tsv(data_file("cti-bench", "responses", "cti-mcq-responses.tsv"))
    lower = [(i, r) for i, r in enumerate(responses) if r["GT"] == "b"]
    assert len(lower) == 1
    i, row = lower[0]
    question = Question(benchmark="cti-bench", task="cti-mcq", id=str(i), index=i, gold=row["GT"])
    for model in CTI_MODELS:
        expected = row[model].upper() == "B"
        assert score("exact_match", valid(row[model]), question).correct is expected
    assert score("exact_match", valid("B"), question).correct


def test_real_cti_gemini_refusals_stay_in_denominator():
    responses = read_tsv(data_file("cti-bench", "responses", "cti-mcq-responses.tsv"))
    refusals = [r for r in responses if r["Gemini-1.5"] == "X"]
    assert len(refusals) == 4
    q0 = Question(benchmark="cti-bench", task="cti-mcq", id="0", index=0, gold=refusals[0]["GT"])
    assert score("exact_match", valid("X"), q0) == Score(value=0.0, correct=False)
    correct = sum(r["Gemini-1.5"].upper() == r["GT"].upper() for r in responses)
    # X counts as valid-but-wrong: 2500 rows in the denominator, not 2496.
    assert released_cti_mcq_accuracy(responses, "Gemini-1.5") == pytest.approx(100 * correct / 2500)


def seceval_questions() -> list[Question]:
    items = json.loads(data_file("seceval", "questions-data.json").read_text(encoding="utf-8"))
    return [
        Question(
            benchmark="seceval",
            task="mcqa",
            id=it["id"],
            index=i,
            text=it["question"],
            choices={c[0]: c[3:] for c in it["choices"]},
            gold=it["answer"],
            meta={"topics": it["topics"]},
        )
        for i, it in enumerate(items)
    ]


def test_real_seceval_empty_golds_scored_by_letterless_answer():
    questions = seceval_questions()
    empty = [x for x in questions if x.gold == ""]
    assert len(empty) == 7
    for question in empty:
        # A response with no capital A-D (a refusal, say) scores 1 under the released pipeline ...
        released = extract("all_capital_letters", Generation(text="I'm not sure."), question, "keep")
        assert released.valid and released.prediction == ""
        assert score("letter_set_exact", released, question).correct
        # ... and any actual letter choice scores 0.
        assert not score("letter_set_exact", valid("A"), question).correct
        # The standardized rule finds no answer there, so the same response scores 0.
        standard = extract("final_answer_letters", Generation(text="I'm not sure."), question, "keep")
        assert standard.invalid_reason == "unparseable"
        assert score("letter_set_exact", standard, question).value == 0.0


def test_real_seceval_aa_golds_can_never_be_matched():
    questions = seceval_questions()
    doubled = [x for x in questions if x.gold == "AA"]
    assert len(doubled) == 2
    for question in doubled:
        for prediction in ("A", "AB", "ABCD", ""):
            assert not score("letter_set_exact", valid(prediction), question).correct


def test_real_seceval_other_golds_are_canonical_letter_sets():
    # Every other gold is already sorted and unique, so it is matched by its own letter set.
    questions = [x for x in seceval_questions() if x.gold not in ("", "AA")]
    assert len(questions) == 2189 - 9
    for question in questions:
        canonical = "".join(sorted(set(question.gold)))
        assert question.gold == canonical
        assert score("letter_set_exact", valid(canonical), question).correct
