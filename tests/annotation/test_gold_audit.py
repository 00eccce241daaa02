"""benchaudit audit-gold: shared wrong answers across models, flagged for manual review."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.annotation.gold_audit import (
    CSV_COLUMNS,
    GoldAuditError,
    audit_gold,
    normalize_answer,
)
from pytest_benchaudit.cli.audit_gold_cmd import add_parser as add_audit_gold_parser
from pytest_benchaudit.cli.audit_gold_cmd import run as run_audit_gold
from pytest_benchaudit.importers import import_athenabench_runs
from pytest_benchaudit.testing.runs import write_run_dir

LABELS = ["A", "B", "C", "D"]


def rec(
    model: str,
    qid: str,
    prediction: str | None,
    gold: str,
    *,
    valid: bool = True,
    correct: bool | None = None,
    task: str = "mcq",
    metric: str = "exact_match",
    labels: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    if correct is None:
        correct = valid and prediction is not None and prediction.strip().upper() == gold.upper()
    return {
        "benchmark": "toy",
        "task": task,
        "question_id": qid,
        "question_index": 0,
        "model": model,
        "variant": "",
        "pipeline": "released",
        "prediction": prediction,
        "valid": valid,
        "gold": gold,
        "correct": correct,
        "score": float(correct),
        "metric": metric,
        "question_labels": LABELS if labels is None else labels,
        **extra,
    }


def three_models() -> list[dict[str, Any]]:
    return [
        # q1: 2 of 3 agree on B, gold A -> flagged
        rec("m1", "q1", "B", "A"),
        rec("m2", "q1", "b", "A"),
        rec("m3", "q1", "A", "A"),
        # q2: answers spread, only 1 of 3 on each wrong answer -> not flagged
        rec("m1", "q2", "B", "A"),
        rec("m2", "q2", "C", "A"),
        rec("m3", "q2", "A", "A"),
        # q3: two say C, but one of them is invalid -> only 1 valid agreeing model -> not flagged
        rec("m1", "q3", "C", "A"),
        rec("m2", "q3", "C", "A", valid=False),
        rec("m3", "q3", "D", "A"),
        # q4: all three right -> not flagged
        rec("m1", "q4", "D", "D"),
        rec("m2", "q4", "D", "D"),
        rec("m3", "q4", "D", "D"),
    ]


def flags_by_q(result) -> dict[str, Any]:
    return {f.question_id: f for f in result.flags}


def test_two_of_three_on_a_wrong_answer_is_flagged_one_of_three_is_not():
    result = audit_gold(three_models())
    flags = flags_by_q(result)
    assert sorted(flags) == ["q1"]
    f = flags["q1"]
    assert (f.benchmark, f.task, f.gold, f.consensus_answer) == ("toy", "mcq", "A", "B")
    assert f.agreeing_models == ["m1", "m2"] and f.n_agreeing == 2 and f.n_models == 3 and f.min_models == 2
    assert result.tasks["toy.mcq"] == {"questions": 4, "flags": 1, "models": 3}


def test_invalid_predictions_never_agree_even_with_an_explicit_k():
    flags = flags_by_q(audit_gold(three_models(), min_models=2))
    assert "q3" not in flags and "q2" not in flags


def test_default_majority_counts_models_with_a_record_including_invalid_ones():
    # 3 models have a record; one is invalid; 2 valid agree: 2 > 3/2 -> flagged (n_valid says 2)
    records = [rec("m1", "q", "B", "A"), rec("m2", "q", "B", "A"), rec("m3", "q", None, "A", valid=False)]
    (flag,) = audit_gold(records).flags
    assert flag.n_models == 3 and flag.n_valid == 2 and flag.min_models == 2
    # 4 models: 2 agreeing is no strict majority, 3 is
    four = [rec("m1", "q", "B", "A"), rec("m2", "q", "B", "A"), rec("m3", "q", "C", "A"), rec("m4", "q", "A", "A")]
    assert audit_gold(four).flags == []
    assert [f.n_agreeing for f in audit_gold(four, min_models=2).flags] == [2]
    four[2] = rec("m3", "q", "B", "A")
    assert [f.min_models for f in audit_gold(four).flags] == [3]


def test_multi_answer_letter_sets_are_order_insensitive():
    records = [
        rec(m, "q", p, "AB", task="mca", metric="letter_set_exact")
        for m, p in (("m1", "C, D"), ("m2", "dc"), ("m3", "AB"))
    ]
    (flag,) = audit_gold(records).flags
    assert flag.consensus_answer == "CD" and flag.agreeing_models == ["m1", "m2"]
    # the gold set in another order is no disagreement, whatever `correct` says
    records = [
        rec(m, "q", p, "AB", correct=False, task="mca", metric="letter_set_exact")
        for m, p in (("m1", "B, A"), ("m2", "ba"), ("m3", "C"))
    ]
    assert audit_gold(records).flags == []
    assert normalize_answer("C, a", LABELS) == normalize_answer("ac", LABELS) == "AC"
    assert normalize_answer("A and B", LABELS) == "AB"
    assert normalize_answer(" CWE-79 ") == normalize_answer("cwe-79") == "cwe-79"


def test_free_text_answers_compare_case_insensitively_and_metric_leniency_is_respected():
    records = [
        rec(m, "q", p, "CWE-89", task="rcm", labels=[])
        for m, p in (("m1", "CWE-79"), ("m2", "cwe-79"), ("m3", "CWE-89"))
    ]
    (flag,) = audit_gold(records).flags
    assert flag.consensus_answer == "CWE-79"
    # a prediction the task's metric accepts (parent technique) is never a wrong consensus
    ate = [
        rec(m, "q", "T1218", "T1218.001", correct=True, task="ate", metric="technique_parent_exact", labels=[])
        for m in ("m1", "m2", "m3")
    ]
    assert audit_gold(ate).flags == []


def test_continuous_metrics_are_skipped_with_the_reason():
    records = [
        rec(
            m,
            "q",
            "CVSS:3.1/AV:N",
            "CVSS:3.1/AV:L",
            correct=False,
            task="vsp",
            metric="cvss_closeness_athena",
            labels=[],
        )
        for m in ("m1", "m2", "m3")
    ]
    result = audit_gold(records)
    assert result.flags == [] and "toy.vsp" not in result.tasks
    assert "continuous" in result.skipped["toy.vsp"]


def test_two_records_of_one_model_for_a_question_need_a_pipeline():
    records = three_models() + [rec("m1", "q1", "C", "A", pipeline="other")]
    with pytest.raises(GoldAuditError, match="--pipeline"):
        audit_gold(records)
    assert [f.question_id for f in audit_gold(records, pipeline="released").flags] == ["q1"]
    with pytest.raises(GoldAuditError):
        audit_gold(records, min_models=1)


# --------------------------------------------------------------------------- command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_audit_gold_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_command_writes_the_review_csv_and_never_a_rate(tmp_path, capsys):
    records = three_models()
    for model in ("m1", "m2", "m3"):
        write_run_dir(tmp_path / "runs", model, [r for r in records if r["model"] == model])
    out = tmp_path / "flags.csv"
    args = _parser().parse_args(["audit-gold", str(tmp_path / "runs"), "--out", str(out)])
    assert run_audit_gold(args) == 0
    text = capsys.readouterr().out
    assert "candidates for manual review, not label errors" in text
    assert "rate" not in text.lower() and "%" not in text
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0]) == CSV_COLUMNS
    assert [
        (r["question_id"], r["gold"], r["consensus_answer"], r["n_agreeing"], r["agreeing_models"], r["n_models"])
        for r in rows
    ] == [("q1", "A", "B", "2", "m1;m2", "3")]


def test_command_refuses_a_single_model_and_a_missing_path(tmp_path, capsys):
    write_run_dir(tmp_path, "only", [rec("m1", "q1", "B", "A")])
    assert run_audit_gold(_parser().parse_args(["audit-gold", str(tmp_path / "only")])) == 2
    assert run_audit_gold(_parser().parse_args(["audit-gold", str(tmp_path / "nope")])) == 2
    assert "benchaudit audit-gold:" in capsys.readouterr().err


# --------------------------------------------------------------------------- real data

ATHENA_FLAGS = {"athenabench.ate": 7, "athenabench.mcq": 14, "athenabench.rcm": 23, "athenabench.taa": 5}


@pytest.fixture(scope="module")
def athena_runs(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    report_dir = tmp_path_factory.mktemp("athena-goldaudit")
    import_athenabench_runs(source, report_dir, SUITES, str(real_data))
    return report_dir


def test_athenabench_flags_per_task(athena_runs, tmp_path, capsys):
    out = tmp_path / "athena-flags.csv"
    assert run_audit_gold(_parser().parse_args(["audit-gold", str(athena_runs), "--out", str(out)])) == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    per_task: dict[str, int] = {}
    for r in rows:
        per_task[f"{r['benchmark']}.{r['task']}"] = per_task.get(f"{r['benchmark']}.{r['task']}", 0) + 1
        assert int(r["n_agreeing"]) >= int(r["min_models"]) == 7 and r["n_models"] == "12"
        assert normalize_answer(r["consensus_answer"]) != normalize_answer(r["gold"])
        assert len(r["agreeing_models"].split(";")) == int(r["n_agreeing"])
    assert per_task == ATHENA_FLAGS
    assert "skipped athenabench.vsp" in text and "skipped athenabench.rms" in text
    assert "not label errors" in text
