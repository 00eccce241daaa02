"""End to end: real pytest runs (pytester) against a real loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import TOY_QUESTIONS

RECORD_FIELDS = {
    "benchmark",
    "task",
    "question_id",
    "model",
    "variant",
    "pipeline",
    "pipeline_hash",
    "request",
    "raw_output",
    "reasoning",
    "finish_reason",
    "error",
    "prediction",
    "valid",
    "invalid_reason",
    "gold",
    "score",
    "correct",
}
SUMMARY_FIELDS = {
    "benchmark",
    "task",
    "model",
    "variant",
    "pipeline",
    "metric",
    "lower_is_better",
    "denominator",
    "n",
    "n_valid",
    "n_correct",
    "score",
    "score_total",
    "score_valid",
    "invalid_rate",
    "stage_rates",
    "ci95",
}


def run_toy(pytester: pytest.Pytester, server: ScriptedServer, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{server.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
        *extra,
    )


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["question_id"]: r for r in records}


def test_scripted_behaviours_end_to_end(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    result = run_toy(pytester, scripted, "-k", "mcq", "--show-answers", "all")
    result.assert_outcomes(passed=6, failed=6)
    out = read_run(only_run_dir(pytester.path / "out"))
    recs = by_id(out["records"])
    assert len(out["records"]) == len(TOY_QUESTIONS)
    assert all(RECORD_FIELDS <= set(r) for r in out["records"])
    # correct, wrong, reasoning of all four kinds, empty, truncated, HTTP errors, retries
    assert recs["t01"]["correct"] and recs["t01"]["prediction"] == "B"
    assert recs["t02"]["valid"] and not recs["t02"]["correct"] and recs["t02"]["prediction"] == "C"
    assert recs["t03"]["correct"] and recs["t03"]["raw_output"].startswith("<think>")  # stored unstripped
    assert recs["t04"]["correct"] and "</think>" in recs["t04"]["raw_output"]
    assert recs["t05"]["invalid_reason"] == "unclosed_reasoning" and recs["t05"]["invalid_stage"] == "inference"
    assert recs["t06"]["correct"] and recs["t06"]["reasoning"] == "First guess. Answer: C"
    assert recs["t07"]["invalid_reason"] == "empty"
    assert recs["t08"]["invalid_reason"] == "truncated" and recs["t08"]["finish_reason"] == "length"
    assert recs["t09"]["invalid_reason"] == "inference_error" and "HTTP 500" in recs["t09"]["error"]
    assert recs["t09"]["score"] == 0 and recs["t09"]["attempts"] == 3
    assert recs["t10"]["correct"] and recs["t10"]["attempts"] == 2
    assert recs["t11"]["correct"] and recs["t11"]["attempts"] == 2
    assert recs["t12"]["invalid_reason"] == "unparseable" and recs["t12"]["invalid_stage"] == "extraction"
    # failure messages: short, with gold, prediction and the start of the raw output
    result.stdout.fnmatch_lines(
        ["*wrong: gold 'B', predicted 'C'*raw output: Answer: C*", "*INVALID (unparseable)*I am not sure*"]
    )
    # summary: both denominators, per-stage rates, invalid counted apart from wrong
    (res,) = out["summary"]["results"]
    assert SUMMARY_FIELDS <= set(res)
    assert (res["n"], res["n_valid"], res["n_correct"]) == (12, 7, 6)
    assert res["score"] == res["score_total"] == pytest.approx(6 / 12)
    assert res["score_valid"] == pytest.approx(6 / 7)
    assert res["invalid_rate"] == pytest.approx(5 / 12)
    assert res["stage_rates"] == pytest.approx({"inference_ok": 8 / 12, "extraction_ok": 7 / 12, "correct": 6 / 12})
    assert res["invalid_reasons"] == {
        "unclosed_reasoning": 1,
        "empty": 1,
        "truncated": 1,
        "inference_error": 1,
        "unparseable": 1,
    }
    assert res["breakdown"]["topic"]["beta"]["n"] == 4
    low, high = res["ci95"]
    assert low < 0.5 < high
    # the terminal summary shows the table and where the run went
    result.stdout.fnmatch_lines(["*benchaudit summary*", "*toy*pipeline 'standardized'*", "*run directory:*"])
    # run.json: cards, checksums, versions, models without credentials
    run = out["run"]
    card = run["pipeline_cards"]["toy.mcq"]
    assert card["card_version"].startswith("benchaudit.pipeline-card/")
    assert card["fields"]["extraction.reasoning"] == "strip" and card["hash"] == res["pipeline_hash"]
    assert "toy/toy.jsonl" in run["dataset_checksums"] and run["versions"]["pytest"]
    assert run["models"][0]["endpoint"] == scripted.url and run["models"][0]["served_model_ids"] == ["scripted-model"]
    assert run["ended"] and run["n_records"] == 12


def test_unspecified_inference_fields_are_not_sent(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    run_toy(pytester, scripted, "-k", "extra")
    bodies = [c.body for c in scripted.calls if c.path.endswith("/chat/completions")]
    assert bodies and all("temperature" not in b and "stop" not in b and b["max_tokens"] == 64 for b in bodies)


def test_released_layer_keeps_reasoning_and_counts_valid_only(pytester: pytest.Pytester, scripted, toy) -> None:
    run_toy(pytester, scripted, "-k", "mcq", "--pipeline", "released")
    out = read_run(only_run_dir(pytester.path / "out"))
    recs = by_id(out["records"])
    # reading the raw text: the unclosed <think> now yields its draft letter C
    assert recs["t05"]["valid"] and recs["t05"]["prediction"] == "C"
    (res,) = out["summary"]["results"]
    assert res["denominator"] == "valid" and res["score"] == res["score_valid"]


def test_set_override_changes_request_and_card(pytester: pytest.Pytester, scripted, toy) -> None:
    result = run_toy(
        pytester, scripted, "-k", "t01", "--set", "inference.max_tokens=7", "--set", 'inference.stop=["\\n"]'
    )
    result.assert_outcomes(passed=1)
    body = scripted.calls[-1].body
    assert body["max_tokens"] == 7 and body["stop"] == ["\n"]
    out = read_run(only_run_dir(pytester.path / "out"))
    assert out["run"]["pipeline_cards"]["toy.mcq"]["overrides"] == {"inference.max_tokens": 7, "inference.stop": ["\n"]}


def test_usage_errors_name_the_field(pytester: pytest.Pytester, scripted, toy) -> None:
    result = run_toy(pytester, scripted, "--set", "inference.max_tokenz=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown field 'inference.max_tokenz'*known fields*inference.max_tokens*"])
    result = run_toy(pytester, scripted, "--set", "scoring.denominator=some")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*scoring.denominator*'total'*'valid'*"])
    result = run_toy(pytester, scripted, "--gate", "toy=>1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = run_toy(pytester, scripted, "--set", "extraction.rule=psychic")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # found at collection, one usage error (issue 12)
    result.stderr.fnmatch_lines(["*extraction.rule 'psychic' is not a known rule; allowed:*final_answer_letter*"])


def test_gates_decide_the_exit_status(pytester: pytest.Pytester, scripted, toy) -> None:
    result = run_toy(pytester, scripted, "-k", "mcq", "--gate", "toy>=0.4", "--gate", "toy.mcq:invalid<=0.5")
    assert result.ret == pytest.ExitCode.OK  # items failed, gates hold
    result.stdout.fnmatch_lines(["*PASS  toy>=0.4*", "*PASS  toy.mcq:invalid<=0.5*"])
    result = run_toy(pytester, scripted, "-k", "mcq", "--gate", "toy>=0.9")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*FAIL  toy>=0.9*toy-model: 0.5000*"])
    result = run_toy(pytester, scripted, "-k", "mcq", "--gate", "nosuch>=0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # checked against the collected suites first (issue 12)
    result.stderr.fnmatch_lines(["*--gate 'nosuch>=0.1': no collected benchmark 'nosuch'*"])


def test_junit_properties(pytester: pytest.Pytester, scripted, toy) -> None:
    result = run_toy(pytester, scripted, "-k", "t01 or t12", "--junitxml", "junit.xml", "-W", "error")
    result.assert_outcomes(passed=1, failed=1)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    cases = {
        tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")} for tc in root.iter("testcase")
    }
    ok = cases["q0001[toy-model]"]
    assert ok["task"] == "mcq" and ok["model"] == "toy-model" and ok["gold"] == "B" and ok["prediction"] == "B"
    assert ok["valid"] == "True" and ok["score"] == "1.0"
    bad = cases["q0012[toy-model]"]
    assert bad["valid"] == "False" and bad["invalid_reason"] == "unparseable"
    assert "warnings summary" not in result.stdout.str()


def test_k_selects_task_and_lf_reruns_failures(pytester: pytest.Pytester, scripted, toy) -> None:
    result = run_toy(pytester, scripted, "-k", "extra")
    result.assert_outcomes(passed=1)
    first = run_toy(pytester, scripted, "-k", "mcq")
    first.assert_outcomes(passed=6, failed=6)
    again = run_toy(pytester, scripted, "-k", "mcq", "--lf")
    again.assert_outcomes(failed=6, deselected=7)
    again.stdout.fnmatch_lines(["*rerun previous 6 failures*"])


def test_conftest_can_override_the_question_fixture(pytester: pytest.Pytester, scripted, toy) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def question(request):
            q = request.node.bench.question
            return q.model_copy(update={"gold": "C"})  # pretend the gold label were C
        """
    )
    result = run_toy(pytester, scripted, "-k", "t02")
    result.assert_outcomes(passed=1)  # the scripted answer to t02 is C


def test_provider_minimum_max_tokens(pytester: pytest.Pytester, toy) -> None:
    with ScriptedServer(lambda call: Reply(content="Answer: B"), min_max_tokens=16) as server:
        # Sent as asked, an Azure-like endpoint refuses 5 tokens: invalid with the error, not a crash.
        result = run_toy(pytester, server, "-k", "t01", "--set", "inference.max_tokens=5")
        result.assert_outcomes(failed=1)
        rec = read_run(only_run_dir(pytester.path / "out"))["records"][0]
        assert rec["invalid_reason"] == "inference_error" and "HTTP 400" in rec["error"]
        assert "Minimum value is 16" in rec["error"] and rec["attempts"] == 1  # a 400 is not retried
        # Declared as a provider limit, the budget is raised and the record says so.
        pytester.makepyprojecttoml(
            f"""
            [tool.benchaudit.models.azure-like]
            endpoint = "{server.url}"
            model = "gpt-x"
            min_max_tokens = 16
            """
        )
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            "azure-like",
            "--report-dir",
            "out2",
            "-k",
            "t01",
            "--set",
            "inference.max_tokens=5",
        )
        result.assert_outcomes(passed=1)
        rec = read_run(only_run_dir(pytester.path / "out2"))["records"][0]
        assert rec["request"]["params"]["max_tokens"] == 16
        assert rec["request"]["adjustments"] == ["inference.max_tokens raised from 5 to the provider minimum 16"]
        assert server.calls[-1].body["model"] == "gpt-x"


def test_malformed_data_fails_collection_with_file_and_row(pytester: pytest.Pytester, scripted, toy) -> None:
    data = pytester.path / "data" / "toy" / "toy.jsonl"
    lines = data.read_text().splitlines()
    lines[2] = '{"id": "t03", "question": broken'
    data.write_text("\n".join(lines) + "\n")
    result = run_toy(pytester, scripted)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*toy.jsonl: line 3: invalid JSON*"])
    assert "Traceback" not in result.stdout.str()


def _asked(server: ScriptedServer) -> int:
    """Completion requests only: a run also asks GET /models once (the cache keys on what is served)."""
    return sum(1 for c in server.calls if c.path.endswith("completions"))


def test_missing_data_names_the_file(pytester: pytest.Pytester, scripted, toy) -> None:
    result = pytester.runpytest("suites/toy", "--data-dir", "nowhere", "--model", f"m@{scripted.url}", "-rs")
    result.assert_outcomes(skipped=2)  # each task skipped (pytest suites/ runs the benchmarks that have data)
    result.stdout.fnmatch_lines(["*toy: data not found: no 'toy/' folder in nowhere (data directory from --data-dir)*"])
    (pytester.path / "data" / "toy" / "toy.jsonl").rename(pytester.path / "data" / "toy" / "moved.jsonl")
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", f"m@{scripted.url}", "-rs", "-k", "mcq")
    result.stdout.fnmatch_lines(["*toy: data file not found: *data/toy/toy.jsonl (data directory from --data-dir)*"])


def test_two_models_each_question_once_per_model(pytester: pytest.Pytester, toy) -> None:
    with (
        ScriptedServer(lambda call: Reply(content="Answer: B"), model_id="one") as s1,
        ScriptedServer(lambda call: Reply(content="Answer: A"), model_id="two") as s2,
    ):
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "-k",
            "mcq",
            "--model",
            f"one@{s1.url}",
            "--model",
            f"two@{s2.url}",
        )
        result.assert_outcomes(passed=1 + 11, failed=11 + 1)
        out = read_run(only_run_dir(pytester.path / "out"))
        assert sorted({r["model"] for r in out["summary"]["results"]}) == ["one", "two"]
        assert _asked(s1) == _asked(s2) == 12


def test_secret_key_never_written(pytester: pytest.Pytester, toy, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = "sk-canary-7a1b2c3d4e5f60718293"
    monkeypatch.setenv("OPENAI_API_KEY", canary)

    def script(call):
        assert call.headers.get("authorization") == f"Bearer {canary}"
        if "WRONG" in call.last_user_text:  # a server that echoes the key in an error
            return Reply(status=401, error_message=f"Incorrect API key provided: {canary}")
        return Reply(content="Answer: B")

    with ScriptedServer(script) as server:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "-k",
            "mcq",
            "--model",
            f"m@{server.url}",
            "--junitxml",
            "junit.xml",
            "-rA",
        )
        assert server.calls
    written = [p for p in (pytester.path / "out").rglob("*") if p.is_file()] + [pytester.path / "junit.xml"]
    for path in written:
        assert canary not in path.read_text(), path
    assert canary not in result.stdout.str() and canary not in result.stderr.str()
    rec = by_id(read_run(only_run_dir(pytester.path / "out"))["records"])["t02"]
    assert "***" in rec["error"]


def test_xdist_matches_serial(pytester: pytest.Pytester, scripted, toy) -> None:
    def comparable(run_dir: Path) -> tuple[list, list]:
        out = read_run(run_dir)
        keys = ("question_id", "model", "prediction", "valid", "invalid_reason", "score", "correct", "raw_output")
        recs = sorted(tuple(r[k] for k in keys) for r in out["records"])
        summary = [{k: v for k, v in r.items()} for r in out["summary"]["results"]]
        return recs, summary

    args = ["suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}", "--max-retries", "2"]
    serial = pytester.runpytest_subprocess(*args, "--report-dir", "serial")
    parallel = pytester.runpytest_subprocess(*args, "--report-dir", "parallel", "-n", "2", "--junitxml", "junit.xml")
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED
    s_recs, s_sum = comparable(only_run_dir(pytester.path / "serial"))
    p_recs, p_sum = comparable(only_run_dir(pytester.path / "parallel"))
    assert len(p_recs) == len(s_recs) == 13  # every record reached the controller exactly once
    assert p_recs == s_recs
    assert sorted(p_sum, key=lambda r: r["task"]) == sorted(s_sum, key=lambda r: r["task"])
    cards = read_run(only_run_dir(pytester.path / "parallel"))["run"]["pipeline_cards"]
    assert set(cards) == {"toy.mcq", "toy.extra"}
    # JUnit properties survive the trip from the workers
    cases = list(ET.parse(pytester.path / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == 13
    assert all(
        {p.get("name") for p in tc.iter("property")} >= {"task", "model", "gold", "valid", "score"} for tc in cases
    )


def test_real_seceval_items_against_loopback(pytester: pytest.Pytester, real_data: Path) -> None:
    with ScriptedServer(lambda call: Reply(content="Answer: B")) as server:
        result = pytester.runpytest(
            str(SUITES / "seceval"),
            "--data-dir",
            str(real_data),
            "--limit",
            "12",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
        )
        out = read_run(only_run_dir(pytester.path / "out"))
    golds = [r["gold"] for r in sorted(out["records"], key=lambda r: r["question_index"])]
    result.assert_outcomes(passed=golds.count("B"), failed=12 - golds.count("B"))
    first = sorted(out["records"], key=lambda r: r["question_index"])[0]
    assert first["question_id"] == "282cd7f6-86f9-4174-95c2-df26b2b6395e"
    assert first["question_meta"]["topics"] == ["SystemSecurity", "Vulnerability"]
    assert "breakdown" in out["summary"]["results"][0]
    assert (
        json.dumps(out["run"]["pipeline_cards"]["seceval.mcq"]["fields"]["extraction.rule"]) == '"final_answer_letters"'
    )


def test_reask_on_invalid(pytester: pytest.Pytester, toy) -> None:
    """CyberMetric's released policy: ask again while no answer can be read."""
    from pytest_benchaudit.testing.scripted_server import sequence

    script = sequence(Reply(content="I refuse to pick."), Reply(content="Still thinking"), Reply(content="Answer: B"))
    with ScriptedServer(script) as server:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-k",
            "t01",
            "--set",
            "inference.reask_on_invalid=2",
        )
        result.assert_outcomes(passed=1)
        assert _asked(server) == 3
        asked = [c for c in server.calls if c.path.endswith("completions")]
        assert asked[0].body == asked[2].body  # the same question, asked again
    rec = read_run(only_run_dir(pytester.path / "out"))["records"][0]
    assert rec["asks"] == 3 and rec["earlier_outputs"] == ["I refuse to pick.", "Still thinking"]
    assert rec["request"]["sample"] == 2
    # without re-asking the same server state answers the first reply only: invalid
    with ScriptedServer(sequence(Reply(content="I refuse to pick."), Reply(content="Answer: B"))) as server:
        result = pytester.runpytest(
            "suites/toy", "--data-dir", "data", "--model", f"m@{server.url}", "--report-dir", "out2", "-k", "t01"
        )
        result.assert_outcomes(failed=1)
        assert _asked(server) == 1


def test_multi_model_run_reports_ranks_and_tau_b(pytester: pytest.Pytester, toy) -> None:
    """Three models: the summary ranks them per task and gives tau-b between the two toy tasks."""
    replies = {"good": "Answer: B", "half": "Answer: A", "bad": "no idea"}
    servers = {
        name: ScriptedServer(lambda call, text=text: Reply(content=text)).start() for name, text in replies.items()
    }
    try:
        args = [a for name, s in servers.items() for a in ("--model", f"{name}@{s.url}")]
        result = pytester.runpytest("suites/toy", "--data-dir", "data", "--report-dir", "out", *args)
    finally:
        for s in servers.values():
            s.stop()
    out = read_run(only_run_dir(pytester.path / "out"))
    ranks = out["summary"]["ranks"]
    assert ranks["toy.extra"] == {"good": 1.0, "half": 2.5, "bad": 2.5}  # gold B: only 'good' right, a tie
    assert ranks["toy.mcq"]["half"] == 1.0  # most toy golds are A
    (tau,) = out["summary"]["tau_b"]
    assert (tau["task_a"], tau["task_b"], tau["n_models"]) == ("toy.extra", "toy.mcq", 3)
    result.stdout.fnmatch_lines(["*model ranks per task*", "*Kendall tau-b between tasks*"])
