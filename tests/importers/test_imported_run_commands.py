"""The offline commands docs/import.md shows, on imported runs: ``plan`` (an imported task has no suite: its runs
say what it is), ``sweep`` (a generic task's extraction and scoring are the harness's own: one clear error), and
``export`` -> ``import`` of a run asked several times (each epoch comes back as its own record).

Oracles: the log itself read with the standard library (the old Inspect logs are deflate zip entries) for the
scores, numpy for the variance components of docs/statistics.md, and the same scores planned under their suite
(a metamorphic pair: a task's plan may not depend on whether a suite names it).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.toy_benchmark_data import toy_data_dir
from pytest_benchaudit.cli.app import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
LOGS = FIXTURES / "logs"
DATA = toy_data_dir()  # the made-up questions the logs were made on, written to a temporary folder
SUITES = Path(__file__).resolve().parents[2] / "suites"
# Inspect's score values as the first scorer writes them (an errored sample has none: its record scores 0).
VALUE = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


def _import(tmp_path: Path, *args: Any, out: str = "reports") -> list[Path]:
    root = tmp_path / out
    assert (
        main(
            ["import", *map(str, args), "--report-dir", str(root), "--suites-dir", str(SUITES), "--data-dir", str(DATA)]
        )
        == 0
    )
    return sorted(p for p in root.iterdir() if p.is_dir())


def _plan(capsys: pytest.CaptureFixture[str], *args: Any) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", *map(str, args), "--suites-dir", str(SUITES), "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _log_scores(log: Path) -> tuple[str, dict[str, list[float]]]:
    """(model, sample id -> its scores by epoch) read from an Inspect .eval with zipfile and json alone."""
    with zipfile.ZipFile(log) as archive:
        model = json.loads(archive.read("header.json"))["eval"]["model"]
        by_epoch: dict[str, dict[int, float]] = defaultdict(dict)
        for name in archive.namelist():
            if name.startswith("samples/"):
                sample = json.loads(archive.read(name))
                scores = sample.get("scores") or {}
                value = VALUE[next(iter(scores.values()))["value"]] if scores and not sample.get("error") else 0.0
                by_epoch[str(sample["id"])][int(sample["epoch"])] = value
    return model, {q: [e[k] for k in sorted(e)] for q, e in by_epoch.items()}


def test_plan_on_imported_inspect_runs_measures_the_logs_own_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = sorted((LOGS / "inspect-old").glob("*toy-mcq*.eval"))
    assert len(logs) == 2, "the fixture holds the toy task for two models, two epochs each"
    _import(tmp_path, "inspect", *logs)
    plan = _plan(capsys, "--task", "inspect.toy_mcq", "--mde", "0.2", "--from", tmp_path / "reports")
    (model_a, a), (model_b, b) = (_log_scores(log) for log in logs)
    # toy-1 .. toy-6: the log's eval.dataset.samples (run.json source.dataset_questions)
    assert plan["task_questions"] == 6 and plan["task_questions_from"] == "log"
    assert sorted(plan["models"]) == sorted([model_a, model_b]) and plan["metric"] == "inspect:choice/accuracy"
    # docs/statistics.md's components, in numpy: D_i the difference of the question means, s2 ddof 1.
    qs = sorted(a)
    diffs = np.array([np.mean(a[q]) - np.mean(b[q]) for q in qs])
    s2 = np.array([[np.var(a[q], ddof=1), np.var(b[q], ddof=1)] for q in qs])
    within = float(np.mean(s2.sum(axis=1)))
    between = max(float(np.var(diffs, ddof=1)) - float(np.mean(s2.sum(axis=1) / 2)), 0.0)
    assert plan["variances"]["within"] == pytest.approx(within, abs=1e-12)
    assert plan["variances"]["between"] == pytest.approx(between, abs=1e-12)
    assert plan["variances"]["repeats"] == 2 and plan["variances"]["within_measured"]


def test_an_imported_task_plans_as_its_suite_task_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same records planned as the suite task cybermetric.cm80 and as a suite-less imported task."""
    runs = _import(tmp_path, "inspect", *sorted((LOGS / "inspect-new").glob("*cybermetric-80*.eval")))
    suite_plan = _plan(capsys, "--task", "cybermetric.cm80", "--mde", "0.3", "--data-dir", DATA, "--from", *runs)
    for run in runs:  # the same scores under a benchmark no suite names
        lines = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
        (run / "records.jsonl").write_text(
            "".join(json.dumps({**r, "benchmark": "inspect", "task": "cm80_log"}) + "\n" for r in lines)
        )
        meta = json.loads((run / "run.json").read_text())
        card = meta["pipeline_cards"].pop("cybermetric.cm80")
        meta["pipeline_cards"]["inspect.cm80_log"] = {**card, "benchmark": "inspect", "task": "cm80_log"}
        (run / "run.json").write_text(json.dumps(meta))
    imported_plan = _plan(capsys, "--task", "inspect.cm80_log", "--mde", "0.3", "--from", *runs)
    assert suite_plan["task_questions"] == 6 and suite_plan["task_questions_from"] == "data"
    assert imported_plan["task_questions_from"] == "log"
    for key in ("task_questions", "metric", "variances", "rows", "best", "questions_any_repeats", "discordance"):
        assert imported_plan[key] == suite_plan[key], key


def test_plan_of_an_imported_task_without_runs_or_with_a_wrong_name_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _import(tmp_path, "inspect", *sorted((LOGS / "inspect-new").glob("*toy-mcq*.eval")))
    capsys.readouterr()
    assert main(["plan", "--task", "inspect.toy_mcq", "--mde", "0.2", "--suites-dir", str(SUITES)]) == 2
    err = capsys.readouterr().err
    assert "--from RUN" in err and "Traceback" not in err
    assert (
        main(["plan", "--task", "inspect.toy", "--mde", "0.2", "--suites-dir", str(SUITES), "--from", *map(str, runs)])
        == 2
    )
    err = capsys.readouterr().err
    assert "toy_mcq" in err and err.count("\n") == 1  # one line: the tasks the runs hold, the near name


def test_sweep_of_a_generic_imported_task_is_one_error_and_of_a_matched_one_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHAUDIT_DATA", str(DATA))
    (generic, *_) = _import(tmp_path, "inspect", *sorted((LOGS / "inspect-new").glob("*toy-mcq*.eval")))
    capsys.readouterr()
    assert main(["sweep", str(generic), "--vary", "scoring.invalid_credit=0,0.25", "--suites-dir", str(SUITES)]) == 2
    err = capsys.readouterr().err
    assert "nothing to sweep" in err and "inspect.toy_mcq" in err and "Traceback" not in err
    (matched, *_) = _import(
        tmp_path, "inspect", *sorted((LOGS / "inspect-new").glob("*cybermetric-80*.eval")), out="matched"
    )
    assert main(["sweep", str(matched), "--vary", "scoring.invalid_credit=0,0.25", "--suites-dir", str(SUITES)]) == 0
    assert "invalid_credit=0.25" in capsys.readouterr().out


def test_an_exported_run_of_several_epochs_imports_back_epoch_by_epoch(tmp_path: Path) -> None:
    (run, *_) = _import(tmp_path, "inspect", *sorted((LOGS / "inspect-new").glob("*toy-mcq*.eval")))
    assert main(["export", str(run), "--format", "every-eval-ever", "--out", str(tmp_path / "eee"), "--samples"]) == 0
    shutil.move(str(tmp_path / "reports"), str(tmp_path / "first"))
    (back,) = _import(tmp_path, tmp_path / "eee")
    before = [json.loads(line) for line in (tmp_path / "first" / run.name / "records.jsonl").read_text().splitlines()]
    after = [json.loads(line) for line in (back / "records.jsonl").read_text().splitlines()]
    assert len({r["repeat"] for r in before}) == 2  # two epochs
    assert sorted((r["question_id"], r["repeat"], r["score"], r["valid"]) for r in after) == sorted(
        (r["question_id"], r["repeat"], r["score"], r["valid"]) for r in before
    )
    summary = [
        json.loads((d / "summary.json").read_text())["results"][0] for d in (tmp_path / "first" / run.name, back)
    ]
    assert summary[1]["score"] == pytest.approx(summary[0]["score"]) and summary[1]["repeats"] == 2


# ------------------------------------------------------------------ lm-eval: truncation is not recorded


def test_lm_eval_truncation_reads_not_recorded_never_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scripted server cut the ``[trunc]`` reply at the token budget (finish_reason ``length``, make_logs.py)
    for lm-eval as for Inspect; lm-eval's samples keep no finish reason, so the run and its audit say so."""
    import jsonschema

    runs = _import(tmp_path, "lm-eval", LOGS / "lm-eval" / "m1", LOGS / "lm-eval" / "m2")
    generate = [r for r in runs if "toy_generate" in r.name]
    loglikelihood = next(r for r in runs if r.name.endswith("mmlu_computer_security-m1"))
    samples = next((LOGS / "lm-eval" / "m1").glob("samples_toy_generate_*.jsonl")).read_text()
    assert "[trunc]" in samples and "finish" not in samples and "stop_reason" not in samples  # the log: no trace
    for run in generate:
        meta = json.loads((run / "run.json").read_text())
        assert meta["source"]["not_recorded"] == {"finish_reason": "not recorded by lm-eval"}
        assert json.loads((run / "import_report.json").read_text())["not_recorded"] == meta["source"]["not_recorded"]
        assert all(
            json.loads(line)["finish_reason"] is None for line in (run / "records.jsonl").read_text().splitlines()
        )
    # A log-likelihood task generates nothing: no truncation to record.
    assert "not_recorded" not in json.loads((loglikelihood / "run.json").read_text())["source"]
    capsys.readouterr()
    assert main(["show", str(generate[0])]) == 0
    shown = capsys.readouterr().out
    assert "truncation: not recorded by lm-eval" in shown and "truncated: 0" not in shown
    assert main(["diagnose", str(generate[0]), "--suites-dir", str(SUITES)]) == 0
    assert "not checked: FM03 (token-budget truncation)" in capsys.readouterr().out
    assert main(["diagnose", str(generate[0]), "--suites-dir", str(SUITES), "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["not_checked"]
    assert generate[0].name in line and "not recorded by lm-eval" in line
    assert (
        main(
            [
                "audit",
                *map(str, generate),
                "--out",
                str(tmp_path / "audit"),
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(DATA),
            ]
        )
        == 0
    )
    audit = json.loads((tmp_path / "audit" / "audit.json").read_text())
    schema = json.loads((SUITES.parent / "docs" / "schemas" / "audit.schema.json").read_text())
    jsonschema.validate(audit, schema)
    rows = [r for r in audit["scores"] if r["task"] == "toy_generate"]
    assert len(rows) == 2 and all(r["truncation"] == "not recorded by lm-eval" for r in rows)
    assert all("truncated" not in r.get("invalid_reasons", {}) for r in rows)
    assert sum("truncation not recorded by lm-eval" in n for n in audit["compare"]["sensitivity"]["notes"]) == 2
    assert "truncated: not recorded by lm-eval" in (tmp_path / "audit" / "report.html").read_text()


def test_an_inspect_log_records_its_finish_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same scripted cut, logged by Inspect (toy-3: stop_reason max_tokens): counted, and nothing said missing."""
    (run, *_) = _import(tmp_path, "inspect", *sorted((LOGS / "inspect-new").glob("*toy-mcq*.eval")))
    assert "not_recorded" not in json.loads((run / "run.json").read_text())["source"]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert {r["question_id"] for r in records if r["finish_reason"] == "length"} == {"toy-3"}
    capsys.readouterr()
    assert main(["show", str(run)]) == 0
    assert "truncation:" not in capsys.readouterr().out


def test_an_every_eval_ever_file_without_finish_reasons_says_so_too(tmp_path: Path) -> None:
    runs = _import(tmp_path, "lm-eval", LOGS / "lm-eval" / "m1")
    for name in ("toy_generate-m1", "mmlu_computer_security-m1"):
        run = next(r for r in runs if r.name.endswith(name))
        assert (
            main(["export", str(run), "--format", "every-eval-ever", "--out", str(tmp_path / "eee"), "--samples"]) == 0
        )
    back = {
        r.name.rsplit("-", 1)[0].split("every-eval-ever-")[1]: r
        for r in _import(tmp_path, tmp_path / "eee", out="back")
    }
    source = json.loads((back["toy_generate"] / "run.json").read_text())["source"]
    assert source["not_recorded"] == {"finish_reason": "not recorded in the Every Eval Ever file"}
    (mcq,) = [r for name, r in back.items() if name != "toy_generate"]  # log-likelihood: nothing generated
    assert "not_recorded" not in json.loads((mcq / "run.json").read_text())["source"]


# ------------------------------------------------------------------ the importers' shape


def test_each_log_importer_also_imports_one_source_as_the_released_importers_do(tmp_path: Path) -> None:
    """``import_runs(source, report_dir, suites_dir, data_dir, log)``: the released importers' call (one path),
    so one registry can hold both kinds; the run it writes is the one ``benchaudit import`` writes."""
    from pytest_benchaudit.importers.detect_format import LOG_IMPORTERS, detect

    log = sorted((LOGS / "inspect-new").glob("*toy-mcq*.eval"))[0]
    sources = {"inspect": log, "lm-eval": LOGS / "lm-eval" / "m1"}
    assert [imp.name for imp in LOG_IMPORTERS] == ["inspect", "lm-eval", "every-eval-ever"]
    for imp in LOG_IMPORTERS:
        assert imp.help and callable(imp.detect)
        if imp.name not in sources:
            continue
        lines: list[str] = []
        runs = imp.import_runs(sources[imp.name], tmp_path / imp.name, SUITES, str(DATA), log=lines.append)
        assert detect(sources[imp.name]) is imp and runs and lines
        cli = _import(tmp_path, imp.name, sources[imp.name], out=f"cli-{imp.name}")
        for mine, theirs in zip(
            sorted(runs, key=lambda r: r.path.name.split("-", 2)[2]), sorted(cli, key=lambda p: p.name.split("-", 2)[2])
        ):
            assert (mine.path / "summary.json").read_text() == (theirs / "summary.json").read_text()


def test_plan_of_a_subset_run_takes_the_dataset_size_its_log_states(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log of a --limit run holds fewer samples than its dataset: the plan's size is the dataset's, as the
    header states it (eval.dataset.samples), not the questions the run holds; without that statement, the run's."""
    logs = sorted((LOGS / "inspect-old").glob("*toy-mcq*.eval"))
    runs = _import(tmp_path, "inspect", *logs)
    with zipfile.ZipFile(logs[0]) as archive:
        stated = json.loads(archive.read("header.json"))["eval"]["dataset"]["samples"]
    assert {json.loads((run / "run.json").read_text())["source"]["dataset_questions"] for run in runs} == {stated}
    for run in runs:  # as if the log stated a larger dataset than its --limit run asked
        meta = json.loads((run / "run.json").read_text())
        meta["source"]["dataset_questions"] = 500
        (run / "run.json").write_text(json.dumps(meta))
    plan = _plan(capsys, "--task", "inspect.toy_mcq", "--mde", "0.2", "--from", *runs)
    assert plan["task_questions"] == 500 and plan["task_questions_from"] == "log"
    for run in runs:  # no statement: the questions the runs hold
        meta = json.loads((run / "run.json").read_text())
        del meta["source"]["dataset_questions"]
        (run / "run.json").write_text(json.dumps(meta))
    plan = _plan(capsys, "--task", "inspect.toy_mcq", "--mde", "0.2", "--from", *runs)
    assert plan["task_questions"] == 6 and plan["task_questions_from"] == "runs"
