"""``benchaudit import``: published model outputs -> run directories (importers.py).

Real data: AthenaBench ``runs-mini/`` (12 models x 6 tasks, raw responses and released
per-item scores) and CTI-Bench ``responses/*.tsv`` (5 models, extracted answers).  The
released layer must reproduce every released AthenaBench score except TAA (scored with
CTI-Bench's alias graphs, AthenaBench's own are not public), and the CTI-Bench notebook's
ChatGPT-4 figures.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import build_parser, main
from pytest_benchaudit.importers import run_dir_name
from pytest_benchaudit.pipeline.record import Record
from pytest_benchaudit.testing.runs import read_run

ATHENA_FILES = {"mcq": "MCQ3k", "ate": "ATE", "rms": "RMS", "rcm": "RCM", "vsp": "VSP", "taa": "TAA"}
ATHENA_COUNTS = {"mcq": 300, "ate": 100, "rms": 100, "rcm": 200, "vsp": 200, "taa": 50}
CTI_COUNTS = {"mcq": 2500, "rcm": 1000, "rcm_2021": 1000, "vsp": 1000, "taa": 50}


def _import(kind: str, source: Path, report_dir: Path, data_dir: Path) -> int:
    return main(
        [
            "import",
            kind,
            str(source),
            "--report-dir",
            str(report_dir),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(data_dir),
        ]
    )


def _runs(report_dir: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for run_dir in sorted(p for p in report_dir.iterdir() if p.is_dir()):
        run = read_run(run_dir)
        run["path"] = run_dir
        run["report"] = json.loads((run_dir / "import_report.json").read_text())
        out[run["run"]["source"]["model"]] = run
    return out


@pytest.fixture(scope="module")
def athena_source(real_data: Path) -> Path:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    return source


@pytest.fixture(scope="module")
def cti_source(real_data: Path) -> Path:
    source = real_data / "cti-bench" / "responses"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    return source


@pytest.fixture(scope="module")
def athena(athena_source: Path, real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    report_dir = tmp_path_factory.mktemp("athena-import")
    assert _import("athenabench-runs", athena_source, report_dir, real_data) == 0
    return _runs(report_dir)


@pytest.fixture(scope="module")
def cti(cti_source: Path, real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    report_dir = tmp_path_factory.mktemp("cti-import")
    assert _import("cti-bench-responses", cti_source, report_dir, real_data) == 0
    return _runs(report_dir)


def _released_rows(source: Path, model: str, task: str) -> list[dict[str, Any]]:
    path = source / model / f"{ATHENA_FILES[task]}-scored.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _released_value(task: str, row: dict[str, Any]) -> float | None:
    """The released per-item number on our scale, from the released file (None: not counted)."""
    if task == "vsp":
        return 1 - row["score"] / 7.7 if row["success"] else None
    if task == "taa":
        return float(row["score"]["correct"])
    return float(row["score"])


# --------------------------------------------------------------------------- names and parser


def test_run_dir_names_are_safe():
    assert run_dir_name("Qwen/Qwen3-4B-Instruct-2507") == "Qwen--Qwen3-4B-Instruct-2507"
    assert run_dir_name("gpt-4") == "gpt-4"
    for hostile in ("../../etc/passwd", "a\\b", "..", ".hidden", "", "a b:c*?"):
        name = run_dir_name(hostile)
        assert name and "/" not in name and "\\" not in name and not name.startswith("."), (hostile, name)


def _parser() -> argparse.ArgumentParser:
    return build_parser(["import"])


def test_parser_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["import", "athenabench-runs", "some/dir"])
    assert args.report_dir == Path("reports") and args.suites_dir == Path("suites") and args.data_dir is None
    # the importers are the registered ones (built-ins and plugins'): a word that is neither an importer nor a
    # path, before the paths, is one line naming the nearest importer, exit 2
    assert main(["import", "athenabench-run", "dir"]) == 2
    err = capsys.readouterr().err
    assert "no importer 'athenabench-run' (did you mean 'athenabench-runs'?)" in err and "Traceback" not in err
    assert main(["import", "unknown-source", "dir"]) == 2
    err = capsys.readouterr().err
    assert "no importer 'unknown-source'" in err and "no such file or folder" in err and "Traceback" not in err
    # a single path that is not there is one error too
    assert main(["import", "unknown-source"]) == 2
    assert "unknown-source: no such file or folder" in capsys.readouterr().err


# --------------------------------------------------------------------------- AthenaBench


def test_athena_one_run_directory_per_model(athena, athena_source):
    assert len(athena) == 12
    models = sorted(p.parent.relative_to(athena_source).as_posix() for p in athena_source.rglob("MCQ3k-scored.jsonl"))
    assert sorted(athena) == models
    for model, run in athena.items():
        assert run["path"].name.endswith(run_dir_name(model))
        meta = run["run"]
        assert meta["run_id"] == run["path"].name and meta["started"] and meta["ended"]
        assert meta["source"]["kind"] == "athenabench-runs" and meta["source"]["path"] == str(athena_source.resolve())
        assert meta["models"][0]["spec"] == model and meta["n_records"] == 950
        assert sorted(meta["pipeline_cards"]) == sorted(f"athenabench.{t}" for t in ATHENA_FILES)
        assert all(c["pipeline"] == "released" for c in meta["pipeline_cards"].values())
        assert "athenabench/athena-cti-mcq-3k.jsonl" in meta["dataset_checksums"]
        assert "cti-bench/taa-lookups/alias_dict.json" in meta["dataset_checksums"]
        assert set(run["summary"]) == {"results", "benchmarks", "gates"}


def test_athena_records_per_task_follow_the_contract(athena, athena_source):
    for model, run in athena.items():
        records = run["records"]
        assert Counter(r["task"] for r in records) == ATHENA_COUNTS
        cards = run["run"]["pipeline_cards"]
        by_task = defaultdict(list)
        for rec in records:
            by_task[rec["task"]].append(rec)
        for task, recs in by_task.items():
            released = _released_rows(athena_source, model, task)
            for i, (rec, row) in enumerate(zip(recs, released)):
                assert rec["question_index"] == i and rec["gold"] == str(row["answer"])
                assert rec["raw_output"] == row["response"]  # as published, nothing stripped
                assert rec["released_prediction"] == row["prediction"] and rec["released_score"] == row["score"]
                assert rec["request"]["messages"] == [{"role": "user", "content": row["prompt"]}]
                assert rec["pipeline"] == "released" and rec["pipeline_hash"] == cards[f"athenabench.{task}"]["hash"]
        assert all(r["question_labels"] == list("ABCDE") for r in by_task["mcq"])
        assert all("source_type" in r["question_meta"] for r in by_task["mcq"])
        Record.model_validate(records[0])
    gpt5 = athena["gpt-5"]["records"][0]["request"]
    assert "temperature" not in gpt5["params"] and gpt5["adjustments"]
    assert athena["gpt-4"]["records"][0]["request"]["params"] == {"temperature": 0.0}


def test_athena_released_layer_reproduces_every_released_score(athena, athena_source):
    agree: Counter = Counter()
    total: Counter = Counter()
    for run in athena.values():
        denominators = {r["task"]: r["denominator"] for r in run["summary"]["results"]}
        for rec in run["records"]:
            task = rec["task"]
            theirs = _released_value(task, {"score": rec["released_score"], "success": rec["released_success"]})
            ours = rec["score"] if (rec["valid"] or denominators[task] != "valid") else None
            total[task] += 1
            agree[task] += (ours is None and theirs is None) or (
                ours is not None and theirs is not None and abs(ours - theirs) < 1e-9
            )
    for task in ("mcq", "ate", "rms", "rcm", "vsp"):
        assert agree[task] == total[task] == 12 * ATHENA_COUNTS[task], task
    # TAA: CTI-Bench's alias graphs stand in for AthenaBench's unpublished ones.
    assert total["taa"] == 600 and agree["taa"] == 584


def test_athena_import_report_lists_every_difference_with_a_reason(athena):
    diffs = [d for run in athena.values() for d in run["report"]["differences"]]
    assert len(diffs) == 16 and {d["task"] for d in diffs} == {"taa"}
    assert all("alias graph" in d["reason"] for d in diffs)
    gpt4o = athena["gpt-4o"]["report"]["tasks"]["taa"]
    assert gpt4o["agree"] == 47 and gpt4o["differ"] == 3
    assert athena["gpt-4o"]["run"]["agreement"]["taa"] == "47/50"


def test_athena_summary_equals_released_aggregation(athena, athena_source):
    for model, run in athena.items():
        results = {r["task"]: r for r in run["summary"]["results"]}
        for task in ("mcq", "ate", "rms", "rcm", "vsp"):
            values = [
                v
                for v in (_released_value(task, row) for row in _released_rows(athena_source, model, task))
                if v is not None
            ]
            assert results[task]["score"] == pytest.approx(sum(values) / len(values), abs=1e-12), (model, task)
            assert results[task]["n_valid"] == len(values) or results[task]["denominator"] == "total"
        released = run["report"]["tasks"]
        assert all(
            released[t]["released_score"] == pytest.approx(results[t]["score"]) for t in ATHENA_FILES if t != "taa"
        )
        (bench,) = run["summary"]["benchmarks"]
        assert bench["method"] == "macro" and bench["score"] == pytest.approx(
            sum(r["score"] for r in results.values()) / 6
        )
    vsp = {r["task"]: r for r in athena["Qwen/Qwen3-4B-Instruct-2507"]["summary"]["results"]}["vsp"]
    assert vsp["n"] == 200 and vsp["n_valid"] == 110 and vsp["denominator"] == "valid"
    assert 100 * vsp["score"] == pytest.approx(78.2, abs=0.05)  # the released 78.2 over valid rows
    qwen = athena["Qwen/Qwen3-4B-Instruct-2507"]["report"]["benchmark"]
    assert qwen["score"] == pytest.approx(qwen["released_score"])  # no TAA difference for this model


# --------------------------------------------------------------------------- CTI-Bench


def test_cti_one_run_directory_per_model(cti, cti_source):
    assert sorted(cti) == ["ChatGPT-3.5", "ChatGPT-4", "Gemini-1.5", "LLAMA3-70B", "LLAMA3-8B"]
    for run in cti.values():
        meta = run["run"]
        assert meta["source"]["kind"] == "cti-bench-responses" and meta["source"]["raw_outputs_published"] is False
        assert "not published" in meta["source"]["note"] and "manually" in meta["source"]["note"]
        assert sorted(meta["pipeline_cards"]) == sorted(f"cti_bench.{t}" for t in CTI_COUNTS)
        assert meta["pipeline_cards"]["cti_bench.taa"]["overrides"] == {"extraction.rule": "whole_answer"}
        assert Counter(r["task"] for r in run["records"]) == CTI_COUNTS
        assert all(r["raw_output"] == r["released_prediction"] for r in run["records"])
        Record.model_validate(run["records"][0])
    gemini = cti["Gemini-1.5"]["records"][0]["request"]
    assert [m["role"] for m in gemini["messages"]] == ["user"] and gemini["adjustments"]
    assert [m["role"] for m in cti["ChatGPT-4"]["records"][0]["request"]["messages"]] == ["system", "user"]


def test_cti_chatgpt4_reproduces_the_notebook(cti):
    results = {r["task"]: r for r in cti["ChatGPT-4"]["summary"]["results"]}
    assert results["mcq"]["denominator"] == "valid" and 100 * results["mcq"]["score"] == pytest.approx(71.0)
    assert 100 * results["rcm"]["score"] == pytest.approx(72.0)
    assert 100 * results["rcm_2021"]["score"] == pytest.approx(68.0)
    assert results["vsp"]["lower_is_better"] and results["vsp"]["score"] == pytest.approx(1.31)
    assert results["taa"]["n_correct"] == 26 and 100 * results["taa"]["score"] == pytest.approx(52.0)
    assert 100 * results["taa"]["extras"]["plausible"] == pytest.approx(86.0)


def test_cti_report_lists_answers_the_released_scorer_leaves_out(cti):
    report = cti["Gemini-1.5"]["report"]
    rcm = {r["task"]: r for r in cti["Gemini-1.5"]["summary"]["results"]}["rcm"]
    assert report["tasks"]["rcm"]["prediction_differ"] == rcm["n"] - rcm["n_valid"] > 0
    assert all(d["reason"].startswith("not counted") for d in report["differences"])
    assert cti["ChatGPT-4"]["report"]["differences"] == []


# --------------------------------------------------------------------------- bad input


def test_missing_file_is_one_clear_error(tmp_path, real_data, capsys):
    (tmp_path / "src" / "some-model").mkdir(parents=True)
    (tmp_path / "src" / "some-model" / "ATE-scored.jsonl").write_text("{}\n")
    assert _import("athenabench-runs", tmp_path / "src", tmp_path / "out", real_data) == 2
    err = capsys.readouterr().err
    assert "MCQ3k-scored.jsonl" in err and "not found" in err
    assert not (tmp_path / "out").exists()


def test_mismatched_row_names_file_and_row(tmp_path, real_data, athena_source, capsys):
    src = tmp_path / "src" / "m"
    src.mkdir(parents=True)
    rows = _released_rows(athena_source, "gpt-4", "mcq")
    rows[4]["prompt"] += " (changed)"
    (src / "MCQ3k-scored.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _import("athenabench-runs", tmp_path / "src", tmp_path / "out", real_data) == 2
    err = capsys.readouterr().err
    assert "MCQ3k-scored.jsonl: line 5: prompt does not match row 5" in err
    rows[4] = {"prompt": rows[4]["prompt"]}
    (src / "MCQ3k-scored.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _import("athenabench-runs", tmp_path / "src", tmp_path / "out", real_data) == 2
    assert "MCQ3k-scored.jsonl: line 5: missing field 'response'" in capsys.readouterr().err
    (src / "MCQ3k-scored.jsonl").write_text("{not json\n")
    assert _import("athenabench-runs", tmp_path / "src", tmp_path / "out", real_data) == 2
    assert "MCQ3k-scored.jsonl: line 1: invalid JSON" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_malformed_tsv_row_names_file_and_row(tmp_path, real_data, cti_source, capsys):
    src = tmp_path / "responses"
    src.mkdir()
    (src / "cti-mcq-responses.tsv").write_text("GT\tModel-A\nA\tB\nB\n")
    assert _import("cti-bench-responses", src, tmp_path / "out", real_data) == 2
    err = capsys.readouterr().err
    assert "cti-mcq-responses.tsv: row 3: expected 2 columns" in err
    (src / "cti-mcq-responses.tsv").write_text("GT\tModel-A\nA\tB\n")
    assert _import("cti-bench-responses", src, tmp_path / "out", real_data) == 2
    assert "1 rows, but" in capsys.readouterr().err
    assert _import("cti-bench-responses", tmp_path / "nowhere", tmp_path / "out", real_data) == 2
    assert "not a directory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
