"""``benchaudit export --format every-eval-ever``: real runs out, Every Eval Ever 0.3.0 files in.

The schemas are read from the shared reference folder beside the data directory
(``$BENCHAUDIT_DATA/../reference/every-eval-ever-0.3.0``), never copied into the repository.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import main as benchaudit_main
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

jsonschema = pytest.importorskip("jsonschema")


def schema_dir() -> Path:
    value = os.environ.get("BENCHAUDIT_DATA")
    if not value:
        pytest.skip(
            "Every Eval Ever schemas not available: BENCHAUDIT_DATA is not set, so "
            "$BENCHAUDIT_DATA/../reference/every-eval-ever-0.3.0 cannot be located"
        )
    path = Path(value).expanduser().parent / "reference" / "every-eval-ever-0.3.0"
    if not (path / "eval.schema.json").is_file() or not (path / "instance_level_eval.schema.json").is_file():
        pytest.skip(
            f"Every Eval Ever schemas not available: no eval.schema.json / instance_level_eval.schema.json in {path}"
        )
    return path


@pytest.fixture(scope="module")
def schemas() -> dict[str, object]:
    path = schema_dir()
    out = {}
    for kind, name in (("aggregate", "eval.schema.json"), ("sample", "instance_level_eval.schema.json")):
        schema = json.loads((path / name).read_text(encoding="utf-8"))
        out[kind] = jsonschema.Draft7Validator(schema)
    out["dir"] = path
    return out


def export(*argv: str) -> int:
    return benchaudit_main(["export", *argv])


def written(out: Path) -> tuple[list[dict], list[dict]]:
    aggregates = [json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))]
    samples = [json.loads(line) for p in sorted(out.rglob("*_samples.jsonl")) for line in p.read_text().splitlines()]
    return aggregates, samples


def assert_valid(schemas: dict, aggregates: list[dict], samples: list[dict]) -> None:
    assert aggregates
    for doc in aggregates:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in schemas["aggregate"].iter_errors(doc)]
        assert not errors, errors[:5]
    for line in samples:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in schemas["sample"].iter_errors(line)]
        assert not errors, errors[:5]


def by_name(doc: dict) -> dict[str, dict]:
    return {r["evaluation_name"]: r for r in doc["evaluation_results"]}


# ------------------------------------------------------------------ a real pytest run (toy suite)


@pytest.fixture
def toy_run(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> tuple[Path, ScriptedServer]:
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "2",
        "-p",
        "no:randomly",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    return only_run_dir(pytester.path / "out"), scripted


def test_toy_run_exports_valid_files_with_the_pipeline(toy_run, pytester: pytest.Pytester, schemas, capsys) -> None:
    run_dir, server = toy_run
    out = pytester.path / "eee"
    assert (
        export(
            str(run_dir),
            "--format",
            "every-eval-ever",
            "--out",
            str(out),
            "--samples",
            "--suites-dir",
            "suites",
            "--validate",
            str(schemas["dir"]),
        )
        == 0
    )
    assert "valid against the schemas" in capsys.readouterr().out
    aggregates, samples = written(out)
    assert_valid(schemas, aggregates, samples)
    summary = read_run(run_dir)["summary"]
    (doc,) = aggregates  # one model x one benchmark
    # model identity: spec as the name, the id the endpoint said it served
    assert doc["model_info"]["name"] == "toy-model" and doc["model_info"]["id"] == "scripted-model"
    assert json.loads(doc["model_info"]["additional_details"]["benchaudit.served_model_ids"]) == ["scripted-model"]
    assert doc["eval_library"]["name"] == "pytest-benchaudit"
    results = by_name(doc)
    assert {"toy.mcq", "toy.extra", "toy"} <= set(results)
    mcq = results["toy.mcq"]
    res = next(r for r in summary["results"] if r["task"] == "mcq")
    # headline, both denominators, n, invalid rate, CI
    assert mcq["score_details"]["score"] == pytest.approx(res["score"]) == pytest.approx(6 / 12)
    details = mcq["score_details"]["details"]
    assert details["denominator"] == "total"
    assert float(details["score_total"]) == pytest.approx(6 / 12)
    assert float(details["score_valid"]) == pytest.approx(6 / 7)
    assert (details["n"], details["n_valid"]) == ("12", "7")
    assert float(details["invalid_rate"]) == pytest.approx(5 / 12)
    ci = mcq["score_details"]["uncertainty"]["confidence_interval"]
    assert [ci["lower"], ci["upper"]] == pytest.approx(res["ci95"]) and ci["confidence_level"] == 0.95
    assert mcq["score_details"]["uncertainty"]["num_samples"] == 12
    assert mcq["metric_config"]["lower_is_better"] is False
    assert mcq["metric_config"]["additional_details"]["denominator"] == "total"
    # the pipeline: typed slots where the schema has them, the rest in additional_details
    gen = mcq["generation_config"]
    assert gen["generation_args"]["temperature"] == 0.0 and gen["generation_args"]["max_tokens"] == 64
    assert "{question}" in gen["generation_args"]["prompt_template"]
    extra = gen["additional_details"]
    assert json.loads(extra["inference.stop"]) == []
    assert extra["extraction.rule"] == "final_answer_letter" and extra["extraction.reasoning"] == "strip"
    assert extra["scoring.denominator"] == "total" and extra["aggregation.method"] == "micro"
    assert extra["pipeline"] == "standardized" and extra["pipeline_hash"] == res["pipeline_hash"]
    # samples: one line per record, linked to the aggregate, answers and outputs in, question out
    mcq_lines = [s for s in samples if s["evaluation_name"] == "toy.mcq"]
    assert len(mcq_lines) == 12 and {s["evaluation_id"] for s in samples} == {doc["evaluation_id"]}
    line = next(s for s in mcq_lines if s["sample_id"] == "t02")
    assert line["input"]["reference"] == ["B"] and line["output"]["raw"] == ["Answer: C"]
    assert line["answer_attribution"][0]["extracted_value"] == "C"
    assert line["evaluation"] == {"score": 0.0, "is_correct": False, "num_turns": 1}
    t05 = next(s for s in mcq_lines if s["sample_id"] == "t05")
    assert t05["metadata"]["invalid_reason"] == "unclosed_reasoning" and t05["metadata"]["valid"] == "false"
    assert doc["detailed_evaluation_results"]["total_rows"] == len(samples)
    text = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert "Toy question" not in text and "second option" not in text  # question content withheld
    assert all(s["input"]["raw"] == "" and "choices" not in s["input"] for s in samples)
    # nothing from the environment: no endpoint URL, no argv
    assert server.url not in text and "127.0.0.1" not in text and "--report-dir" not in text


def test_include_questions_opts_in(toy_run, pytester: pytest.Pytester, schemas) -> None:
    run_dir, _server = toy_run
    out = pytester.path / "eee-q"
    assert export(str(run_dir), "--out", str(out), "--samples", "--include-questions") == 0
    aggregates, samples = written(out)
    assert_valid(schemas, aggregates, samples)
    line = next(s for s in samples if s["sample_id"] == "t02")
    assert line["input"]["raw"].startswith("Toy question WRONG?")
    assert "second option" in line["input"]["formatted"] and line["input"]["choices"] == ["A", "B", "C", "D"]
    assert aggregates[0]["detailed_evaluation_results"]["additional_details"]["questions_included"] == "true"


# ------------------------------------------------------------------ a lower-is-better task (CTI-Bench VSP, MAD)


def test_lower_is_better_task_is_marked(pytester: pytest.Pytester, real_data: Path, schemas) -> None:
    reply = Reply(content="The vector is\nCVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H")
    with ScriptedServer(lambda call: reply) as server:
        result = pytester.runpytest(
            str(SUITES / "cti_bench"),
            "-k",
            "vsp",
            "--data-dir",
            str(real_data),
            "--limit",
            "3",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    out = pytester.path / "eee"
    assert (
        export(str(only_run_dir(pytester.path / "out")), "--out", str(out), "--samples", "--suites-dir", str(SUITES))
        == 0
    )
    aggregates, samples = written(out)
    assert_valid(schemas, aggregates, samples)
    vsp = by_name(aggregates[0])["cti_bench.vsp"]
    assert vsp["metric_config"]["lower_is_better"] is True
    assert vsp["metric_config"]["metric_kind"] == "mae"
    assert (vsp["metric_config"]["min_score"], vsp["metric_config"]["max_score"]) == (0.0, 10.0)
    assert len(samples) == 3


# ------------------------------------------------------------------ imported AthenaBench runs


def test_imported_athenabench_runs_export_valid(tmp_path: Path, real_data: Path, schemas) -> None:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"AthenaBench released runs not available: {source}")
    assert (
        benchaudit_main(
            [
                "import",
                "athenabench-runs",
                str(source),
                "--report-dir",
                str(tmp_path / "runs"),
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(real_data),
            ]
        )
        == 0
    )
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert runs
    out = tmp_path / "eee"
    for run_dir in runs:
        assert (
            export(
                str(run_dir),
                "--out",
                str(out),
                "--samples",
                "--suites-dir",
                str(SUITES),
                "--validate",
                str(schemas["dir"]),
            )
            == 0
        )
    aggregates, samples = written(out)
    assert len(aggregates) == len(runs)
    assert_valid(schemas, aggregates, samples)
    for run_dir in runs:
        summary = read_run(run_dir)["summary"]
        model = summary["results"][0]["model"]
        (doc,) = [d for d in aggregates if d["model_info"]["name"] == model]
        assert doc["source_metadata"]["additional_details"]["imported_from"] == "athenabench-runs"
        results = by_name(doc)
        for res in summary["results"]:
            entry = results[f"athenabench.{res['task']}"]
            assert entry["score_details"]["score"] == pytest.approx(res["score"])
            assert entry["score_details"]["details"]["denominator"] == res["denominator"]
            assert entry["generation_config"]["additional_details"]["scoring.denominator"] == res["denominator"]
        # VSP: the released layer counts valid answers only, and says so
        vsp = results["athenabench.vsp"]
        assert vsp["generation_config"]["additional_details"]["scoring.denominator"] == "valid"
        assert vsp["score_details"]["uncertainty"]["num_samples"] == int(vsp["score_details"]["details"]["n_valid"])
        assert results["athenabench"]["metric_config"]["additional_details"]["aggregation.method"] == "macro"
    assert len(samples) == sum(len(read_run(r)["records"]) for r in runs)
    assert all(s["input"]["raw"] == "" for s in samples)
    question = json.loads((runs[0] / "records.jsonl").read_text().splitlines()[0])["request"]["messages"][-1]["content"]
    assert not any(question in p.read_text() for p in out.rglob("*") if p.is_file())


# ------------------------------------------------------------------ bad input: one clear error


def test_not_a_run_directory(tmp_path: Path, capsys) -> None:
    assert export(str(tmp_path), "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a benchaudit run directory" in err[0]
    assert export(str(tmp_path / "missing"), "--out", str(tmp_path / "o")) == 2
    assert "not a directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_unknown_format(toy_run, pytester: pytest.Pytester, capsys) -> None:
    run_dir, _server = toy_run
    assert export(str(run_dir), "--format", "helm", "--out", str(pytester.path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown format 'helm'" in err[0] and "every-eval-ever" in err[0]
    assert not (pytester.path / "o").exists()


def test_run_without_summary(toy_run, pytester: pytest.Pytester, capsys) -> None:
    run_dir, _server = toy_run
    (run_dir / "summary.json").unlink()
    # The aggregate is computed from the records (issue 12 case 12), so no summary.json is needed.
    assert export(str(run_dir), "--out", str(pytester.path / "o")) == 0
    assert list((pytester.path / "o").rglob("*.json"))
