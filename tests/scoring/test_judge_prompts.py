"""The LLM judge: grading open-ended answers, extracting hard-to-parse ones, every call recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.scoring import judge_prompts
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"answer": "C"}', ("C", "json")),
        ('Sure! {"answer": "c, a"}', ("AC", "json")),
        ('{"answer": "NONE"}', ("NONE", "json")),
        ('The answer: B', ("B", "fallback")),
        ('I cannot tell', (None, "failed")),
        ('{"answer": "Z"}', (None, "failed")),
    ],
)
def test_parse_extraction(text, expected) -> None:
    assert judge_prompts.parse_extraction(text, ("A", "B", "C", "D")) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"verdict": "CORRECT"}', ("CORRECT", "json")),
        ('{"verdict": "incorrect"}', ("INCORRECT", "json")),
        ('Verdict: INCORRECT because...', ("INCORRECT", "fallback")),
        ('maybe', (None, "failed")),
    ],
)
def test_parse_grading(text, expected) -> None:
    assert judge_prompts.parse_grading(text) == expected


def judge_script(call):
    """A judge that calls an answer correct when it mentions 'firewall', and reads letters after 'pick'."""
    user = call.body["messages"][-1]["content"]
    if "Reference answer" in user:
        return Reply(
            content=json.dumps(
                {"verdict": "CORRECT" if "firewall" in user.split("Candidate answer")[1] else "INCORRECT"}
            )
        )
    response = user.split("<<<", 1)[1]
    return Reply(content='{"answer": "B"}' if "pick B" in response else '{"answer": "NONE"}')


def test_judge_grades_secbench_saq(pytester: pytest.Pytester, real_data: Path) -> None:
    answers = iter(["Use a firewall and patch.", "No idea.", "A firewall, mostly."])
    with ScriptedServer(lambda call: Reply(content=next(answers, "x"))) as model, ScriptedServer(judge_script) as jdg:
        result = pytester.runpytest(
            str(SUITES / "secbench"),
            "-k",
            "saq_en",
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{model.url}",
            "--judge",
            f"j@{jdg.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "--no-cache",
        )
        judge_calls = jdg.calls
    result.assert_outcomes(passed=2, failed=1)
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) == 3 and len(judge_calls) == 3
    for rec in out["records"]:
        assert rec["judge"]["purpose"] == "grading" and rec["judge"]["model"] == "judge:j"
        assert (
            rec["judge"]["prompt_version"] == judge_prompts.GRADING_PROMPT_VERSION
            and rec["judge"]["parse_status"] == "json"
        )
        assert rec["judge"]["raw_output"].startswith('{"verdict"')
    assert (
        out["run"]["pipeline_cards"]["secbench.saq_en"]["judge"]["prompts"]["grading"]
        == judge_prompts.GRADING_PROMPT_VERSION
    )
    # the judge request is greedy and carries the reference answer
    assert (
        judge_calls[0].body["temperature"] == 0.0
        and "Reference answer" in judge_calls[0].body["messages"][-1]["content"]
    )


def test_judge_extraction_and_failures(pytester: pytest.Pytester, toy) -> None:
    replies = {
        "CORRECT": "Hmm, I would pick B in the end.",
        "WRONG": "Let me think... no clear option.",
        "UNPARSEABLE": "pick B",
    }

    def model(call):
        text = call.last_user_text
        return Reply(content=next((v for k, v in replies.items() if k in text), "Answer: A"))

    with ScriptedServer(model) as m, ScriptedServer(judge_script) as jdg:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{m.url}",
            "--judge",
            f"j@{jdg.url}",
            "--report-dir",
            "out",
            "-k",
            "t01 or t02 or t12",
            "--set",
            "extraction.rule=judge",
            "--no-cache",
        )
    result.assert_outcomes(passed=1, failed=2)
    recs = {r["question_id"]: r for r in read_run(only_run_dir(pytester.path / "out"))["records"]}
    assert recs["t01"]["prediction"] == "B" and recs["t01"]["regex_prediction"] is None  # only the judge read it
    assert recs["t02"]["invalid_reason"] == "unparseable" and recs["t02"]["judge"]["verdict"] == "NONE"
    assert recs["t12"]["prediction"] == "B" and recs["t12"]["judge"]["purpose"] == "extraction"
    # a judge that answers garbage: an invalid response with its reason, not a silent zero
    with ScriptedServer(model) as m, ScriptedServer(lambda call: Reply(content="beep")) as jdg:
        pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{m.url}",
            "--judge",
            f"j@{jdg.url}",
            "--report-dir",
            "out2",
            "-k",
            "t01",
            "--set",
            "extraction.rule=judge",
            "--no-cache",
        )
    (rec,) = read_run(only_run_dir(pytester.path / "out2"))["records"]
    assert rec["invalid_reason"] == "judge_error" and "unreadable judge verdict" in rec["extraction_detail"]
    assert rec["judge"]["parse_status"] == "failed"


def test_without_a_judge_judge_items_skip(pytester: pytest.Pytester, toy) -> None:
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        "m@http://127.0.0.1:9/v1",
        "-k",
        "t01",
        "--set",
        "extraction.rule=judge",
        "-rs",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*extraction.rule 'judge' needs an LLM judge (--judge SPEC)*"])


def test_judge_agreement_on_two_judged_runs(
    pytester: pytest.Pytester, real_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two judges grade the same SecBench SAQ answers; judge-agreement reports kappa on them."""
    from pytest_benchaudit.cli.app import main

    def strict(call):  # only answers that mention a firewall are correct
        return judge_script(call)

    def lenient(call):  # everything is correct
        return Reply(content='{"verdict": "CORRECT"}')

    runs = []
    for name, script in (("strict", strict), ("lenient", lenient)):
        answers = iter(["Use a firewall and patch.", "No idea.", "A firewall, mostly."])
        with (
            ScriptedServer(lambda call, a=answers: Reply(content=next(a, "x"))) as model,
            ScriptedServer(script) as jdg,
        ):
            pytester.runpytest(
                str(SUITES / "secbench"),
                "-k",
                "saq_en",
                "--data-dir",
                str(real_data),
                "--model",
                f"m@{model.url}",
                "--judge",
                f"{name}@{jdg.url}",
                "--report-dir",
                name,
                "-p",
                "no:randomly",
                "--no-cache",
            )
        runs.append(only_run_dir(pytester.path / name))
    capsys.readouterr()
    assert main(["judge-agreement", str(runs[0]), str(runs[1]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # strict: CORRECT, INCORRECT, CORRECT; lenient: CORRECT x3 -> agreement 2/3, and kappa 0
    # (the lenient judge never varies, so all agreement is chance agreement)
    assert report["n_paired"] == 3 and report["agreement"] == pytest.approx(2 / 3)
    assert report["kappa"] == pytest.approx(0.0)


def test_rescoring_a_judged_run_reuses_the_stored_verdicts(pytester: pytest.Pytester, real_data: Path) -> None:
    from pytest_benchaudit.rescore.run_dirs import rescore_run

    answers = iter(["Use a firewall and patch.", "No idea.", "A firewall, mostly."])
    with ScriptedServer(lambda call: Reply(content=next(answers, "x"))) as model, ScriptedServer(judge_script) as jdg:
        pytester.runpytest(
            str(SUITES / "secbench"),
            "-k",
            "saq_en",
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{model.url}",
            "--judge",
            f"j@{jdg.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "--no-cache",
        )
    run = only_run_dir(pytester.path / "out")
    out, results, _ = rescore_run(
        run,
        overrides=[("scoring.denominator", "valid")],
        report_dir=pytester.path / "re",
        suites_dir=SUITES,
        data_dir=str(real_data),
    )
    (res,) = results
    assert (res["n"], res["n_correct"], res["denominator"]) == (3, 2, "valid")
    new = [json.loads(line) for line in (out.path / "records.jsonl").read_text().splitlines()]
    assert all(r["judge"]["purpose"] == "grading" for r in new)  # the judge's record is kept
