"""RedSage-Bench: hub-only data, read from a local export or downloaded once; offline = one clear message."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.dataset.readers import load_questions
from pytest_benchaudit.dataset.suites import SuiteError, load_suite
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

# Rows written for this test in the hub dataset's format (content, question, answers{A..D}, solution).
FIXTURE = [
    {
        "content": "ctx",
        "question": "Which tool lists open ports on a host?",
        "answers": {"A": "nmap", "B": "grep", "C": "tar", "D": "ls"},
        "solution": "A",
    },
    {
        "content": "ctx",
        "question": "Which Kali tool cracks password hashes?",
        "answers": {"A": "curl", "B": "john", "C": "vim", "D": "top"},
        "solution": "B",
    },
]


def write_export(data_dir: Path, subset: str) -> Path:
    path = data_dir / "redsage" / f"{subset}-test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in FIXTURE))
    return path


def test_local_export_is_read_like_the_hub_rows(tmp_path: Path) -> None:
    write_export(tmp_path, "cybersecurity_skills")
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    questions, _ = load_questions(suite, "skills", tmp_path, "test")
    assert [q.gold for q in questions] == ["A", "B"]
    assert questions[1].choices == {"A": "curl", "B": "john", "C": "vim", "D": "top"}


def test_missing_export_without_datasets_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as if not installed
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    with pytest.raises(SuiteError) as err:
        load_questions(suite, "tools_kali", tmp_path, "test")
    message = str(err.value)
    assert "RISys-Lab/Benchmarks_CyberSec_RedSageMCQ" in message and "'datasets' package is not installed" in message
    assert str(tmp_path / "redsage" / "cybersecurity_tools_kali-test.jsonl") in message


def test_offline_hub_is_one_clear_error_and_a_download_writes_the_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("datasets")

    def offline(repo, config, split):
        raise ConnectionError(
            "Couldn't reach 'RISys-Lab/Benchmarks_CyberSec_RedSageMCQ' on the Hub (LocalEntryNotFoundError)"
        )

    fake.load_dataset = offline  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    with pytest.raises(SuiteError, match="could not load RISys-Lab/Benchmarks_CyberSec_RedSageMCQ .*ConnectionError"):
        load_questions(suite, "skills", tmp_path, "test")
    assert not list(tmp_path.rglob("*.jsonl*"))  # nothing half-written

    fake.load_dataset = lambda repo, config, split: iter(FIXTURE)  # type: ignore[attr-defined]
    questions, path = load_questions(suite, "skills", tmp_path, "test")
    assert len(questions) == 2 and path.name == "cybersecurity_skills-test.jsonl" and path.is_file()


def test_redsage_end_to_end_against_loopback(pytester: pytest.Pytester) -> None:
    for subset in (
        "cybersecurity_knowledge_generals",
        "cybersecurity_knowledge_frameworks",
        "cybersecurity_skills",
        "cybersecurity_tools_cli",
        "cybersecurity_tools_kali",
    ):
        write_export(pytester.path / "data", subset)
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        result = pytester.runpytest(
            str(SUITES / "redsage"), "--data-dir", "data", "--model", f"m@{server.url}", "--report-dir", "out"
        )
    result.assert_outcomes(passed=5, failed=5)
    out = read_run(only_run_dir(pytester.path / "out"))
    assert sorted(r["task"] for r in out["summary"]["results"]) == [
        "knowledge_frameworks",
        "knowledge_generals",
        "skills",
        "tools_cli",
        "tools_kali",
    ]
    (bench,) = out["summary"]["benchmarks"]
    assert bench["method"] == "micro" and bench["score"] == pytest.approx(0.5)


def test_unavailable_hub_data_skips_instead_of_stopping_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pytest suites/` on a machine without the hub data: RedSage skips with the reason."""
    monkeypatch.setitem(sys.modules, "datasets", None)
    (pytester.path / "data").mkdir()
    result = pytester.runpytest(
        str(SUITES / "redsage"),
        "--data-dir",
        "data",
        "--model",
        "m@http://127.0.0.1:9/v1",
        "-rs",
        "--report-dir",
        "out",
    )
    result.assert_outcomes(skipped=5)
    result.stdout.fnmatch_lines(
        ["*redsage: RISys-Lab/Benchmarks_CyberSec_RedSageMCQ*'datasets' package is not installed*"]
    )
    assert "Traceback" not in result.stdout.str()


# --------------------------------------------------------------------------- released (instruct) vs released_base


def test_released_is_the_instruct_generative_task_and_released_base_the_loglikelihood_one() -> None:
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    gen = suite.pipeline("skills", "released").card()["fields"]
    base = suite.pipeline("skills", "released_base").card()["fields"]
    # redsage_mcqs_ins.txt: redsage_mcq_em|0 -> 100 tokens, stop at a newline, MCQAcc
    assert (gen["prompt.format.mode"], gen["prompt.format.few_shot"]) == ("chat", 0)
    assert (gen["inference.max_tokens"], gen["inference.stop"]) == (100, ["\n"])
    assert gen["extraction.rule"] == "redsage_mcq_acc" and gen["scoring.denominator"] == "total"
    # redsage_mcqs_base.txt: redsage_mcq|0 (zero-shot, not 5) -> log-likelihood of " A".." D"
    assert (base["prompt.format.mode"], base["prompt.format.few_shot"]) == ("completion", 0)
    assert base["extraction.rule"] == "logprob_argmax" and base["inference.decoding.top_logprobs"] == 20
    notes = " ".join(suite.pipeline("skills", "released_base").notes)
    assert "uses 5" not in notes and "zero-shot" in notes


def test_released_prompt_is_cybersec_prompt_fn_byte_for_byte(tmp_path: Path) -> None:
    from pytest_benchaudit.prompt.templates import render_request

    write_export(tmp_path, "cybersecurity_skills")
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    questions, _ = load_questions(suite, "skills", tmp_path, "test")
    for layer in ("released", "released_base"):
        pipe = suite.pipeline("skills", layer)
        for row, q in zip(FIXTURE, questions):
            # cybersec_prompt_fn(include_context=False), rebuilt from the row
            instructions = (
                "You are given multiple choice questions. Answer with the option letter "
                "(A, B, C, D) from the given choices directly."
            )
            expected = (
                instructions
                + "\n"
                + "Question: "
                + row["question"]
                + "\n"
                + "\n".join(f"{k}. {row['answers'][k]}" for k in "ABCD")
                + "\nAnswer:"
            )
            req = render_request(pipe, suite.templates[pipe.prompt.template], q)
            text = req.prompt if layer == "released_base" else req.messages[0].content
            assert text == expected
            if layer == "released":
                assert [m.role for m in req.messages] == ["user"]
                assert req.params == {"temperature": 0.0, "max_tokens": 100, "stop": ["\n"]}


def reasoning_model(call) -> Reply:
    """A scripted reasoning model: a <think> preamble over several lines, then the letter.

    It honours the request's stop sequences and token budget (one token per word) as a
    server would, so the released newline stop cuts it off inside its preamble.
    """
    letter = "A" if "open ports" in call.last_user_text else "B"
    full = f"<think>\nThe question asks which tool fits.\nOption {letter} is the standard one.\n</think>\n\n{letter}"
    text, finish = full, "stop"
    for stop in call.body.get("stop") or []:
        if stop in text:
            text = text[: text.index(stop)]
    budget = call.body.get("max_tokens")
    if budget is not None and len(text.split(" ")) > budget:
        text, finish = " ".join(text.split(" ")[:budget]), "length"
    return Reply(content=text, finish_reason=finish)


def test_reasoning_model_released_invalid_standardized_recovers_and_stop_is_named(pytester: pytest.Pytester) -> None:
    from pytest_benchaudit.aggregate.results import variant_deltas

    for subset in (
        "cybersecurity_knowledge_generals",
        "cybersecurity_knowledge_frameworks",
        "cybersecurity_skills",
        "cybersecurity_tools_cli",
        "cybersecurity_tools_kali",
    ):
        write_export(pytester.path / "data", subset)
    common = ("--data-dir", "data", "--no-cache", "-p", "no:randomly")
    with ScriptedServer(reasoning_model) as server:
        released = pytester.runpytest(
            str(SUITES / "redsage"),
            *common,
            "--model",
            f"qwen@{server.url}",
            "--pipeline",
            "released",
            "--report-dir",
            "rel",
            "--vary",
            "inference.stop=[]",
            "--vary",
            "inference.max_tokens=2048",
        )
        standardized = pytester.runpytest(
            str(SUITES / "redsage"), *common, "--model", f"qwen@{server.url}", "--report-dir", "std"
        )
        sent = [c.body for c in server.calls if c.path.endswith("/chat/completions")]
    rel = read_run(only_run_dir(pytester.path / "rel"))
    base = [r for r in rel["records"] if r["variant"] == ""]
    # released: the newline stop leaves '<think>' and nothing else -> invalid, score 0
    assert len(base) == 10 and {r["raw_output"] for r in base} == {"<think>"}
    assert {(r["valid"], r["invalid_reason"], r["invalid_stage"]) for r in base} == {
        (False, "unclosed_reasoning", "inference")
    }
    # (the five subsets share the two fixture rows, so identical requests are asked once)
    assert sum(b.get("stop") == ["\n"] and b["max_tokens"] == 100 for b in sent) == 2
    results = {(r["task"], r["variant"]): r for r in rel["summary"]["results"]}
    assert all(results[(t, "")]["score"] == 0.0 for t, _ in results)
    # the variants: without the stop every answer is read; a larger budget alone changes nothing
    rows = variant_deltas(rel["summary"]["results"], rel["run"]["pipeline_cards"])
    by = {(r["task"], r["field"]): r for r in rows}
    for task in ("skills", "tools_kali"):
        stop = by[(task, "inference.stop")]
        assert stop["value"] == [] and stop["moved_by"] == "inference"
        assert stop["delta_pp"] == pytest.approx(100.0) and stop["invalid_rate"] == 0.0
        assert by[(task, "inference.max_tokens")]["moved_by"] == "none"
    # standardized (no stop, 2048 tokens, reasoning stripped) recovers every answer
    std = read_run(only_run_dir(pytester.path / "std"))
    assert all(r["valid"] and r["correct"] for r in std["records"]) and len(std["records"]) == 10
    standardized.assert_outcomes(passed=10)
    released.assert_outcomes(passed=10, failed=20)  # base and max_tokens=2048 fail, stop=[] passes
