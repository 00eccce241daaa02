"""The human-validation loop: benchaudit sample -> annotators' verdicts -> judge-agreement --human and
audit-gold --confirm, on hand-made runs and on the published AthenaBench outputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.annotation.sample import (
    NOT_BENCHMARK_WIDE,
    SampleError,
    allocate,
    cohen_kappa,
    gold_confirm_report,
    stratified_sample,
    wilson,
)
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.data import real_data_dir
from pytest_benchaudit.testing.runs import write_run_dir

SUITES = Path(__file__).resolve().parents[2] / "suites"


def judged(
    qid: str, model: str, verdict: str | None, status: str = "json", task: str = "saq_en", **extra: Any
) -> dict[str, Any]:
    return {
        "benchmark": "secbench",
        "task": task,
        "question_id": qid,
        "question_index": int(qid),
        "model": model,
        "variant": "",
        "pipeline": "standardized",
        "valid": verdict is not None,
        "prediction": None,
        "gold": f"reference {qid}",
        "correct": verdict == "CORRECT",
        "score": float(verdict == "CORRECT"),
        "metric": "judge_graded",
        "raw_output": f"answer of {model} to {qid}",
        "request": {"mode": "chat", "messages": [{"role": "user", "content": f"What is secret {qid}?"}]},
        "judge": {
            "model": "judge:j",
            "purpose": "grading",
            "prompt_version": "g1",
            "raw_output": "{}",
            "parse_status": status,
            "verdict": verdict,
        },
        **extra,
    }


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_allocate_equal_shares_capped_and_redistributed() -> None:
    assert allocate({("a",): 100, ("b",): 3, ("c",): 100}, 30) == {("a",): 14, ("b",): 3, ("c",): 13}
    assert allocate({("a",): 2, ("b",): 1}, 10) == {("a",): 2, ("b",): 1}
    assert sum(allocate({(str(i),): 7 for i in range(9)}, 50).values()) == 50


def test_stratified_sample_is_seeded_and_checks_keys() -> None:
    units = [
        {"benchmark": "b", "task": t, "question_id": f"{i:03d}", "model": "m", "purpose": "grading"}
        for t in ("x", "y")
        for i in range(40)
    ]
    a = stratified_sample(units, 10, ["task"], seed=3)
    assert [r["question_id"] for r in a] == [r["question_id"] for r in stratified_sample(units, 10, ["task"], seed=3)]
    assert [r["question_id"] for r in a] != [r["question_id"] for r in stratified_sample(units, 10, ["task"], seed=4)]
    assert {r["stratum"] for r in a} == {"task=x", "task=y"} and all(r["stratum_size"] == 40 for r in a)
    assert [r["sample_id"] for r in a][:2] == ["s0001", "s0002"]
    with pytest.raises(SampleError, match="unknown key"):
        stratified_sample(units, 10, ["colour"])


def test_judge_sample_then_human_agreement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = [
        judged(f"{i:03d}", m, "CORRECT" if i % 3 else "INCORRECT", "fallback" if i == 5 else "json")
        for i in range(20)
        for m in ("m1", "m2")
    ]
    recs.append(judged("099", "m1", None, "failed"))
    run = write_run_dir(tmp_path, "judged", recs)
    out = tmp_path / "sample.csv"
    assert main(["sample", str(run), "--for", "judge", "--n", "12", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "12 of 40 judged records (1 judge calls without a verdict left out)" in said and "keep it local" in said
    rows = read_csv(out)
    assert len(rows) == 12 and rows[0]["verdict_1"] == "" and rows[0]["verdict_2"] == ""
    assert rows[0]["question"].startswith("What is secret") and rows[0]["response"].startswith("answer of")
    assert any(r["parse_status"] == "fallback" for r in rows)  # the one fallback answer is its own stratum
    # Annotator 1 agrees with the judge on all but the first two rows; annotator 2 differs from 1 on row 3.
    flip = {"CORRECT": "INCORRECT", "INCORRECT": "CORRECT"}
    for i, r in enumerate(rows):
        r["verdict_1"] = flip[r["judge_label"]] if i < 2 else r["judge_label"].lower()
        r["verdict_2"] = flip[r["verdict_1"].upper()] if i == 3 else r["verdict_1"]
    write_csv(out, rows)
    assert main(["judge-agreement", "--human", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["per_annotator"][0]["k"] == 10 and doc["per_annotator"][0]["n"] == 12
    assert doc["judge_accuracy"] == {"n": 11, "k": 9, "rate": 9 / 11, "ci95": wilson(9, 11)}
    v1 = [r["verdict_1"].casefold() for r in rows]
    v2 = [r["verdict_2"].casefold() for r in rows]
    assert doc["between_annotators"]["kappa"] == pytest.approx(cohen_kappa(v1, v2)["kappa"])
    assert doc["between_annotators"]["n"] == 12
    assert main(["judge-agreement", "--human", str(out)]) == 0
    text = capsys.readouterr().out
    assert "9 of 11 = 81.8%" in text and "Cohen's kappa between verdict_1 and verdict_2" in text
    assert "What is secret" not in text  # counts and rates only, never the question text


def test_human_agreement_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run_dir(tmp_path, "judged", [judged("001", "m1", "CORRECT")])
    out = tmp_path / "s.csv"
    assert main(["sample", str(run), "--for", "judge", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["judge-agreement", "--human", str(out)]) == 2
    assert "no verdict filled in" in capsys.readouterr().err
    assert main(["audit-gold", "--confirm", str(out)]) == 2
    assert "a sample for judge, not for gold" in capsys.readouterr().err
    assert main(["judge-agreement", "--human", str(tmp_path / "none.csv")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["sample", str(run), "--for", "gold", "--out", str(out)]) == 2  # one model: no consensus
    assert "records of 1 model(s); a consensus needs runs of at least 2 models" in capsys.readouterr().err
    assert main(["sample", str(run), "--for", "judge", "--n", "0", "--out", str(out)]) == 2


def test_gold_confirm_rate_rules_and_kappa() -> None:
    rows = [
        {"sample_id": f"s{i}", "benchmark": "b", "task": "t" if i < 6 else "u", "verdict_1": v1, "verdict_2": v2}
        for i, (v1, v2) in enumerate(
            [
                ("error", "error"),
                ("error", "ok"),
                ("ok", "ok"),
                ("unclear", "ok"),
                ("error", ""),
                ("", ""),
                ("Error", "error"),
                ("ok", "ok"),
            ]
        )
    ]
    doc = gold_confirm_report(rows, ["verdict_1", "verdict_2"])
    assert doc["confirmed"]["k"] == 3 and doc["confirmed"]["n"] == 7 and doc["n_unchecked"] == 1
    assert doc["confirmed"]["ci95"] == wilson(3, 7) and doc["n_unclear"] == 1
    assert doc["between_annotators"]["n"] == 6 and doc["note"] == NOT_BENCHMARK_WIDE
    assert gold_confirm_report(rows, ["verdict_1", "verdict_2"], rule="any")["confirmed"]["k"] == 4
    with pytest.raises(SampleError, match="line 2"):
        gold_confirm_report([{**rows[0], "verdict_1": "wrong"}], ["verdict_1"])


def test_wilson_matches_scipy() -> None:
    from scipy.stats import binomtest

    ci = binomtest(29, 120).proportion_ci(method="wilson")
    assert wilson(29, 120) == pytest.approx([ci.low, ci.high], abs=1e-6)


def test_published_athena_gold_sample_and_confirm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_benchaudit.importers import import_athenabench_runs

    data = real_data_dir()
    import_athenabench_runs(data / "athenabench" / "runs-mini", tmp_path / "athena", SUITES, str(data))
    out = tmp_path / "gold.csv"
    assert (
        main(["sample", str(tmp_path / "athena"), "--for", "gold", "--n", "20", "--seed", "7", "--out", str(out)]) == 0
    )
    assert "20 of 49 audit-gold flags, 4 strata by benchmark,task, seed 7" in capsys.readouterr().out
    rows = read_csv(out)
    assert {r["task"] for r in rows} == {"ate", "mcq", "rcm", "taa"} and all(r["question"] for r in rows)
    assert {r["stratum_size"] for r in rows if r["task"] == "taa"} == {"5"}
    for i, r in enumerate(rows):  # 5 confirmed by both, 3 split, the rest kept by both
        r["verdict_1"] = "error" if i < 8 else "ok"
        r["verdict_2"] = "error" if i < 5 else "ok"
    write_csv(out, rows)
    assert main(["audit-gold", "--confirm", str(out)]) == 0
    text = capsys.readouterr().out
    lo, hi = wilson(5, 20)
    assert f"5 of 20 = 25.0% (95% Wilson CI {100 * lo:.1f}-{100 * hi:.1f}%)" in text
    assert "not a benchmark-wide label-error rate" in text and "Cohen's kappa" in text
    assert not any(r["question"][:40] in text for r in rows)


def test_judge_loop_on_a_pytest_run_with_a_judge(
    pytester: pytest.Pytester, toy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real judged run (pytester; model and judge are scripted endpoints on 127.0.0.1) -> sample -> verdicts
    -> judge-agreement --human: the sample reads the judge records the runner writes."""
    from pytest_benchaudit.testing.runs import only_run_dir, read_run
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    def model(call: Any) -> Reply:
        text = call.last_user_text
        return Reply(
            content="I pick B [FALLBACK]"
            if "THINK_CLOSED" in text
            else "I pick B"
            if "CORRECT" in text or "WRONG" in text
            else "No clear option here."
        )

    def judge(call: Any) -> Reply:
        response = call.body["messages"][-1]["content"].split("<<<", 1)[1]
        if "[FALLBACK]" in response:
            return Reply(content="The answer: B")  # not JSON: read by the fallback parser
        return Reply(content='{"answer": "B"}' if "pick B" in response else '{"answer": "NONE"}')

    with ScriptedServer(model) as m, ScriptedServer(judge) as j:
        pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{m.url}",
            "--judge",
            f"j@{j.url}",
            "--report-dir",
            "out",
            "--set",
            "extraction.rule=judge",
            "--no-cache",
        )
    run_dir = only_run_dir(pytester.path / "out")
    judged = [r for r in read_run(run_dir)["records"] if r.get("judge")]
    assert len(judged) >= 10 and {r["judge"]["parse_status"] for r in judged} == {"json", "fallback"}
    capsys.readouterr()
    out = pytester.path / "judge-sample.csv"
    assert (
        main(
            [
                "sample",
                str(run_dir),
                "--for",
                "judge",
                "--n",
                "6",
                "--strata",
                "parse_status,judge_label",
                "--seed",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = read_csv(out)
    assert len(rows) == 6 and {r["parse_status"] for r in rows} == {"json", "fallback"}
    assert {r["judge_label"] for r in rows} == {"B", "NONE"} and all(r["purpose"] == "extraction" for r in rows)
    assert all(r["question"].split(" ")[1] == "question" and "A. first option" in r["question"] for r in rows)
    for i, r in enumerate(rows):  # both annotators read the same; they overrule the judge once
        r["verdict_1"] = r["verdict_2"] = "A" if i == 0 else r["judge_label"]
    write_csv(out, rows)
    capsys.readouterr()
    assert main(["judge-agreement", "--human", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["judge_accuracy"]["k"] == 5 and doc["judge_accuracy"]["n"] == 6
    assert doc["between_annotators"]["agreement"] == 1.0


def _mcq(qid: str, model: str, prediction: str | None, gold: str = "B") -> dict[str, Any]:
    return {
        "benchmark": "toy",
        "task": "mcq",
        "question_id": qid,
        "model": model,
        "variant": "",
        "pipeline": "standardized",
        "metric": "exact_match",
        "question_labels": ["A", "B", "C", "D"],
        "prediction": prediction,
        "valid": prediction is not None,
        "gold": gold,
        "correct": prediction == gold,
        "score": float(prediction == gold),
        "request": {"mode": "chat", "messages": [{"role": "user", "content": f"Toy question {qid}?"}]},
    }


def test_sample_for_gold_on_a_one_model_pytest_run_is_refused_as_audit_gold_refuses(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # A real run of one model answering A to every toy question (golds B, C, D): each wrong answer was
    # "a flag agreed by 1 of 1 models" for sample --for gold, while audit-gold refused the run.
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
    from pytest_benchaudit.testing.toy import write_toy

    write_toy(pytester.path)
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "--no-cache",
            "-p",
            "no:randomly",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (run,) = [p for p in (pytester.path / "out").iterdir() if p.is_dir()]
    wrong = sum(not json.loads(line)["correct"] for line in (run / "records.jsonl").read_text().splitlines())
    assert wrong > 0  # the wrong answers a one-model "consensus" would have flagged
    capsys.readouterr()
    assert main(["audit-gold", str(run)]) == 2
    audit_err = capsys.readouterr().err
    out = pytester.path / "gold.csv"
    assert main(["sample", str(run), "--for", "gold", "--out", str(out)]) == 2
    sample_err = capsys.readouterr().err
    assert not out.exists()
    why = "records of 1 model(s); a consensus needs runs of at least 2 models"
    assert why in audit_err and why in sample_err


def test_sample_for_gold_draws_exactly_the_audit_gold_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Three models; q1: all three agree on C against B (a flag); q2: two of three agree on D (a flag);
    # q3: only m1 has a record, and its wrong answer is no consensus; q4: two agree, one of them right.
    records = [_mcq("q1", m, "C") for m in ("m1", "m2", "m3")]
    records += [_mcq("q2", "m1", "D"), _mcq("q2", "m2", "D"), _mcq("q2", "m3", None)]
    records += [_mcq("q3", "m1", "A")]
    records += [_mcq("q4", "m1", "B"), _mcq("q4", "m2", "A"), _mcq("q4", "m3", "C")]
    runs = [write_run_dir(tmp_path, m, [r for r in records if r["model"] == m]) for m in ("m1", "m2", "m3")]
    flags_csv = tmp_path / "flags.csv"
    assert main(["audit-gold", *map(str, runs), "--out", str(flags_csv)]) == 0
    flagged = [(r["question_id"], r["consensus_answer"], r["n_agreeing"]) for r in read_csv(flags_csv)]
    assert flagged == [("q1", "C", "3"), ("q2", "D", "2")]  # by hand, from the records above
    sample = tmp_path / "sample.csv"
    assert main(["sample", *map(str, runs), "--for", "gold", "--n", "50", "--out", str(sample)]) == 0
    assert "2 of 2 audit-gold flags" in capsys.readouterr().out
    drawn = sorted((r["question_id"], r["consensus_answer"], r["n_agreeing"]) for r in read_csv(sample))
    assert drawn == flagged
