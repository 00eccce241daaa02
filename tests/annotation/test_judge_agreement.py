"""benchaudit judge-agreement: two judges, judge vs regex pipeline, and judge vs regex within one run."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from pytest_benchaudit.annotation.judge_agreement import (
    JudgeAgreementError,
    agreement_report,
    cohen_kappa,
    pair_runs,
    within_run,
)
from pytest_benchaudit.cli.app import main as benchaudit_main
from pytest_benchaudit.cli.judge_agreement_cmd import add_parser as add_judge_agreement_parser
from pytest_benchaudit.testing.runs import write_run_dir

LABELS = ["A", "B", "C", "D"]


def rec(
    model: str,
    qid: str,
    *,
    prediction: str | None = None,
    gold: str = "A",
    correct: bool = False,
    judge: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    out = {
        "benchmark": "toy",
        "task": "mcq",
        "question_id": qid,
        "question_index": 0,
        "model": model,
        "variant": "",
        "pipeline": "p",
        "prediction": prediction,
        "valid": prediction is not None,
        "gold": gold,
        "correct": correct,
        "score": float(correct),
        "metric": "exact_match",
        "question_labels": LABELS,
        **extra,
    }
    if judge is not None:
        out["judge"] = judge
    return out


def judge(purpose: str, verdict: str | None, model: str = "judge-1") -> dict[str, Any]:
    return {
        "model": model,
        "purpose": purpose,
        "prompt_version": "v1",
        "raw_output": f'{{"verdict": "{verdict}"}}',
        "parse_status": "failed" if verdict is None else "json",
        "verdict": verdict,
    }


# Ten graded items: run A has a grading judge, run B is the plain pipeline (`correct`).
#   m1: (C,C) (C,C) (C,I) (I,C) (I,I)    A 3/5, B 3/5
#   m2: (C,C) (C,C) (I,C) (I,I) (I,I)    A 2/5, B 3/5
GRADED = {"m1": ["CC", "CC", "CI", "IC", "II"], "m2": ["CC", "CC", "IC", "II", "II"]}
WORD = {"C": "CORRECT", "I": "INCORRECT"}


def graded_runs() -> tuple[list[dict], list[dict]]:
    a, b = [], []
    for model, cells in GRADED.items():
        for i, (la, lb) in enumerate(cells):
            a.append(rec(model, f"q{i}", prediction="x", judge=judge("grading", WORD[la])))
            b.append(rec(model, f"q{i}", prediction="x", correct=lb == "C"))
    return a, b


def test_kappa_of_a_hand_computed_grading_example():
    # confusion (rows A, cols B): CC=4 CI=1 / IC=2 II=3, n=10
    # p_o = (4+3)/10 = 0.7; A marginals C=5 I=5, B marginals C=6 I=4
    # p_e = (5*6 + 5*4)/100 = 0.5; kappa = (0.7-0.5)/(1-0.5) = 0.4
    doc = agreement_report(pair_runs(*graded_runs()))
    assert doc["purpose"] == "grading" and doc["mode"] == "two_runs"
    assert doc["n_paired"] == 10 and doc["agreement"] == pytest.approx(0.7)
    assert doc["expected_agreement"] == pytest.approx(0.5)
    assert doc["kappa"] == pytest.approx(0.4)
    cells = {(c["a"], c["b"]): c["n"] for c in doc["confusion"]}
    assert cells == {
        ("CORRECT", "CORRECT"): 4,
        ("CORRECT", "INCORRECT"): 1,
        ("INCORRECT", "CORRECT"): 2,
        ("INCORRECT", "INCORRECT"): 3,
    }
    per_model = {m["model"]: m for m in doc["per_model"]}
    assert per_model["m1"]["score_a"] == pytest.approx(0.6) and per_model["m1"]["diff_pp"] == pytest.approx(0.0)
    assert per_model["m2"]["score_a"] == pytest.approx(0.4) and per_model["m2"]["score_b"] == pytest.approx(0.6)
    assert per_model["m2"]["diff_pp"] == pytest.approx(20.0)
    assert doc["a"]["source"].startswith("judge judge-1") and doc["b"]["source"] == "pipeline (no judge)"
    assert doc["strata"] is None


def test_perfect_agreement_gives_kappa_one_and_chance_level_gives_zero():
    a = [rec("m", f"q{i}", prediction=p) for i, p in enumerate("ABCDAB")]
    b = [rec("m", f"q{i}", prediction=p.lower()) for i, p in enumerate("ABCDAB")]  # case does not matter
    doc = agreement_report(pair_runs(a, b, purpose="extraction"))
    assert doc["agreement"] == 1.0 and doc["kappa"] == pytest.approx(1.0)
    # chance level: A says C,C,I,I and B says C,I,C,I -> p_o = 0.5, p_e = (2*2+2*2)/16 = 0.5, kappa = 0
    k = cohen_kappa(["C", "C", "I", "I"], ["C", "I", "C", "I"])
    assert k["agreement"] == 0.5 and k["expected_agreement"] == 0.5 and k["kappa"] == pytest.approx(0.0)
    # one label throughout on both sides: kappa undefined, not 1
    assert cohen_kappa(["C", "C"], ["C", "C"])["kappa"] is None


def test_extraction_pairs_map_none_to_NONE_and_letter_sets_order_insensitively():
    a = [rec("m", "q1", prediction=None), rec("m", "q2", prediction="B, A"), rec("m", "q3", prediction="C")]
    b = [
        rec("m", "q1", prediction=None),
        rec("m", "q2", prediction="ab"),
        rec("m", "q3", prediction="D"),
        rec("m", "q4", prediction="A"),
    ]
    doc = agreement_report(pair_runs(a, b, purpose="extraction"))
    assert doc["n_paired"] == 3 and doc["n_only_b"] == 1 and doc["agreement"] == pytest.approx(2 / 3)
    assert {(c["a"], c["b"]) for c in doc["confusion"]} == {("NONE", "NONE"), ("AB", "AB"), ("C", "D")}


def within_records() -> list[dict[str, Any]]:
    return [
        rec("m", "q1", prediction="B", gold="B", regex_prediction="B", judge=judge("extraction", "B")),  # agree
        rec("m", "q2", prediction=None, regex_prediction=None, judge=judge("extraction", "NONE")),  # nothing, agree
        rec("m", "q3", prediction="C", regex_prediction=None, judge=judge("extraction", "C")),  # nothing, differ
        rec("m", "q4", prediction="D", regex_prediction="A", gold="A", judge=judge("extraction", "D")),  # differ
        rec("m", "q5", prediction=None, regex_prediction="A", judge=judge("extraction", None)),  # judge failed
        rec("m", "q6", prediction="A"),  # no judge
    ]


def test_within_one_run_judge_vs_regex_with_strata():
    doc = agreement_report(within_run(within_records()))
    assert doc["mode"] == "within_run" and doc["n_paired"] == 4
    assert doc["n_judge_failed"] == 1 and doc["n_without_judge_extraction"] == 1
    # A (regex) = B NONE NONE A, B (judge) = B NONE C D: p_o = 2/4; A marg B1 NONE2 A1, B marg B1 NONE1 C1 D1
    # p_e = (1*1 + 2*1)/16 = 3/16; kappa = (1/2 - 3/16)/(13/16) = 5/13
    assert doc["agreement"] == 0.5 and doc["kappa"] == pytest.approx(5 / 13)
    s = doc["strata"]
    assert s["regex_found_nothing"] == {"n": 2, "n_agree": 1, "agreement": 0.5}
    assert s["regex_found_an_answer"] == {"n": 2, "n_agree": 1, "agreement": 0.5}
    assert s["regex_and_judge_disagree"] == {"n": 2, "n_agree": 0, "agreement": 0.0}
    # scores: exact match with the gold -> regex right on q1 and q4 (2/4), judge right on q1 only (1/4)
    (m,) = doc["per_model"]
    assert m["score_a"] == 0.5 and m["score_b"] == 0.25 and m["diff_pp"] == pytest.approx(-25.0)


def test_two_judge_runs_get_strata_from_the_regex_data():
    a = within_records()
    b = [dict(r) for r in a]
    # judge 2 reads q3 as NONE (like the regex) and q4 as A (like the regex); everything else as judge 1
    b[2] = rec("m", "q3", prediction=None, regex_prediction=None, judge=judge("extraction", "NONE", "judge-2"))
    b[3] = rec("m", "q4", prediction="A", regex_prediction="A", gold="A", judge=judge("extraction", "A", "judge-2"))
    doc = agreement_report(pair_runs(a, b))
    assert doc["purpose"] == "extraction" and doc["n_paired"] == 6  # predictions: judge failure is no label here
    s = doc["strata"]
    assert s["regex_found_nothing"] == {"n": 2, "n_agree": 1, "agreement": 0.5}
    # regex vs judge (of run A) differ on q3 and q4; the two runs differ on both of them
    assert s["regex_and_judge_disagree"] == {"n": 2, "n_agree": 0, "agreement": 0.0}


def test_mixed_purposes_and_duplicates_are_refused():
    a = [rec("m", "q1", judge=judge("grading", "CORRECT"))]
    b = [rec("m", "q1", judge=judge("extraction", "A"))]
    with pytest.raises(JudgeAgreementError, match="--purpose"):
        pair_runs(a, b)
    assert pair_runs(a, b, purpose="grading")["n_judge_failed"] == 0
    with pytest.raises(JudgeAgreementError, match="--pipeline"):
        pair_runs(a + a, b, purpose="grading")
    with pytest.raises(JudgeAgreementError, match="regex_prediction"):
        within_run([rec("m", "q1", prediction="A")])
    # a grading verdict that could not be parsed is left out and counted
    failed = pair_runs([rec("m", "q1", judge=judge("grading", None))], [rec("m", "q1")])
    assert failed["pairs"] == [] and failed["n_judge_failed"] == 1


# --------------------------------------------------------------------------- command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_judge_agreement_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_command_tables_and_json(tmp_path, capsys):
    a, b = graded_runs()
    ra, rb = write_run_dir(tmp_path, "a", a), write_run_dir(tmp_path, "b", b)
    assert benchaudit_main(["judge-agreement", str(ra), str(rb)]) == 0
    text = capsys.readouterr().out
    assert "Cohen's kappa: 0.400" in text and "raw agreement: 0.700" in text
    assert "A=CORRECT" in text and "B=INCORRECT" in text and "+20.0" in text
    assert benchaudit_main(["judge-agreement", str(ra), str(rb), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kappa"] == pytest.approx(0.4) and doc["n_paired"] == 10 and doc["kappa_method"]

    rw = write_run_dir(tmp_path, "within", within_records())
    assert benchaudit_main(["judge-agreement", str(rw)]) == 0
    text = capsys.readouterr().out
    assert "regex found nothing" in text and "regex and judge disagree" in text


def test_command_bad_input(tmp_path, capsys):
    plain = write_run_dir(tmp_path, "plain", [rec("m", "q1", prediction="A")])
    assert benchaudit_main(["judge-agreement", str(plain)]) == 2
    assert benchaudit_main(["judge-agreement", str(plain), str(plain)]) == 2
    assert benchaudit_main(["judge-agreement", str(tmp_path / "missing")]) == 2
    other = write_run_dir(tmp_path, "other", [rec("m", "q9", prediction="A")])
    assert benchaudit_main(["judge-agreement", str(plain), str(other)]) == 2
    assert capsys.readouterr().err.count("benchaudit judge-agreement:") == 4
