"""SecBench and SECURE: label-set and numeric rules/metrics on real rows, task sizes, end to end.

Real data is read from $BENCHAUDIT_DATA (skipped with the reason when it is not set); nothing of
the benchmarks is copied here.  Model answers below are written for these tests.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.dataset.readers import load_questions
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline.types import Extraction, Generation, Question
from pytest_benchaudit.prompt.templates import render_request
from pytest_benchaudit.scoring import extract
from pytest_benchaudit.scoring import metrics as scoring
from pytest_benchaudit.scoring.judge_calls import judge_problem
from pytest_benchaudit.scoring.tasks import labels, numeric
from pytest_benchaudit.testing.data import data_file, read_tsv
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

GEN = Generation(text="")


def load(bench: str, task: str, data_dir: Path, *, all_rows: bool = False) -> list[Question]:
    """Questions of a task; ``all_rows`` drops the task's ``where`` row filter (all languages)."""
    suite = load_suite(SUITES / bench / "suite.toml")
    if all_rows:
        spec = suite.tasks[task]
        data = {k: v for k, v in spec.data.items() if k != "where"}
        suite = dataclasses.replace(suite, tasks={**suite.tasks, task: dataclasses.replace(spec, data=data)})
    return load_questions(suite, task, data_dir, "test")[0]


def read(rule: str, text: str, q: Question) -> str | None:
    return extract.extract(rule, Generation(text=text), q, "strip").prediction


def grade(metric: str, prediction: str | None, q: Question):
    ex = Extraction(prediction=prediction) if prediction is not None else Extraction(invalid_reason="unparseable")
    return scoring.score(metric, ex, q)


@pytest.fixture(scope="module")
def secbench_mcq(real_data: Path) -> list[Question]:
    """All 2,730 MCQs (every language): the data quirks live across the whole file."""
    data_file("secbench", "MCQs_2730.jsonl")
    return load("secbench", "mcq_en", real_data, all_rows=True)


@pytest.fixture(scope="module")
def secure(real_data: Path) -> dict[str, list[Question]]:
    data_file("secure", "SECURE - MAET.tsv")
    return {t: load("secure", t, real_data) for t in ("maet", "cwet", "kcv", "vood", "rert", "cpst")}


# ----------------------------------------------------------------------------------- task sizes


def test_question_counts_per_task(real_data: Path, secbench_mcq, secure) -> None:
    english_mcq = load("secbench", "mcq_en", real_data)
    english_saq = load("secbench", "saq_en", real_data)
    # `where = { language = "English" }` keeps the English rows, at their positions in the file
    assert len(secbench_mcq) == 2730 and len(english_mcq) == 661 and len(english_saq) == 3
    assert {q.meta["language"] for q in english_mcq + english_saq} == {"English"}
    assert [q.id for q in english_mcq] == [q.id for q in secbench_mcq if q.meta["language"] == "English"]
    assert {t: len(qs) for t, qs in secure.items()} == {
        "maet": 1072,
        "cwet": 965,
        "kcv": 466,
        "vood": 466,
        "rert": 1000,
        "cpst": 100,
    }
    # CWET: exactly one empty gold, at 0-based row 572 (item q0573)
    assert [q.index for q in secure["cwet"] if not q.gold.strip()] == [572]
    assert {q.gold for q in secure["vood"]} == {"X"}
    assert sorted(q.gold for q in secure["kcv"]).count("X") == 1 and {q.gold for q in secure["kcv"]} == {"T", "F", "X"}


def test_suite_cards_leave_unreleased_fields_unspecified() -> None:
    for bench, task in (("secbench", "mcq_en"), ("secure", "maet"), ("secure", "cpst")):
        suite = load_suite(SUITES / bench / "suite.toml")
        for layer in ("documented", "released"):
            card = suite.pipeline(task, layer).card()
            assert {"extraction.rule", "scoring.metric", "scoring.denominator", "inference.max_tokens"} <= set(
                card["unspecified"]
            )
            # SECURE releases the prompt (the Prompt column); SecBench releases none
            assert (card["fields"]["prompt.template"] == "dataset_prompt") == (bench == "secure")
    secure_suite = load_suite(SUITES / "secure" / "suite.toml")
    notes = " ".join(secure_suite.pipeline("cpst", "standardized").notes)
    assert "Tolerance 0.05" in notes
    for bench, task in (("secbench", "saq_en"), ("secure", "rert")):
        pipe = load_suite(SUITES / bench / "suite.toml").pipeline(task, "standardized")
        assert judge_problem(pipe) is not None


# ----------------------------------------------------------------------------------- SecBench


def test_secbench_options_are_json_arrays_and_multi_letter_golds(real_data: Path, secbench_mcq) -> None:
    raw = [
        json.loads(line) for line in data_file("secbench", "MCQs_2730.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    # The facts sheet calls `answers` a stringified list; at this checksum every row holds a JSON array.
    assert all(isinstance(r["answers"], list) for r in raw)
    assert all(list(q.choices.values()) == r["answers"] for q, r in zip(secbench_mcq, raw))
    multi = [q for q in secbench_mcq if len(q.gold) > 1]
    assert len(multi) == 27 and sum(q.meta["language"] == "English" for q in multi) == 9
    q = next(q for q in multi if q.meta["language"] == "English" and q.gold == "ABCD")
    for text in ("All four hold.\nAnswer: ABCD", "Answer: A, B, C and D", "**Answer:** (A), (B), (C), (D)"):
        pred = read("final_answer_letters", text, q)
        assert pred == "ABCD" and grade("label_set_match", pred, q).correct, text
    assert not grade("label_set_match", read("final_answer_letters", "Answer: ABC", q), q).correct
    single = next(q for q in secbench_mcq if q.meta["language"] == "English" and q.gold == "B")
    assert not grade("label_set_match", read("final_answer_letters", "Answer: AB", single), single).correct
    assert grade("label_set_match", read("final_answer_letters", "B", single), single).correct


def test_secbench_e_label_on_the_five_option_row(secbench_mcq) -> None:
    (e_row,) = [q for q in secbench_mcq if q.gold == "E"]
    assert e_row.index == 678 and list(e_row.choices) == ["A", "B", "C", "D", "E"]
    assert read("final_answer_letters", "Answer: E", e_row) == "E"
    assert grade("label_set_match", "E", e_row).correct
    # on a 4-option row E is not a label: nothing is read
    four = next(q for q in secbench_mcq if len(q.choices) == 4)
    assert read("final_answer_letters", "Answer: E", four) is None


def test_stringified_list_golds_are_parsed_without_eval(secbench_mcq) -> None:
    q = next(q for q in secbench_mcq if q.gold == "ABD")
    assert labels.gold_label_set("['A', 'B', 'D']") == labels.gold_label_set("ABD") == {"A", "B", "D"}
    as_list = q.model_copy(update={"gold": "['A', 'B', 'D']"})
    assert grade("label_set_match", "ABD", as_list).correct
    assert not grade("label_set_match", "AB", as_list).correct
    # a "list" that is code is never run: it is not a literal, so only its letters are read
    hostile = q.model_copy(update={"gold": "[__import__('os').system('false')]"})
    assert not grade("label_set_match", "ABD", hostile).correct
    assert not grade("label_set_match", "", q.model_copy(update={"gold": ""})).correct


# ----------------------------------------------------------------------------------- SECURE


def test_secure_prompt_is_the_released_prompt(real_data: Path, secure) -> None:
    suite = load_suite(SUITES / "secure" / "suite.toml")
    rows = read_tsv(data_file("secure", "SECURE - KCV.tsv"))
    pipe = suite.pipeline("kcv", "standardized")
    request = render_request(pipe, suite.templates["dataset_prompt"], secure["kcv"][0])
    (msg,) = request.messages
    assert msg.role == "user" and msg.content == rows[0]["Prompt"]
    assert "If you do not know the answer, return X" in msg.content


def test_secure_mcq_reads_a_to_d_and_x(secure) -> None:
    q = secure["maet"][0]
    assert q.gold == "A" and list(q.choices) == ["A", "B", "C", "D"]
    for text, want in [
        ("A", "A"),
        ("A) Sending legitimate control messages", "A"),
        ("**X**", "X"),
        ("I am not certain.\nAnswer: X", "X"),
        ("The answer is C.", "C"),
        ("<think>Answer: B</think>\nA", "A"),
    ]:
        assert read("final_answer_or_x", text, q) == want, text
    for text in ("A rogue master sends control messages.", "Xen is a hypervisor.", "E"):
        assert read("final_answer_or_x", text, q) is None, text
    right, abstain, wrong = (grade("label_match_x", p, q) for p in ("A", "X", "C"))
    assert right.correct and right.extras == {"abstained": 0.0}
    assert not abstain.correct and abstain.extras == {"abstained": 1.0}  # X is an answer, counted wrong
    assert not wrong.correct
    # the standard A-D reader would not accept X at all
    assert read("final_answer_letter", "X", q) is None


def test_secure_true_false_unknown(secure) -> None:
    kcv = {q.gold: q for q in secure["kcv"]}
    for text, want in [
        ("F", "F"),
        ("Answer: T", "T"),
        ("True", "T"),
        ("answer: false", "F"),
        ("**X**", "X"),
        ("The record does not say.\nX", "X"),
    ]:
        assert read("final_answer_tfx", text, kcv["F"]) == want, text
    for text in ("The statement is misleading.", "Fine.", "A"):
        assert read("final_answer_tfx", text, kcv["F"]) is None, text
    assert grade("label_match_x", "F", kcv["F"]).correct
    assert grade("label_match_x", "X", kcv["X"]).correct  # the one KCV row whose gold is X
    vood = secure["vood"][0]
    assert grade("label_match_x", read("final_answer_tfx", "X", vood), vood).correct
    assert not grade("label_match_x", read("final_answer_tfx", "T", vood), vood).correct
    # generic rule: label set from question.meta["labels"], else the choice keys
    tfx = vood.model_copy(update={"meta": {"labels": "TFX"}})
    assert extract.RULES["final_answer_label"]("Answer: X", tfx, GEN)[0] == "X"
    assert extract.RULES["final_answer_label"]("Answer: X", secure["maet"][0], GEN)[0] is None


def _cvss31(vector: str) -> float:
    """CVSS v3.1 base score (specification formulas), to check the CPST golds."""
    m = dict(part.split(":") for part in vector.split("/"))
    changed = m["S"] == "C"
    cia = {"H": 0.56, "L": 0.22, "N": 0.0}
    iss = 1 - (1 - cia[m["C"]]) * (1 - cia[m["I"]]) * (1 - cia[m["A"]])
    impact = 7.52 * (iss - 0.029) - 3.25 * (iss - 0.02) ** 15 if changed else 6.42 * iss
    pr = {"N": 0.85, "L": 0.68 if changed else 0.62, "H": 0.5 if changed else 0.27}[m["PR"]]
    expl = (
        8.22
        * {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2}[m["AV"]]
        * {"L": 0.77, "H": 0.44}[m["AC"]]
        * pr
        * {"N": 0.85, "R": 0.62}[m["UI"]]
    )
    if impact <= 0:
        return 0.0
    raw = min((1.08 if changed else 1.0) * (impact + expl), 10.0)
    i = round(raw * 100000)
    return i / 100000.0 if i % 10000 == 0 else (math.floor(i / 10000) + 1) / 10.0


def test_cpst_golds_match_the_cvss_formula_so_tolerance_is_one_decimal(secure) -> None:
    assert all(_cvss31(q.text) == float(q.gold) for q in secure["cpst"])
    assert numeric.CVSS_TOLERANCE == 0.05


def test_cpst_reads_the_score_and_scores_absolute_error(secure) -> None:
    q = next(q for q in secure["cpst"] if q.gold == "7.8")
    for text in (
        "7.8",
        "**7.8**",
        "7.8/10",
        "Answer: 7.8",
        "The CVSS v3.1 base score is 7.8.",
        "<think>Maybe 9.8</think>\n7.8",
        "Impact 5.9, exploitability 1.8.\nScore: 7.8",
    ):
        assert read("final_cvss_score", text, q) == "7.8", text
    for text in ("It is high.", "Answer: 78", "AV:L/AC:L/PR:N", "CVSS v3.1"):
        assert read("final_cvss_score", text, q) is None, text
    exact, close, off = (grade("cvss_abs_error", p, q) for p in ("7.80", "7.9", "5.5"))
    assert exact.value == 0 and exact.correct and exact.extras == {"within_tolerance": 1.0}
    assert close.value == pytest.approx(0.1) and not close.correct
    assert off.value == pytest.approx(2.3) and not off.correct
    invalid = grade("cvss_abs_error", None, q)
    assert invalid.value == 10.0 and not invalid.correct
    info = scoring.METRIC_INFO["cvss_abs_error"]
    assert info.lower_is_better and info.kind == "continuous" and "0.05" in info.description


# ----------------------------------------------------------------------------------- end to end


def _secure_script(call) -> Reply:
    text = call.last_user_text
    if "CVSS v3 Vector String" in text:
        return Reply(content="7.8")
    if "JSON data as context" in text:
        return Reply(content="F")
    if "For the given statement" in text:
        return Reply(content="X")
    if "four options" in text:
        return Reply(content="Answer: C")
    return Reply(content="Successful exploitation could allow remote code execution.")


def test_secure_end_to_end(pytester: pytest.Pytester, real_data: Path) -> None:
    data_file("secure", "SECURE - CWET.tsv")
    with ScriptedServer(_secure_script) as server:
        result = pytester.runpytest(
            str(SUITES / "secure"),
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "-rs",
            "-k",
            "q0001 or q0002 or q0573",
        )
        calls = sum(1 for c in server.calls if c.path.endswith("completions"))  # not GET /models
    out = read_run(only_run_dir(pytester.path / "out"))
    results = {r["task"]: r for r in out["summary"]["results"]}
    # every task's card is in the run; every scored task has a summary result
    assert set(out["run"]["pipeline_cards"]) == {f"secure.{t}" for t in ("maet", "cwet", "kcv", "vood", "rert", "cpst")}
    assert set(results) == {"maet", "cwet", "kcv", "vood", "cpst"}
    assert results["vood"]["score"] == 1.0 and results["vood"]["extras"] == {"abstained": 1.0}
    assert results["cpst"]["metric"] == "cvss_abs_error" and results["cpst"]["lower_is_better"]
    assert results["cpst"]["n"] == 2
    assert results["cwet"]["n"] == 2  # q0573 (empty gold) skipped, not scored
    # judge-graded RERT: collected, skipped with the reason, never scored or asked
    assert not any(r["task"] == "rert" for r in out["records"])
    assert calls == len(out["records"]) == 2 + 3 + 2 + 2 + 2  # maet has a q0573, cwet's is skipped
    result.stdout.fnmatch_lines(["*secure.cwet 0573: empty gold label*"])
    result.stdout.fnmatch_lines(["SKIPPED [[]3[]] *secure.rert: scoring.metric 'judge_graded' needs an LLM judge*"])
    recs = {(r["task"], r["question_id"]): r for r in out["records"]}
    assert recs[("kcv", "0001")]["prediction"] == "F" and recs[("kcv", "0001")]["correct"]


def test_secbench_end_to_end(pytester: pytest.Pytester, real_data: Path) -> None:
    data_file("secbench", "MCQs_2730.jsonl")
    with ScriptedServer(lambda call: Reply(content="Answer: B")) as server:
        result = pytester.runpytest(
            str(SUITES / "secbench"),
            "--data-dir",
            str(real_data),
            "--limit",
            "6",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "-rs",
        )
        calls = sum(1 for c in server.calls if c.path.endswith("completions"))  # not GET /models
    out = read_run(only_run_dir(pytester.path / "out"))
    assert set(out["run"]["pipeline_cards"]) == {"secbench.mcq_en", "secbench.saq_en"}
    (res,) = out["summary"]["results"]
    assert res["task"] == "mcq_en" and res["n"] == 6 and res["metric"] == "label_set_match"
    golds = [r["gold"] for r in out["records"]]
    assert res["n_correct"] == golds.count("B")
    assert all(r["question_meta"]["language"] == "English" for r in out["records"])
    assert calls == 6  # the SAQs are never asked
    result.assert_outcomes(passed=golds.count("B"), failed=6 - golds.count("B"), skipped=3)
    result.stdout.fnmatch_lines(["*secbench.saq_en: scoring.metric 'judge_graded' needs an LLM judge*"])
