"""benchaudit diagnose: each check on small hand-made runs (records built by the real pipeline stages from the
real suite configs), the command line, and the published AthenaBench / CTI-Bench outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import real_data_dir, write_run_dir

from pytest_benchaudit.audit.diagnose import LoadedRun, diagnose, render, to_json
from pytest_benchaudit.audit.diagnose_catalog import CATALOGUE
from pytest_benchaudit.audit.diagnose_data import cross_task_checks, size_checks
from pytest_benchaudit.audit.diagnose_core import Group
from pytest_benchaudit.audit.ledger import suite_ledger
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline.stages import Pipeline, apply_overrides
from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring.evaluate import evaluate

SUITES = Path(__file__).resolve().parents[2] / "suites"
ABCD = {k: f"option {k}" for k in "ABCD"}


def pipeline(bench: str, task: str, layer: str = "released", sets: list[tuple[str, Any]] | None = None) -> Pipeline:
    return apply_overrides(load_suite(SUITES / bench / "suite.toml").pipeline(task, layer), sets or [])


def record(p: Pipeline, qid: str, gold: str, text: str, *, choices: dict[str, str] | None = ABCD,
           finish: str | None = "stop", error: str | None = None, prompt: str | None = None,
           params: dict[str, Any] | None = None, model: str = "m", **extra: Any) -> dict[str, Any]:
    """One record through the real extraction and scoring stages of ``p``."""
    q = Question(benchmark=p.benchmark, task=p.task, id=qid, index=int(qid), gold=gold, choices=choices or {})
    request = {"mode": "chat", "messages": [{"role": "user", "content": prompt or f"question {qid}"}],
               "params": {"temperature": 0.0} if params is None else params}
    rec = evaluate(q, p, request, Generation(text=text, finish_reason=finish, error=error), model=model)
    return {**rec.model_dump(mode="json"), **extra}


def run_of(p: Pipeline, records: list[dict[str, Any]], name: str = "run", **meta: Any) -> LoadedRun:
    return LoadedRun(name, {"pipeline_cards": {f"{p.benchmark}.{p.task}": p.card()}, **meta}, records)


def only(findings: list, fm: str) -> Any:
    hits = [f for f in findings if f.failure_mode == fm]
    assert len(hits) == 1, [f.failure_mode for f in findings]
    return hits[0]


def ids(findings: list) -> set[str]:
    return {f.failure_mode for f in findings}


# --------------------------------------------------------------------------- group checks


def test_valid_only_denominator_is_rescored_with_total() -> None:
    p = pipeline("cti_bench", "mcq")  # released: only answers in A-D/X count
    assert p.scoring.denominator == "valid"
    recs = [record(p, f"{i:04d}", "A", "A") for i in range(6)]
    recs += [record(p, f"{i:04d}", "A", "B") for i in range(6, 8)]
    recs += [record(p, f"{i:04d}", "A", "I cannot tell.") for i in range(8, 10)]
    f = only(diagnose([run_of(p, recs)]), "FM01-valid-only-denominator")
    assert f.evidence["n_invalid"] == 2 and f.evidence["question_ids"] == ["0008", "0009"]
    assert f.field == "scoring.denominator" and f.effect_kind == "rescored"
    assert f.effect_pp == pytest.approx(100 * (6 / 10 - 6 / 8), abs=0.01)
    assert "may" in f.hypothesis and (f.benchmark, f.task, f.model) == ("cti_bench", "mcq", "m")


def test_total_denominator_or_no_invalid_gives_no_fm01() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    recs = [record(p, "0001", "A", "A"), record(p, "0002", "A", "no idea")]
    assert "FM01-valid-only-denominator" not in ids(diagnose([run_of(p, recs)]))
    q = pipeline("cti_bench", "mcq")
    assert "FM01-valid-only-denominator" not in ids(diagnose([run_of(q, [record(q, "0001", "A", "A")])]))


def test_reasoning_left_in_text_is_rescored_with_strip() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    assert p.extraction.reasoning == "keep"
    # The last line the released rule reads is inside an unclosed <think>: kept, it reads D;
    # stripped, only the text before <think> is left and it reads the committed C.
    recs = [record(p, "0001", "C", "C\n<think>\nor maybe D"), record(p, "0002", "C", "C")]
    f = only(diagnose([run_of(p, recs)]), "FM05-reasoning-left-in-text")
    assert f.evidence["n_with_think_tags"] == 1 and f.evidence["question_ids"] == ["0001"]
    assert f.effect_kind == "rescored" and f.effect_pp == pytest.approx(50.0, abs=0.01)
    plain = pipeline("cti_bench", "mcq", sets=[("extraction.reasoning", "strip")])
    assert "FM05-reasoning-left-in-text" not in ids(diagnose([run_of(plain, [record(plain, "0001", "C", "C\n<think>D")])]))


def test_letters_read_anywhere() -> None:
    p = pipeline("seceval", "mcq")  # all_capital_letters: every capital A-D anywhere
    recs = [record(p, "0001", "D", "I would enable DEP."), record(p, "0002", "B", "Answer: B"),
            record(p, "0003", "AC", "A and C")]
    f = only(diagnose([run_of(p, recs)]), "FM06-letters-read-anywhere")
    assert f.evidence["n_letter_not_standalone"] == 1 and f.evidence["question_ids"] == ["0001"]
    assert f.evidence["n_scored_correct"] == 1 and f.field == "extraction.rule"
    assert f.effect_kind == "rescored" and f.effect_pp is not None and f.effect_pp < 0
    assert "final_answer_letters" in f.effect


def test_echoed_options_scored() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    echo = "The options are:\nA) first\nB) second\nC) third\nD) fourth"
    recs = [record(p, "0001", "D", echo), record(p, "0002", "B", "Answer: B"),
            record(p, "0003", "C", echo + "\n\nThe answer is C")]  # committed after the echo: not a hit
    f = only(diagnose([run_of(p, recs)]), "FM07-echoed-options-scored")
    assert f.evidence["n_echo_scored"] == 1 and f.evidence["question_ids"] == ["0001"]
    assert f.evidence["n_scored_correct"] == 1
    assert f.effect_kind == "recomputed" and f.effect_pp == pytest.approx(100 * (2 / 3 - 3 / 3), abs=0.01)
    s = pipeline("seceval", "mcq")  # all letters anywhere: the echo's labels become the answer
    f2 = only(diagnose([run_of(s, [record(s, "0001", "AB", "A: x\nB: y\nC: z\nD: w\nI pick A and B")])]),
              "FM07-echoed-options-scored")
    assert f2.evidence["n_echo_scored"] == 1


def test_stop_inside_reasoning_needs_new_generations() -> None:
    p = pipeline("cybermetric", "cm80", "standardized", sets=[("inference.stop", ["\n\n"])])
    assert p.scoring.denominator == "total"
    recs = [record(p, "0001", "A", "<think>first, the", finish="stop"), record(p, "0002", "A", "ANSWER: A"),
            record(p, "0003", "A", "ANSWER: B")]
    f = only(diagnose([run_of(p, recs)]), "FM02-stop-inside-reasoning")
    assert f.evidence["n_stopped_in_reasoning"] == 1 and f.evidence["n_invalid"] == 1
    assert f.stage == "upstream" and f.effect_kind == "estimate" and "needs new generations" in f.effect
    assert f.effect_pp == pytest.approx(100 * (1 / 3) * 0.5, abs=0.01)  # answered as well as the valid half
    unstopped = pipeline("cybermetric", "cm80", "standardized", sets=[("inference.stop", [])])
    assert "FM02-stop-inside-reasoning" not in ids(
        diagnose([run_of(unstopped, [record(unstopped, "0001", "A", "<think>first", finish="stop")])]))


def test_truncation_and_provider_minimum() -> None:
    p = pipeline("cybermetric", "cm80", "standardized")
    recs = [record(p, "0001", "A", "Let me think about", finish="length"), record(p, "0002", "A", "ANSWER: A"),
            record(p, "0003", "A", "", finish=None, error="HTTP 400: max_tokens must be at least 16"),
            record(p, "0004", "A", "ANSWER: A")]
    recs[3]["request"]["adjustments"] = ["inference.max_tokens raised from 5 to the provider minimum 16"]
    findings = diagnose([run_of(p, recs)])
    t = only(findings, "FM03-token-budget-truncation")
    assert t.evidence["n_truncated"] == 1 and t.evidence["n_truncated_invalid"] == 1 and t.field == "inference.max_tokens"
    m = only(findings, "FM04-budget-below-provider-minimum")
    assert m.evidence["n_token_limit_errors"] == 1 and m.evidence["n_raised_to_minimum"] == 1
    assert m.evidence["question_ids"] == ["0003"] and m.effect_kind == "estimate"


def test_empty_and_unmatchable_gold_recomputed_without_them() -> None:
    p = pipeline("seceval", "mcq")
    recs = [record(p, "0001", "", "no letters here"), record(p, "0002", "AA", "A"), record(p, "0003", "E", "A"),
            record(p, "0004", "B", "B"), record(p, "0005", "C", "A")]
    f = only(diagnose([run_of(p, recs)]), "FM11-empty-or-unmatchable-gold")
    assert f.evidence["kinds"] == {"empty": 1, "repeated letter": 1, "not an option": 1}
    assert f.evidence["question_ids"] == ["0001", "0002", "0003"]
    # 2 of 5 right (the empty gold matched by an empty prediction) -> 1 of 2 without them
    assert f.effect_kind == "recomputed" and f.effect_pp == pytest.approx(100 * (1 / 2 - 2 / 5), abs=0.01)


def test_duplicate_questions() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    recs = [record(p, "0001", "A", "A", prompt="Which port does SSH use?"),
            record(p, "0002", "A", "A", prompt="which port does  SSH use?"),
            record(p, "0003", "B", "A", prompt="Which port does SSH use?"),
            record(p, "0004", "C", "D", prompt="Something else")]
    f = only(diagnose([run_of(p, recs)]), "FM12-duplicate-questions")
    assert f.evidence["n_duplicate_groups"] == 1 and f.evidence["n_extra_copies"] == 2
    assert f.evidence["n_groups_conflicting_gold"] == 1 and f.evidence["question_ids"] == ["0001", "0002", "0003"]
    assert f.effect_pp == pytest.approx(100 * (1 / 2 - 2 / 4), abs=0.01)


def test_sampling_without_seed() -> None:
    p = pipeline("cybermetric", "cm80", "standardized")
    sampled = [record(p, "0001", "A", "ANSWER: A", params={"temperature": 0.7}),
               record(p, "0002", "A", "ANSWER: A", params={})]
    f = only(diagnose([run_of(p, sampled)]), "FM14-sampling-without-seed")
    assert f.evidence["n_sampled_without_seed"] == 2 and f.effect_pp is None and f.effect_kind == "none"
    seeded = [record(p, "0001", "A", "ANSWER: A", params={"temperature": 0.7, "seed": 1})]
    greedy = [record(p, "0001", "A", "ANSWER: A", params={"temperature": 0.0})]
    assert "FM14-sampling-without-seed" not in ids(diagnose([run_of(p, seeded), run_of(p, greedy, "g")]))


def test_judge_fallback_and_failure() -> None:
    p = pipeline("cybermetric", "cm80", "standardized")
    recs = [record(p, "0001", "A", "ANSWER: A", judge={"parse_status": "json", "verdict": "A"}),
            record(p, "0002", "A", "ANSWER: A", judge={"parse_status": "fallback", "verdict": "A"}),
            record(p, "0003", "A", "???", judge={"parse_status": "failed", "verdict": None})]
    f = only(diagnose([run_of(p, recs)]), "BA01-judge-fallback-or-failure")
    assert (f.evidence["n_judged"], f.evidence["n_fallback"], f.evidence["n_failed"]) == (3, 1, 1)
    assert f.evidence["question_ids"] == ["0002", "0003"] and "judge calls" in f.effect


def test_free_text_near_miss() -> None:
    p = pipeline("athenabench", "taa", sets=[("scoring.metric", "exact_match")])
    recs = [record(p, "0001", "Lazarus Group", "Lazarus", choices=None),
            record(p, "0002", "APT28", "APT28", choices=None),
            record(p, "0003", "Turla", "Sandworm", choices=None)]
    f = only(diagnose([run_of(p, recs)]), "BA02-free-text-near-miss")
    assert f.evidence["n_near_miss"] == 1 and f.evidence["examples"][0]["gold"] == "Lazarus Group"
    assert f.effect_kind == "estimate" and f.effect_pp == pytest.approx(100 / 3, abs=0.01)


# --------------------------------------------------------------------------- task-level checks


def _group(bench: str, task: str, **meta: Any) -> Group:
    p = pipeline(bench, task)
    return Group(bench, task, "m", "released", "run", p.card(), [], meta)


def test_metric_direction_scale_and_alias_between_similar_tasks() -> None:
    findings = cross_task_checks([_group("athenabench", "vsp"), _group("cti_bench", "vsp"),
                                  _group("athenabench", "taa"), _group("cti_bench", "taa"),
                                  _group("athenabench", "mcq"), _group("cti_bench", "mcq")])
    got = {(f.failure_mode, f.benchmark, f.task) for f in findings}
    assert got == {("FM08-metric-direction-or-scale", "athenabench", "vsp"),
                   ("FM08-metric-direction-or-scale", "cti_bench", "vsp"),
                   ("FM10-alias-handling", "athenabench", "taa"), ("FM10-alias-handling", "cti_bench", "taa")}
    vsp = next(f for f in findings if f.benchmark == "cti_bench" and f.task == "vsp")
    assert vsp.model == "*" and vsp.evidence["lower_is_better"] and not vsp.evidence["other_lower_is_better"]


def test_partial_vs_binary_credit() -> None:
    a = _group("athenabench", "ate")
    b = _group("athenabench", "rms")
    b.benchmark, b.task = "other_bench", "ate"  # a same-named task graded by set F1 (partial credit)
    f = cross_task_checks([a, b])
    assert {x.failure_mode for x in f} == {"FM09-partial-vs-binary-credit"}


def test_dataset_size_against_documentation() -> None:
    g = _group("seceval", "mcq", argv=["pytest", "suites/seceval"])
    g.records = [{"question_id": str(i)} for i in range(2189)]
    f = only(size_checks([g]), "FM13-dataset-size-vs-documentation")
    assert f.evidence == {"n_questions": 2189, "documented": 2126, "source": "SecEval README: 2,126 questions"}
    limited = _group("seceval", "mcq", argv=["pytest", "suites/seceval", "--limit", "5"])
    limited.records = [{"question_id": str(i)} for i in range(5)]
    assert size_checks([limited]) == []


def test_ledger_contradictions_upstream_and_downstream() -> None:
    p = pipeline("cti_bench", "mcq")
    recs = [record(p, "0001", "A", "A"), record(p, "0002", "A", "unsure")]
    rows = {"cti_bench": suite_ledger(load_suite(SUITES / "cti_bench" / "suite.toml"))}
    up = only(diagnose([run_of(p, recs)], ledger_rows=rows), "FM15-documented-vs-released")
    assert up.field == "prompt.template" and up.model == "*" and "needs new generations" in up.effect
    fake = {"cti_bench": {"cells": {"scoring.denominator": {"values": {"mcq": {
        "scoring.denominator": {"documented": "total", "released": "valid"}}}}}}}
    down = only(diagnose([run_of(p, recs)], ledger_rows=fake), "FM15-documented-vs-released")
    assert down.field == "scoring.denominator" and down.model == "m" and down.effect_pp == pytest.approx(-50.0, abs=0.01)


def test_every_finding_id_is_catalogued_and_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "failure-modes.md").read_text(encoding="utf-8")
    for fm in CATALOGUE.values():  # the table row is the catalogue entry, word for word
        assert f"| `{fm.id}` | {fm.title} | `{fm.field}` | {fm.stage} | {fm.source} | {fm.detection} |" in doc, fm.id


# --------------------------------------------------------------------------- command line


def test_cli_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = pipeline("cti_bench", "mcq")
    recs = [record(p, "0001", "A", "A"), record(p, "0002", "A", "unsure")]
    run = write_run_dir(tmp_path, "r1", recs)
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "pipeline_cards": {"cti_bench.mcq": p.card()}}))
    assert main(["diagnose", str(tmp_path), "--suites-dir", str(SUITES)]) == 0
    out = capsys.readouterr().out
    assert "FM01" in out and "hypothesis with evidence, not a verdict" in out
    assert main(["diagnose", str(run), "--json", "--no-ledger"]) == 0
    doc = json.loads(capsys.readouterr().out)
    f = doc["findings"][0]
    assert {"benchmark", "task", "model", "failure_mode", "field", "evidence", "effect_pp"} <= set(f)
    assert f["failure_mode"] == "FM01-valid-only-denominator" and f["effect_pp"] == pytest.approx(-50.0)
    assert main(["diagnose", str(tmp_path / "missing")]) == 2
    assert "not found" in capsys.readouterr().err
    bare = write_run_dir(tmp_path, "bare", recs)  # run.json without cards
    assert main(["diagnose", str(bare), "--no-ledger"]) == 0
    captured = capsys.readouterr()
    assert "bare: cti_bench.mcq has no pipeline card" in captured.err and "no finding" in captured.out


def test_render_without_findings() -> None:
    assert "no finding" in render([], 3)
    assert to_json([], 3)["findings"] == []


# --------------------------------------------------------------------------- published outputs


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> list:
    from pytest_benchaudit.audit.importers import (
        import_athenabench_runs,
        import_cti_bench_responses,
    )
    from pytest_benchaudit.audit.offline import _Resources, load_run

    data = real_data_dir()
    root = tmp_path_factory.mktemp("published")
    import_athenabench_runs(data / "athenabench" / "runs-mini", root / "athena", SUITES, str(data))
    import_cti_bench_responses(data / "cti-bench" / "responses", root / "cti", SUITES, str(data))
    runs = [LoadedRun(p.name, *load_run(p)) for d in ("athena", "cti") for p in sorted((root / d).iterdir())]
    assert len(runs) == 17
    rows = {b: suite_ledger(load_suite(SUITES / b / "suite.toml")) for b in ("athenabench", "cti_bench")}
    return diagnose(runs, resources=_Resources(SUITES, str(data)), ledger_rows=rows)


def _find(findings: list, fm: str, bench: str, task: str, model: str) -> Any:
    hits = [f for f in findings if (f.failure_mode, f.benchmark, f.task, f.model) == (fm, bench, task, model)]
    assert len(hits) == 1, hits
    return hits[0]


def test_published_qwen3_4b_athena_vsp_hidden_invalid(published: list) -> None:
    f = _find(published, "FM01-valid-only-denominator", "athenabench", "vsp", "Qwen/Qwen3-4B-Instruct-2507")
    assert f.evidence["n"] == 200 and f.evidence["n_invalid"] == 90
    assert f.effect_pp == pytest.approx(-48.6, abs=0.1)


def test_published_gemini_cti_rcm_dropped_answers(published: list) -> None:
    f = _find(published, "FM01-valid-only-denominator", "cti_bench", "rcm", "Gemini-1.5")
    assert f.evidence["n"] == 1000 and f.evidence["n_invalid"] == 77
    assert f.effect_pp == pytest.approx(-5.1, abs=0.1)


def test_published_other_findings(published: list) -> None:
    got = {f.failure_mode for f in published}
    assert {"FM05-reasoning-left-in-text", "FM08-metric-direction-or-scale", "FM10-alias-handling",
            "FM12-duplicate-questions", "FM15-documented-vs-released"} <= got
    gpt5 = _find(published, "FM14-sampling-without-seed", "athenabench", "mcq", "gpt-5")
    assert gpt5.evidence["temperature"] == ["not sent (provider default)"]
    assert all(f.hypothesis and f.field and f.effect for f in published)


# --------------------------------------------------------------------------- a real pytest run


def test_diagnose_a_pytest_run(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """A real run (pytester, scripted endpoint on 127.0.0.1) with a stop sequence, a valid-only denominator,
    truncated answers and a refused token budget: diagnose reads each one back from the run directory."""
    from conftest import only_run_dir, write_mcq_suite

    from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer

    markers = ["OK1", "OK2", "OK3", "WRONG", "THINK", "TRUNC", "BUDGET", "OK4"]
    write_mcq_suite(pytester.path, "diag", [{"id": f"d{i}_{m}", "question": f"Question [{m}]?",
                                             "options": ["alpha", "beta", "gamma", "delta"], "gold": "A"}
                                            for i, m in enumerate(markers, 1)])
    replies = {"WRONG": Reply(content="Answer: B"),
               "THINK": Reply(content="<think>First, consider alpha", finish_reason="stop"),
               "TRUNC": Reply(content="Let me weigh each option in", finish_reason="length"),
               "BUDGET": Reply(status=400, error_message="max_tokens is too small for this model")}

    def script(call: Call) -> Reply:
        text = call.last_user_text
        return replies.get(text[text.index("[") + 1: text.index("]")], Reply(content="Answer: A"))

    with ScriptedServer(script) as server:
        result = pytester.runpytest("suites/diag", "--model", f"m@{server.url}", "--data-dir", "data",
                                    "--report-dir", "out", "--no-cache", "--max-retries", "0",
                                    "--set", 'inference.stop=["\\n\\n"]', "--set", "scoring.denominator=valid")
    assert result.parseoutcomes().get("passed") == 4, result.stdout.str()[-2000:]
    run_dir = only_run_dir(pytester.path / "out")
    capsys.readouterr()
    assert main(["diagnose", str(run_dir), "--json", "--no-ledger"]) == 0
    doc = json.loads(capsys.readouterr().out)
    found = {f["failure_mode"]: f for f in doc["findings"]}
    assert found["FM01-valid-only-denominator"]["evidence"]["n_invalid"] == 3
    assert found["FM01-valid-only-denominator"]["effect_pp"] == pytest.approx(100 * (4 / 8 - 4 / 5), abs=0.01)
    assert found["FM02-stop-inside-reasoning"]["evidence"]["question_ids"] == ["d5_THINK"]
    assert found["FM03-token-budget-truncation"]["evidence"]["question_ids"] == ["d6_TRUNC"]
    assert found["FM04-budget-below-provider-minimum"]["evidence"]["question_ids"] == ["d7_BUDGET"]
    assert all(f["model"] == "m" and f["benchmark"] == "diag" for f in doc["findings"])
