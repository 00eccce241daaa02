"""benchaudit diagnose: each check on small hand-made runs (records built by the real pipeline stages from the
real suite configs), the command line, and the published AthenaBench / CTI-Bench outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.diagnose import LoadedRun, diagnose, diagnose_report, render, to_json
from pytest_benchaudit.diagnose.core import Group
from pytest_benchaudit.diagnose.data_checks import cross_task_checks, size_checks
from pytest_benchaudit.diagnose.failure_modes import CATALOGUE
from pytest_benchaudit.ledger.ledger_rows import suite_ledger
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring.evaluate import evaluate
from pytest_benchaudit.testing.data import real_data_dir
from pytest_benchaudit.testing.runs import write_run_dir

SUITES = Path(__file__).resolve().parents[2] / "suites"
ABCD = {k: f"option {k}" for k in "ABCD"}


def pipeline(bench: str, task: str, layer: str = "released", sets: list[tuple[str, Any]] | None = None) -> Pipeline:
    return apply_overrides(load_suite(SUITES / bench / "suite.toml").pipeline(task, layer), sets or [])


def record(
    p: Pipeline,
    qid: str,
    gold: str,
    text: str,
    *,
    choices: dict[str, str] | None = ABCD,
    finish: str | None = "stop",
    error: str | None = None,
    prompt: str | None = None,
    params: dict[str, Any] | None = None,
    model: str = "m",
    **extra: Any,
) -> dict[str, Any]:
    """One record through the real extraction and scoring stages of ``p``."""
    q = Question(benchmark=p.benchmark, task=p.task, id=qid, index=int(qid), gold=gold, choices=choices or {})
    request = {
        "mode": "chat",
        "messages": [{"role": "user", "content": prompt or f"question {qid}"}],
        "params": {"temperature": 0.0} if params is None else params,
    }
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


def everything(runs: list, **kwargs: Any) -> list:
    """Listed and folded findings together (a zero effect is folded out of ``diagnose``'s list)."""
    report = diagnose_report(runs, **kwargs)
    return report.findings + report.folded


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
    assert "FM05-reasoning-left-in-text" not in ids(
        diagnose([run_of(plain, [record(plain, "0001", "C", "C\n<think>D")])])
    )


def test_letters_anywhere_effect_is_that_of_the_flagged_items() -> None:
    """FM06's sentence is about the flagged items, so its effect re-scores those alone; the whole-rule
    swap (which also loses 'Option C looks best', never flagged) is kept apart in the evidence."""
    p = pipeline("seceval", "mcq")  # all_capital_letters, total denominator
    recs = [
        record(p, "0001", "D", "I would enable DEP."),
        record(p, "0002", "C", "Option C looks best"),
        record(p, "0003", "B", "Answer: B"),
    ]
    assert all(r["correct"] for r in recs)
    f = only(diagnose([run_of(p, recs)]), "FM06-letters-read-anywhere")
    assert f.evidence["question_ids"] == ["0001"]
    # only 0001 read by final_answer_letter (no standalone letter: unreadable): 3/3 -> 2/3
    assert f.effect_pp == pytest.approx(100 * (2 / 3 - 1), abs=0.01)
    assert "on the 1 flagged items only" in f.effect
    # the whole rule replaced: 0002 is lost too, 3/3 -> 1/3
    assert f.evidence["whole_rule_effect_pp"] == pytest.approx(100 * (1 / 3 - 1), abs=0.01)


def test_letters_read_anywhere() -> None:
    p = pipeline("seceval", "mcq")  # all_capital_letters: every capital A-D anywhere
    recs = [
        record(p, "0001", "D", "I would enable DEP."),
        record(p, "0002", "B", "Answer: B"),
        record(p, "0003", "AC", "A and C"),
    ]
    f = only(diagnose([run_of(p, recs)]), "FM06-letters-read-anywhere")
    assert f.evidence["n_letter_not_standalone"] == 1 and f.evidence["question_ids"] == ["0001"]
    assert f.evidence["n_scored_correct"] == 1 and f.field == "extraction.rule"
    assert f.effect_kind == "rescored" and f.effect_pp is not None and f.effect_pp < 0
    assert "final_answer_letters" in f.effect


def test_echoed_options_scored() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    echo = "The options are:\nA) first\nB) second\nC) third\nD) fourth"
    recs = [
        record(p, "0001", "D", echo),
        record(p, "0002", "B", "Answer: B"),
        record(p, "0003", "C", echo + "\n\nThe answer is C"),
    ]  # committed after the echo: not a hit
    f = only(diagnose([run_of(p, recs)]), "FM07-echoed-options-scored")
    assert f.evidence["n_echo_scored"] == 1 and f.evidence["question_ids"] == ["0001"]
    assert f.evidence["n_scored_correct"] == 1
    assert f.effect_kind == "recomputed" and f.effect_pp == pytest.approx(100 * (2 / 3 - 3 / 3), abs=0.01)
    s = pipeline("seceval", "mcq")  # all letters anywhere: the echo's labels become the answer
    f2 = only(
        everything([run_of(s, [record(s, "0001", "AB", "A: x\nB: y\nC: z\nD: w\nI pick A and B")])]),
        "FM07-echoed-options-scored",
    )
    assert f2.evidence["n_echo_scored"] == 1 and f2.effect_is_zero  # scored 0 already: folded, not listed


def test_stop_inside_reasoning_needs_new_generations() -> None:
    p = pipeline("cybermetric", "cm80", "standardized", sets=[("inference.stop", ["\n\n"])])
    assert p.scoring.denominator == "total"
    recs = [
        record(p, "0001", "A", "<think>first, the", finish="stop"),
        record(p, "0002", "A", "ANSWER: A"),
        record(p, "0003", "A", "ANSWER: B"),
    ]
    f = only(diagnose([run_of(p, recs)]), "FM02-stop-inside-reasoning")
    assert f.evidence["n_stopped_in_reasoning"] == 1 and f.evidence["n_invalid"] == 1
    assert f.stage == "upstream" and f.effect_kind == "estimate" and "needs new generations" in f.effect
    assert f.effect_pp == pytest.approx(100 * (1 / 3) * 0.5, abs=0.01)  # answered as well as the valid half
    unstopped = pipeline("cybermetric", "cm80", "standardized", sets=[("inference.stop", [])])
    assert "FM02-stop-inside-reasoning" not in ids(
        diagnose([run_of(unstopped, [record(unstopped, "0001", "A", "<think>first", finish="stop")])])
    )


def test_truncation_and_provider_minimum() -> None:
    p = pipeline("cybermetric", "cm80", "standardized")
    recs = [
        record(p, "0001", "A", "Let me think about", finish="length"),
        record(p, "0002", "A", "ANSWER: A"),
        record(p, "0003", "A", "", finish=None, error="HTTP 400: max_tokens must be at least 16"),
        record(p, "0004", "A", "ANSWER: A"),
    ]
    recs[3]["request"]["adjustments"] = ["inference.max_tokens raised from 5 to the provider minimum 16"]
    findings = diagnose([run_of(p, recs)])
    t = only(findings, "FM03-token-budget-truncation")
    assert (
        t.evidence["n_truncated"] == 1 and t.evidence["n_truncated_invalid"] == 1 and t.field == "inference.max_tokens"
    )
    m = only(findings, "FM04-budget-below-provider-minimum")
    assert m.evidence["n_token_limit_errors"] == 1 and m.evidence["n_raised_to_minimum"] == 1
    assert m.evidence["question_ids"] == ["0003"] and m.effect_kind == "estimate"


def test_empty_and_unmatchable_gold_recomputed_without_them() -> None:
    p = pipeline("seceval", "mcq")
    recs = [
        record(p, "0001", "", "no letters here"),
        record(p, "0002", "AA", "A"),
        record(p, "0003", "E", "A"),
        record(p, "0004", "B", "B"),
        record(p, "0005", "C", "A"),
    ]
    f = only(diagnose([run_of(p, recs)]), "FM11-empty-or-unmatchable-gold")
    assert f.evidence["kinds"] == {"empty": 1, "repeated letter": 1, "not an option": 1}
    assert f.evidence["question_ids"] == ["0001", "0002", "0003"]
    # 2 of 5 right (the empty gold matched by an empty prediction) -> 1 of 2 without them
    assert f.effect_kind == "recomputed" and f.effect_pp == pytest.approx(100 * (1 / 2 - 2 / 5), abs=0.01)


def test_duplicate_questions() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    recs = [
        record(p, "0001", "A", "A", prompt="Which port does SSH use?"),
        record(p, "0002", "A", "A", prompt="which port does  SSH use?"),
        record(p, "0003", "B", "A", prompt="Which port does SSH use?"),
        record(p, "0004", "C", "D", prompt="Something else"),
    ]
    f = only(everything([run_of(p, recs)]), "FM12-duplicate-questions")
    assert f.evidence["n_duplicate_groups"] == 1 and f.evidence["n_extra_copies"] == 2
    assert f.evidence["n_groups_conflicting_gold"] == 1 and f.evidence["question_ids"] == ["0001", "0002", "0003"]
    assert f.effect_pp == pytest.approx(100 * (1 / 2 - 2 / 4), abs=0.01) and f.effect_is_zero


def test_sampling_without_seed() -> None:
    p = pipeline("cybermetric", "cm80", "standardized")
    sampled = [
        record(p, "0001", "A", "ANSWER: A", params={"temperature": 0.7}),
        record(p, "0002", "A", "ANSWER: A", params={}),
    ]
    f = only(diagnose([run_of(p, sampled)]), "FM14-sampling-without-seed")
    assert f.evidence["n_sampled_without_seed"] == 2 and f.effect_pp is None and f.effect_kind == "none"
    seeded = [record(p, "0001", "A", "ANSWER: A", params={"temperature": 0.7, "seed": 1})]
    greedy = [record(p, "0001", "A", "ANSWER: A", params={"temperature": 0.0})]
    assert "FM14-sampling-without-seed" not in ids(diagnose([run_of(p, seeded), run_of(p, greedy, "g")]))


def test_judge_fallback_and_failure() -> None:
    p = pipeline("cybermetric", "cm80", "standardized")
    recs = [
        record(p, "0001", "A", "ANSWER: A", judge={"parse_status": "json", "verdict": "A"}),
        record(p, "0002", "A", "ANSWER: A", judge={"parse_status": "fallback", "verdict": "A"}),
        record(p, "0003", "A", "???", judge={"parse_status": "failed", "verdict": None}),
    ]
    f = only(diagnose([run_of(p, recs)]), "BA01-judge-fallback-or-failure")
    assert (f.evidence["n_judged"], f.evidence["n_fallback"], f.evidence["n_failed"]) == (3, 1, 1)
    assert f.evidence["question_ids"] == ["0002", "0003"] and "judge calls" in f.effect


def test_free_text_near_miss() -> None:
    p = pipeline("athenabench", "taa", sets=[("scoring.metric", "exact_match")])
    recs = [
        record(p, "0001", "Lazarus Group", "Lazarus", choices=None),
        record(p, "0002", "APT28", "APT28", choices=None),
        record(p, "0003", "Turla", "Sandworm", choices=None),
    ]
    f = only(diagnose([run_of(p, recs)]), "BA02-free-text-near-miss")
    assert f.evidence["n_near_miss"] == 1 and f.evidence["examples"][0]["gold"] == "Lazarus Group"
    assert f.effect_kind == "estimate" and f.effect_pp == pytest.approx(100 / 3, abs=0.01)


# --------------------------------------------------------------------------- task-level checks


def _group(bench: str, task: str, **meta: Any) -> Group:
    p = pipeline(bench, task)
    return Group(bench, task, "m", "released", "run", p.card(), [], meta)


def test_metric_direction_scale_and_alias_between_similar_tasks() -> None:
    findings = cross_task_checks(
        [
            _group("athenabench", "vsp"),
            _group("cti_bench", "vsp"),
            _group("athenabench", "taa"),
            _group("cti_bench", "taa"),
            _group("athenabench", "mcq"),
            _group("cti_bench", "mcq"),
        ]
    )
    got = {(f.failure_mode, f.benchmark, f.task) for f in findings}
    assert got == {
        ("FM08-metric-direction-or-scale", "athenabench", "vsp"),
        ("FM08-metric-direction-or-scale", "cti_bench", "vsp"),
        ("FM10-alias-handling", "athenabench", "taa"),
        ("FM10-alias-handling", "cti_bench", "taa"),
    }
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
    # the sentence quotes what differs in the templates' text, not the suite's template key names
    assert (
        "its system message (documented none, released 'You are a cybersecurity expert specializing in "
        "cyberthreat intelligence.')"
    ) in up.hypothesis
    assert "its user text (documented 'You are a cybersecurity expert specializing in cyber threat" in up.hypothesis
    assert "= 'documented'" not in up.hypothesis and "'released'" not in up.hypothesis
    assert up.evidence["difference"]["user"]["released"] == "{prompt}"
    assert up.evidence["template_names"] == {"documented": "documented", "released": "released"}
    fake = {
        "cti_bench": {
            "cells": {
                "scoring.denominator": {
                    "values": {"mcq": {"scoring.denominator": {"documented": "total", "released": "valid"}}}
                }
            }
        }
    }
    down = only(diagnose([run_of(p, recs)], ledger_rows=fake), "FM15-documented-vs-released")
    assert (
        down.field == "scoring.denominator" and down.model == "m" and down.effect_pp == pytest.approx(-50.0, abs=0.01)
    )


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
def published_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, Any, dict]:
    """The 17 published runs (AthenaBench runs-mini, CTI-Bench responses) imported, their resources and ledger rows."""
    from pytest_benchaudit.importers import (
        import_athenabench_runs,
        import_cti_bench_responses,
    )
    from pytest_benchaudit.rescore.run_dirs import _Resources
    from pytest_benchaudit.runs.store import load_run

    data = real_data_dir()
    root = tmp_path_factory.mktemp("published")
    import_athenabench_runs(data / "athenabench" / "runs-mini", root / "athena", SUITES, str(data))
    import_cti_bench_responses(data / "cti-bench" / "responses", root / "cti", SUITES, str(data))
    runs = [LoadedRun(p.name, *load_run(p)) for d in ("athena", "cti") for p in sorted((root / d).iterdir())]
    assert len(runs) == 17
    rows = {b: suite_ledger(load_suite(SUITES / b / "suite.toml")) for b in ("athenabench", "cti_bench")}
    return runs, _Resources(SUITES, str(data)), rows


@pytest.fixture(scope="module")
def published_report(published_runs: tuple[list, Any, dict]) -> Any:
    runs, resources, rows = published_runs
    return diagnose_report(runs, resources=resources, ledger_rows=rows)


@pytest.fixture(scope="module")
def published(published_report: Any) -> list:
    return published_report.findings


def _find(findings: list, fm: str, bench: str, task: str, model: str) -> Any:
    hits = [f for f in findings if (f.failure_mode, f.benchmark, f.task, f.model) == (fm, bench, task, model)]
    assert len(hits) == 1, hits
    return hits[0]


def test_published_qwen3_4b_athena_vsp_hidden_invalid(published: list) -> None:
    f = _find(published, "FM01-valid-only-denominator", "athenabench", "vsp", "Qwen/Qwen3-4B-Instruct-2507")
    assert f.evidence["n"] == 200 and f.evidence["n_invalid"] == 90
    # 78.2 over the 110 valid vectors -> the same sum over 200 at no credit for the 90 unreadable ones
    assert f.effect_pp == pytest.approx(-35.2, abs=0.1)
    assert "90 answers could not be read (unparseable 90)" in f.hypothesis
    assert "scoring.invalid_credit 0" in f.effect


def test_published_gemini_cti_rcm_dropped_answers(published: list) -> None:
    f = _find(published, "FM01-valid-only-denominator", "cti_bench", "rcm", "Gemini-1.5")
    assert f.evidence["n"] == 1000 and f.evidence["n_invalid"] == 77
    assert f.effect_pp == pytest.approx(-5.1, abs=0.1)
    # the 77 are the notebook's literal 'Error' cells: failed API calls, not unreadable answers
    assert f.evidence["invalid_reasons"] == {"inference_error": 77}
    assert "77 requests failed (no answer came back: inference_error 77)" in f.hypothesis
    assert "could not be read" not in f.hypothesis


def test_published_other_findings(published: list) -> None:
    got = {f.failure_mode for f in published}
    assert {
        "FM05-reasoning-left-in-text",
        "FM08-metric-direction-or-scale",
        "FM10-alias-handling",
        "FM12-duplicate-questions",
        "FM15-documented-vs-released",
    } <= got
    gpt5 = _find(published, "FM14-sampling-without-seed", "athenabench", "mcq", "gpt-5")
    assert gpt5.evidence["temperature"] == ["not sent (provider default)"]
    assert all(f.hypothesis and f.field and f.effect for f in published)


# --------------------------------------------------------------------------- a real pytest run


def test_diagnose_a_pytest_run(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """A real run (pytester, scripted endpoint on 127.0.0.1) with a stop sequence, a valid-only denominator,
    truncated answers and a refused token budget: diagnose reads each one back from the run directory."""
    from pytest_benchaudit.testing.runs import only_run_dir
    from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
    from pytest_benchaudit.testing.toy import write_mcq_suite

    markers = ["OK1", "OK2", "OK3", "WRONG", "THINK", "TRUNC", "BUDGET", "OK4"]
    write_mcq_suite(
        pytester.path,
        "diag",
        [
            {
                "id": f"d{i}_{m}",
                "question": f"Question [{m}]?",
                "options": ["alpha", "beta", "gamma", "delta"],
                "gold": "A",
            }
            for i, m in enumerate(markers, 1)
        ],
    )
    replies = {
        "WRONG": Reply(content="Answer: B"),
        "THINK": Reply(content="<think>First, consider alpha", finish_reason="stop"),
        "TRUNC": Reply(content="Let me weigh each option in", finish_reason="length"),
        "BUDGET": Reply(status=400, error_message="max_tokens is too small for this model"),
    }

    def script(call: Call) -> Reply:
        text = call.last_user_text
        return replies.get(text[text.index("[") + 1 : text.index("]")], Reply(content="Answer: A"))

    with ScriptedServer(script) as server:
        result = pytester.runpytest(
            "suites/diag",
            "--model",
            f"m@{server.url}",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "--no-cache",
            "--max-retries",
            "0",
            "--set",
            'inference.stop=["\\n\\n"]',
            "--set",
            "scoring.denominator=valid",
        )
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


# --------------------------------------------------------------------------- merged, folded, sorted


def test_dataset_problems_are_one_finding_per_task_not_per_model() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    prompts = ["Which port does SSH use?", "which port does  SSH use?", "Something else", "Another one"]

    def answers(model: str, texts: list[str]) -> list[dict[str, Any]]:
        return [record(p, f"{i:04d}", "A", t, prompt=prompts[i], model=model) for i, t in enumerate(texts)]

    m1 = answers("m1", ["A", "B", "A", "A"])  # the extra copy (0001) was wrong: 3/4 -> 3/3
    m2 = answers("m2", ["A", "A", "B", "A"])  # the extra copy was right: 3/4 -> 2/3
    findings = diagnose([run_of(p, m1, "r1"), run_of(p, m2, "r2")])
    f = only(findings, "FM12-duplicate-questions")  # one finding, not one per model
    assert f.model == "*" and f.evidence["models"] == ["m1", "m2"]
    assert f.evidence["effect_by_model"] == {
        "m1": pytest.approx(25.0, abs=0.01),
        "m2": pytest.approx(100 * (2 / 3 - 3 / 4), abs=0.01),
    }
    assert f.effect_pp == pytest.approx(25.0, abs=0.01) and "the largest move of the 2 models' records (m1)" in f.effect
    assert "(the same in the records of 2 models)" in f.hypothesis


def test_zero_effect_findings_are_folded_into_a_count() -> None:
    p = pipeline("cti_bench", "mcq", sets=[("scoring.denominator", "total")])
    dup = [
        record(p, "0001", "A", "A", prompt="Which port does SSH use?"),
        record(p, "0002", "A", "A", prompt="which port does  SSH use?"),
        record(p, "0003", "B", "A", prompt="Which port does SSH use?"),
        record(p, "0004", "C", "D", prompt="Something else"),
    ]  # 2/4 -> 1/2 without the copies: no move
    q = pipeline("cti_bench", "mcq")
    hidden = [record(q, "0001", "A", "A"), record(q, "0002", "A", "no idea")]
    report = diagnose_report([run_of(p, dup, "dup"), run_of(q, hidden, "hidden")])
    assert ids(report.findings) == {"FM01-valid-only-denominator"}
    assert [f.failure_mode for f in report.folded] == ["FM12-duplicate-questions"]
    assert report.folded[0].effect_is_zero and report.folded[0].effect_pp == 0.0
    text = render(report.findings, 2, report.folded)
    assert (
        "1 more findings re-scored or recomputed to an effect of 0.0 (the headline does not move), not listed: FM12 x1"
    ) in text
    assert "FM12-duplicate-questions" not in text.split("failure mode")[-1]  # not counted among the listed
    doc = to_json(report.findings, 2, report.folded)
    assert doc["n_folded"] == 1 and doc["folded"][0]["failure_mode"] == "FM12-duplicate-questions"
    assert [f["failure_mode"] for f in doc["findings"]] == ["FM01-valid-only-denominator"]


def test_findings_sorted_by_absolute_effect() -> None:
    p = pipeline("cti_bench", "mcq")  # valid-only denominator
    # names chosen so that no order by benchmark, task or model gives the order by effect
    small = [record(p, f"{i:04d}", "A", "A", model="a-small") for i in range(9)] + [
        record(p, "0009", "A", "?", model="a-small")
    ]
    large = [record(p, "0001", "A", "A", model="z-large"), record(p, "0002", "A", "?", model="z-large")]
    c = pipeline("cybermetric", "cm80", "standardized")
    sampled = [record(c, "0001", "A", "ANSWER: A", params={"temperature": 0.7}, model="sampled")]
    findings = diagnose([run_of(p, small, "a"), run_of(c, sampled, "b"), run_of(p, large, "c")])
    assert [(f.failure_mode[:4], f.model) for f in findings] == [
        ("FM01", "z-large"),
        ("FM01", "a-small"),
        ("FM14", "sampled"),
    ]
    assert [f.effect_pp for f in findings] == [pytest.approx(-50.0), pytest.approx(-10.0), None]


def test_published_findings_sorted_and_without_zero_effects(published_report: Any) -> None:
    listed = published_report.findings
    with_pp = [abs(f.effect_pp) for f in listed if f.effect_pp is not None]
    assert with_pp == sorted(with_pp, reverse=True)
    first_none = next(i for i, f in enumerate(listed) if f.effect_pp is None)
    assert all(f.effect_pp is None for f in listed[first_none:])
    assert not any(f.effect_is_zero for f in listed) and all(f.effect_is_zero for f in published_report.folded)
    # FM05's +0.0 findings are counted apart, not listed
    assert {f.failure_mode for f in published_report.folded} >= {"FM05-reasoning-left-in-text"}
    # the duplicate questions of CTI-Bench's RCM, RCM-2021 and VSP: one finding per task, all five models
    dups = [f for f in listed if f.failure_mode == "FM12-duplicate-questions"]
    assert sorted(f.task for f in dups) == ["rcm", "rcm_2021", "vsp"]
    assert all(f.model == "*" and len(f.evidence["models"]) == 5 for f in dups)


# --------------------------------------------------------------------------- whole groups and the card


def test_a_group_whose_every_answer_is_invalid_is_a_finding() -> None:
    p = pipeline("cti_bench", "mcq")
    down = [record(p, f"{i:04d}", "A", "", finish=None, error="HTTP 503: upstream unavailable") for i in range(3)]
    f = only(diagnose([run_of(p, down)]), "BA03-endpoint-or-format-failure")
    assert f.evidence["invalid_reasons"] == {"inference_error": 3} and "endpoint failed every request" in f.hypothesis
    assert "HTTP 503" in f.hypothesis and f.effect_pp is None
    prose = [record(p, f"{i:04d}", "A", "I would go with the second one.") for i in range(3)]
    g = only(diagnose([run_of(p, prose)]), "BA03-endpoint-or-format-failure")
    assert "the answers are in a format extraction.rule 'last_line_letter' never reads" in g.hypothesis
    assert g.evidence["invalid_reasons"] == {"unparseable": 3}
    # one readable answer: the group has a score, no BA03
    assert "BA03-endpoint-or-format-failure" not in ids(diagnose([run_of(p, prose + [record(p, "0009", "A", "A")])]))


def test_card_lint_finds_what_the_server_did_not_enforce() -> None:
    one = pipeline("cybermetric", "cm80", "standardized", sets=[("inference.max_tokens", 1)])
    # the server ignored max_tokens=1: full answers, finish 'stop', nothing for FM03 to see
    recs = [record(one, "0001", "A", "ANSWER: A", model=m) for m in ("m1", "m2")]
    findings = diagnose([run_of(one, [recs[0]], "r1"), run_of(one, [recs[1]], "r2")])
    lint = only(findings, "BA04-card-lint")
    assert lint.evidence["lint"] == "max_tokens_1_generative" and lint.field == "inference.max_tokens"
    assert lint.model == "*" and lint.evidence["models"] == ["m1", "m2"]  # one card, one finding
    assert "FM03-token-budget-truncation" not in ids(findings)
    # a newline stop while the outputs carry reasoning
    nl = pipeline("cybermetric", "cm80", "standardized", sets=[("inference.stop", ["\n"])])
    f = only(diagnose([run_of(nl, [record(nl, "0001", "A", "<think>short</think>ANSWER: A")])]), "BA04-card-lint")
    assert f.evidence["lint"] == "newline_stop_with_reasoning" and f.field == "inference.stop"
    # a budget below the longest gold answer, and a stop sequence inside a gold answer
    taa = pipeline(
        "athenabench",
        "taa",
        sets=[("inference.max_tokens", 2), ("inference.stop", ["Group"]), ("scoring.metric", "exact_match")],
    )
    got = diagnose([run_of(taa, [record(taa, "0001", "Wizard Spider Group", "Wizard Spider Group", choices=None)])])
    lints = {f.evidence["lint"]: f for f in got if f.failure_mode == "BA04-card-lint"}
    assert set(lints) == {"budget_below_gold", "stop_inside_gold"}
    assert lints["budget_below_gold"].evidence["longest_gold_words"] == 3
    # MMLU's released max_tokens=1 reads log-probabilities, not text: no lint
    mmlu = pipeline("mmlu_cs", "mcq")
    assert mmlu.inference.max_tokens == 1
    assert "BA04-card-lint" not in ids(diagnose([run_of(mmlu, [record(mmlu, "0001", "A", " A")])]))


def test_the_papers_argmax_without_logprobs_is_named_not_reported_as_an_unreadable_group() -> None:
    """Under the paper's rule (logprob_argmax, no fallback) answers without log-probabilities have no
    prediction: BA05 names why; BA03 (every answer invalid) would only repeat the symptom."""
    p = pipeline("mmlu_cs", "mcq", sets=[("extraction.rule", "logprob_argmax")])
    recs = [record(p, f"{i:04d}", "A", " B") for i in range(4)]  # Generation without top_logprobs
    assert not any(r["valid"] for r in recs)
    findings = diagnose([run_of(p, recs)])
    f = only(findings, "BA05-logprobs-missing")
    assert f.evidence["n_without_logprobs"] == 4 and f.evidence["n_fallback_scored"] == 0
    assert "found no prediction in any of them" in f.hypothesis
    assert "BA03-endpoint-or-format-failure" not in ids(findings)
    # answers that did carry log-probabilities: nothing to report
    with_lp = [{**r, "top_logprobs": [{" B": -0.1}]} for r in recs]
    assert "BA05-logprobs-missing" not in ids(diagnose([run_of(p, with_lp)]))


def test_mmlu_released_on_an_endpoint_without_logprobs_names_the_cause(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """MMLU's released pipeline (evaluate.py's bare except) on an endpoint that returns no log-probabilities
    scores its fallback 'A' for every question: diagnose says so (BA05), and blames no extraction rule."""
    from pytest_benchaudit.testing.runs import only_run_dir, read_run
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    data = real_data_dir()
    if not (data / "mmlu-computer-security" / "computer_security_test.csv").is_file():
        pytest.skip("real MMLU computer_security data missing under $BENCHAUDIT_DATA")
    with ScriptedServer(lambda call: Reply(content=" B", top_logprobs=None)) as server:
        result = pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(data),
            "--limit",
            "8",
            "--no-cache",
            "--model",
            f"m@{server.url}",
            "--pipeline",
            "released",
            "--report-dir",
            "out",
        )
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    run_dir = only_run_dir(pytester.path / "out")
    records = read_run(run_dir)["records"]
    assert len(records) == 8 and {r["prediction"] for r in records} == {"A"}
    capsys.readouterr()
    assert main(["diagnose", str(run_dir), "--json", "--no-ledger"]) == 0
    doc = json.loads(capsys.readouterr().out)
    found = {f["failure_mode"]: f for f in doc["findings"] + doc["folded"]}
    f = found["BA05-logprobs-missing"]
    assert f["evidence"]["n_without_logprobs"] == 8 and f["evidence"]["fallback_predictions"] == {"A": 8}
    n_gold_a = sum(1 for r in records if r["gold"] == "A")  # the fallback is right exactly where the gold is A
    assert f["evidence"]["n_fallback_correct"] == n_gold_a
    assert f["effect_pp"] == pytest.approx(-100 * n_gold_a / 8, abs=0.01)
    assert "does not return logprobs" in f["hypothesis"]
    assert not {"FM06-letters-read-anywhere", "FM07-echoed-options-scored", "BA03-endpoint-or-format-failure"} & set(
        found
    )


# --------------------------------------------------------------------------- effects recomputed from the records


def _headline(records: list[dict[str, Any]], denominator: str) -> float:
    """The task's headline by hand: the mean item score over the valid items or over all of them."""
    counted = [r for r in records if r["valid"]] if denominator == "valid" else records
    return sum(float(r["score"]) for r in counted) / len(counted)


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def _user_text(rec: dict[str, Any]) -> str:
    req = rec.get("request") or {}
    if req.get("prompt"):
        return _fold(req["prompt"])
    users = [m["content"] for m in req.get("messages") or () if m.get("role") == "user"]
    return _fold(users[-1]) if users else ""


def test_published_effects_equal_a_recomputation_from_the_records(
    published_runs: tuple[list, Any, dict], published_report: Any
) -> None:
    """Every published FM01, FM07, FM12 and BA02 effect (listed or folded), recomputed by hand from
    records.jsonl (means of the stored item scores at no credit; duplicates grouped here from the prompts),
    and every re-scored one (FM05, FM06, FM15) from the records re-scored with the field changed and averaged
    by hand."""
    from pytest_benchaudit.pipeline.layering import retarget
    from pytest_benchaudit.rescore.records import pipeline_from_card, rescore_records

    runs, resources, _ = published_runs
    by_key = {}
    for run in runs:
        for rec in run.records:
            by_key.setdefault((rec["benchmark"], rec["task"], rec["model"]), (run, []))[1].append(rec)
    checked: dict[str, int] = {}
    for f in published_report.findings + published_report.folded:
        models = list(f.evidence.get("effect_by_model") or {}) if f.model == "*" else [f.model]
        if not models or f.effect_kind == "none":
            continue
        for model in models:
            run, recs = by_key[(f.benchmark, f.task, model)]
            card = run.meta["pipeline_cards"][f"{f.benchmark}.{f.task}"]
            denominator = card["fields"]["scoring.denominator"]
            old = _headline(recs, denominator)
            fm = f.failure_mode
            if fm == "FM01-valid-only-denominator":
                new = _headline(recs, "total")
            elif fm == "FM12-duplicate-questions":
                seen: set[str] = set()
                kept = []
                for r in recs:
                    if _user_text(r) not in seen:
                        kept.append(r)
                    seen.add(_user_text(r))
                new = _headline(kept, denominator)
            elif fm == "FM07-echoed-options-scored":
                echoed = set(f.evidence["question_ids"])
                assert f.evidence["n_echo_scored"] == len(echoed)  # all echo ids are quoted
                new = _headline(
                    [{**r, "valid": False, "score": 0.0} if r["question_id"] in echoed else r for r in recs],
                    denominator,
                )
            elif fm == "BA02-free-text-near-miss":
                assert f.effect_pp == pytest.approx(100 * f.evidence["n_near_miss"] / f.evidence["n"], abs=0.01)
                checked[fm] = checked.get(fm, 0) + 1
                continue
            elif fm in ("FM05-reasoning-left-in-text", "FM06-letters-read-anywhere", "FM15-documented-vs-released"):
                field_value = {
                    "FM05-reasoning-left-in-text": ("extraction.reasoning", "strip"),
                    "FM06-letters-read-anywhere": ("extraction.rule", f.evidence.get("strict_rule")),
                    "FM15-documented-vs-released": (f.field, f.evidence.get("documented")),
                }[fm]
                stored = pipeline_from_card(card)
                target = retarget(stored, None, [field_value])
                flagged = set(f.evidence.get("question_ids") or ())
                if fm == "FM06-letters-read-anywhere":
                    assert f.evidence["n_letter_not_standalone"] == len(flagged)  # all flagged ids are quoted
                new_recs = rescore_records(
                    recs,
                    lambda r: target if fm != "FM06-letters-read-anywhere" or r["question_id"] in flagged else stored,  # noqa: B023 - called within this iteration
                    lambda b, t: resources(b, t, target.scoring.metric),  # noqa: B023 - called within this iteration
                )
                new = _headline(new_recs, target.scoring.denominator)
            else:
                continue
            expected = (
                f.evidence["effect_by_model"][model]
                if f.model == "*"
                else (f.effect_pp if f.effect_pp is not None else f.effect_delta)
            )
            lower = card["fields"]["scoring.metric"] == "cvss_abs_diff_cti"
            got = round(new - old, 6) if lower else round(100 * (new - old), 2)
            assert expected == pytest.approx(got, abs=1e-6 if lower else 0.011), (fm, f.task, model)
            checked[fm] = checked.get(fm, 0) + 1
    assert {
        "FM01-valid-only-denominator",
        "FM12-duplicate-questions",
        "FM05-reasoning-left-in-text",
        "FM06-letters-read-anywhere",
        "FM07-echoed-options-scored",
        "FM15-documented-vs-released",
        "BA02-free-text-near-miss",
    } <= set(checked)


def test_reordered_runs_give_the_same_findings(published_runs: tuple[list, Any, dict], published_report: Any) -> None:
    """Metamorphic: the order the runs are given in moves no finding, effect or fold."""
    runs, resources, rows = published_runs
    again = diagnose_report(list(reversed(runs)), resources=resources, ledger_rows=rows)

    def key(f: Any) -> tuple:
        ev = {k: (sorted(v) if k == "models" else v) for k, v in f.evidence.items()}
        return (
            f.failure_mode,
            f.benchmark,
            f.task,
            f.model,
            f.field,
            f.effect_pp,
            f.effect_delta,
            json.dumps(ev, sort_keys=True, default=str),
        )

    assert sorted(map(key, again.findings)) == sorted(map(key, published_report.findings))
    assert sorted(map(key, again.folded)) == sorted(map(key, published_report.folded))
    # the order is by |effect| whatever the input order
    assert [abs(f.effect_pp) for f in again.findings if f.effect_pp is not None] == [
        abs(f.effect_pp) for f in published_report.findings if f.effect_pp is not None
    ]
