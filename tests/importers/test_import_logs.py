"""``benchaudit import inspect | lm-eval | every-eval-ever``: other harnesses' logs as run directories.

The logs under ``tests/fixtures/imports/logs/`` were made by the real packages (inspect-ai 0.3.285
with inspect-evals 0.26.0, inspect-ai 0.3.140, lm-eval 0.4.13) against the scripted server, on
made-up questions (README there).  Oracles: hand counts of the scripted answers (below), the
harness's own reported metric read from its files with the standard library (the old ``.eval``
is deflate, readable by :mod:`zipfile`; lm-eval's results are JSON), and, where the packages are
installed, inspect_ai's own ``read_eval_log``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from helpers.toy_benchmark_data import toy_data_dir
from pytest_benchaudit.cli.app import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
LOGS = FIXTURES / "logs"
DATA = toy_data_dir()  # the made-up questions the logs were made on, written to a temporary folder
SUITES = Path(__file__).resolve().parents[2] / "suites"

# Hand count of the scripted answers (make_logs.reply_for) over the samples Inspect scores (toy-4
# errors in every epoch): toy-1 right, toy-2 right for m1 only, toy-3 cut at the budget, toy-5 C then
# D (gold C), toy-6 unreadable.  m1: (1 + 1 + 0 + 0.5 + 0) / 5; m2: (1 + 0 + 0 + 0.5 + 0) / 5.
TOY_ACCURACY = {"openai-api/local/m1": 0.5, "openai-api/local/m2": 0.3}


def _import(tmp_path: Path, *args: Any, data: Path = DATA) -> int:
    return main(
        [
            "import",
            *map(str, args),
            "--report-dir",
            str(tmp_path / "reports"),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(data),
        ]
    )


def _runs(tmp_path: Path) -> list[Path]:
    root = tmp_path / "reports"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _new_logs() -> list[Path]:
    logs = sorted((LOGS / "inspect-new").glob("*toy-mcq*.eval"))
    assert len(logs) == 2, "the fixture holds the toy task for two models"
    return logs


# ------------------------------------------------------------------------------------------ Inspect


def test_inspect_eval_zstd_two_models_epochs_headline_equals_the_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(tmp_path, "inspect", *_new_logs()) == 0
    runs = _runs(tmp_path)
    assert len(runs) == 2
    for run in runs:
        report = _json(run / "import_report.json")
        summary = _json(run / "summary.json")["results"][0]
        assert report["equal"] and summary["score"] == pytest.approx(TOY_ACCURACY[report["model"]], abs=1e-12)
        assert report["reported"] == pytest.approx(TOY_ACCURACY[report["model"]], abs=1e-12)
        assert summary["denominator"] == "valid" and summary["n"] == 12 and summary["repeats"] == 2
        records = _records(run)
        errored = [r for r in records if r["question_id"] == "toy-4"]
        assert [r["invalid_reason"] for r in errored] == ["inference_error"] * 2
        assert all("400" in (r["error"] or "") or "refus" in (r["error"] or "") for r in errored)
        cut = [r for r in records if r["question_id"] == "toy-3"]
        assert {r["finish_reason"] for r in cut} == {"length"}
        flip = sorted((r["repeat"], r["released_prediction"]) for r in records if r["question_id"] == "toy-5")
        assert flip == [(0, "C"), (1, "D")]
        card = _json(run / "run.json")["pipeline_cards"]["inspect.toy_mcq"]
        assert card["pipeline"] == "imported" and card["fields"]["extraction.rule"] == "unspecified"
        assert card["why"]["inference.repeats"] == "eval.config.epochs"


def test_inspect_old_deflate_and_json_logs_read_as_the_stdlib_reads_them(tmp_path: Path) -> None:
    old = sorted((LOGS / "inspect-old").glob("*.eval"))
    json_logs = sorted((LOGS / "inspect-old").glob("*.json"))
    assert old and json_logs
    # The oracle: the harness's own number read with the standard library (deflate entries).
    with zipfile.ZipFile(old[0]) as archive:
        header = json.loads(archive.read("header.json"))
    reported = header["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    assert _import(tmp_path, "inspect", old[0]) == 0
    (run,) = _runs(tmp_path)
    assert _json(run / "summary.json")["results"][0]["score"] == pytest.approx(reported, abs=1e-12)
    assert header["eval"]["packages"]["inspect_ai"] == "0.3.140"
    shutil.rmtree(tmp_path / "reports")
    assert _import(tmp_path, json_logs[0]) == 0  # detected: an Inspect .json log
    (run,) = _runs(tmp_path)
    log = _json(json_logs[0])
    assert _json(run / "summary.json")["results"][0]["score"] == pytest.approx(
        log["results"]["scores"][0]["metrics"]["accuracy"]["value"], abs=1e-12
    )


def test_diagnose_and_compare_work_on_imported_generic_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _import(tmp_path, "inspect", *_new_logs()) == 0
    runs = _runs(tmp_path)
    capsys.readouterr()
    assert main(["diagnose", str(runs[0])]) in (0, 1)
    out = capsys.readouterr().out
    assert "FM03" in out  # the reply cut at the token budget
    assert main(["compare", *map(str, runs), "--out", str(tmp_path / "cmp")]) == 0
    compare = _json(tmp_path / "cmp" / "compare.json")
    text = json.dumps(compare)
    assert "holm" in text.lower()
    assert (
        main(["export", str(runs[0]), "--format", "every-eval-ever", "--out", str(tmp_path / "eee"), "--samples"]) == 0
    )
    assert main(["audit", *map(str, runs), "--out", str(tmp_path / "audit")]) == 0
    assert (tmp_path / "audit" / "report.html").is_file()


@pytest.mark.parametrize(
    "case", ["cut", "corrupt_entry", "status", "version", "duplicate", "pair", "no_samples", "mismatch"]
)
def test_inspect_bad_input_is_one_error_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    src = sorted((LOGS / "inspect-old").glob("*.json"))[0]
    bad = tmp_path / "bad"
    bad.mkdir()
    if case == "cut":
        data = _new_logs()[0].read_bytes()
        target = bad / "cut.eval"
        target.write_bytes(data[: len(data) * 2 // 3])
        expect = "cut short or corrupt"
    elif case == "corrupt_entry":
        data = bytearray(_new_logs()[0].read_bytes())
        with zipfile.ZipFile(_new_logs()[0]) as archive:
            info = archive.getinfo("samples/toy-1_epoch_1.json")
        at = info.header_offset + 30 + len(info.filename) + 20
        data[at : at + 8] = b"\x00" * 8
        target = bad / "corrupt.eval"
        target.write_bytes(bytes(data))
        expect = "samples/toy-1_epoch_1.json"
    else:
        log = _json(src)
        target = bad / "log.json"
        if case == "status":
            log["status"] = "cancelled"
            expect = "status is 'cancelled'"
        elif case == "version":
            log["version"] = 3
            expect = "version 3 is newer"
        elif case == "duplicate":
            log["samples"].append(log["samples"][0])
            expect = "appears twice"
        elif case == "no_samples":  # what --no-log-samples writes
            del log["samples"]
            expect = "holds no samples"
        elif case == "mismatch":  # one sample's own score no longer gives the reported accuracy
            sample = next(s for s in log["samples"] if s["id"] == "toy-1")
            sample["scores"]["choice"]["value"] = "I"
            expect = "first difference: sample 'toy-1'"
        else:
            (bad / "again.json").write_text(json.dumps(log))
            expect = "both logs of task"
        target.write_text(json.dumps(log))
    rc = _import(tmp_path, "inspect", bad if case == "pair" else target)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert expect in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_a_headline_mismatch_names_the_task_both_numbers_and_the_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _json(sorted((LOGS / "inspect-old").glob("*.json"))[0])
    reported = log["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    next(s for s in log["samples"] if s["id"] == "toy-2")["scores"]["choice"]["value"] = "I"
    bad = tmp_path / "log.json"
    bad.write_text(json.dumps(log))
    assert _import(tmp_path, "inspect", bad) == 2
    err = capsys.readouterr().err
    assert "toy_mcq" in err and f"reported {reported:.6g}" in err and "sample 'toy-2'" in err


def test_zstd_entries_of_several_frames_are_read_whole() -> None:
    import zstandard

    from pytest_benchaudit.importers.eval_archive import _decompress

    data = json.dumps({"id": "x", "text": "y" * 5000}).encode()
    frames = zstandard.ZstdCompressor().compress(data[:3000]) + zstandard.ZstdCompressor().compress(data[3000:])
    assert _decompress(frames, 93, "test", len(data)) == data


# ------------------------------------------------------------------------------------------ lm-eval


def _lm_eval_reported(model: str, task: str, key: str) -> float:
    (results,) = (LOGS / "lm-eval" / model).glob("results_*.json")
    return float(_json(results)["results"][task][key])


def test_lm_eval_known_tasks_land_on_the_peer_layers_and_generic_tasks_import(tmp_path: Path) -> None:
    assert _import(tmp_path, "lm-eval", LOGS / "lm-eval") == 0
    runs = {
        (_json(r / "import_report.json")["task"], _json(r / "import_report.json")["model"]): r for r in _runs(tmp_path)
    }
    assert len(runs) == 6
    for model in ("m1", "m2"):
        ll = runs[("mmlu_computer_security", model)]
        result = _json(ll / "summary.json")["results"][0]
        assert result["pipeline"] == "lm_eval" and result["task"] == "mcq"
        assert result["score"] == pytest.approx(_lm_eval_reported(model, "mmlu_computer_security", "acc,none"))
        gen = runs[("mmlu_computer_security_generative|get_response", model)]
        result = _json(gen / "summary.json")["results"][0]
        assert result["pipeline"] == "lm_eval_generative"
        assert result["score"] == pytest.approx(
            _lm_eval_reported(model, "mmlu_computer_security_generative", "exact_match,get_response")
        )
        toy = runs[("toy_generate", model)]
        assert _json(toy / "summary.json")["results"][0]["pipeline"] == "imported"
        rec = _records(ll)[0]
        assert rec["request"]["continuations"] == [" A", " B", " C", " D"]
        assert len(rec["continuations"]) == 4


def test_matched_lm_eval_run_rescores_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _import(tmp_path, "lm-eval", LOGS / "lm-eval" / "m1") == 0
    run = next(r for r in _runs(tmp_path) if r.name.endswith("mmlu_computer_security-m1"))
    imported = _json(run / "summary.json")["results"][0]
    monkeypatch.setenv("BENCHAUDIT_DATA", str(DATA))
    # Re-reading with the layer's own rule changes nothing (the stored log-likelihoods are what it reads).
    assert (
        main(
            [
                "rescore",
                str(run),
                "--set",
                "extraction.rule=lm_eval_loglikelihood",
                "--report-dir",
                str(tmp_path / "same"),
            ]
        )
        == 0
    )
    (same,) = [p for p in (tmp_path / "same").iterdir() if p.is_dir()]
    assert _json(same / "summary.json")["results"][0]["score"] == pytest.approx(imported["score"])
    # Under MMLU's released reader (first-token log-probabilities, which a log-likelihood log has not):
    # its quirk reads every answer as A, so the score is the share of gold A (hand count: 2 of 6).
    assert main(["rescore", str(run), "--pipeline", "released", "--report-dir", str(tmp_path / "released")]) == 0
    (released,) = [p for p in (tmp_path / "released").iterdir() if p.is_dir()]
    result = _json(released / "summary.json")["results"][0]
    assert result["pipeline"] == "released" and result["n"] == 6
    golds = [
        line.rsplit(",", 1)[1].strip()
        for line in (DATA / "mmlu-computer-security" / "computer_security_test.csv").read_text().splitlines()
    ]
    assert result["score"] == pytest.approx(golds.count("A") / len(golds))


def test_a_near_miss_names_the_first_differing_field_and_imports_generic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "edited"
    shutil.copytree(LOGS / "lm-eval" / "m1", folder)
    (samples,) = folder.glob("samples_mmlu_computer_security_2*.jsonl")
    lines = samples.read_text().splitlines()
    first = json.loads(lines[0])
    for arg in first["arguments"].values():
        arg["arg_0"] = arg["arg_0"].replace("about computer security", "about  computer security")
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert _import(tmp_path, "lm-eval", folder) == 0
    run = next(r for r in _runs(tmp_path) if r.name.endswith("-mmlu_computer_security-m1"))
    report = _json(run / "import_report.json")
    assert report["layer"] == "imported" and report["matched"] is None
    assert any("prompt" in miss and "they part at character" in miss for miss in report["near_misses"])


def test_lm_eval_without_log_samples_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _import(tmp_path, "lm-eval", LOGS / "lm-eval-no-samples") == 2
    err = capsys.readouterr().err
    assert "--log_samples" in err and "Traceback" not in err


# ------------------------------------------------------------------------------- Every Eval Ever


def test_every_eval_ever_round_trip_keeps_the_headline_and_each_record(tmp_path: Path) -> None:
    assert _import(tmp_path, "lm-eval", LOGS / "lm-eval" / "m1") == 0
    run = next(r for r in _runs(tmp_path) if r.name.endswith("mmlu_computer_security-m1"))
    assert main(["export", str(run), "--format", "every-eval-ever", "--out", str(tmp_path / "eee"), "--samples"]) == 0
    shutil.move(str(tmp_path / "reports"), str(tmp_path / "first"))
    run = tmp_path / "first" / run.name
    assert _import(tmp_path, tmp_path / "eee") == 0
    (back,) = _runs(tmp_path)
    before, after = _json(run / "summary.json")["results"][0], _json(back / "summary.json")["results"][0]
    assert after["score"] == pytest.approx(before["score"]) and after["n"] == before["n"]
    assert after["n_valid"] == before["n_valid"] and after["denominator"] == before["denominator"]
    pairs = {(r["question_id"], r["score"], r["valid"]) for r in _records(run)}
    assert {(r["question_id"], r["score"], r["valid"]) for r in _records(back)} == pairs


# ------------------------------------------------------------------------ the peers' own readers


def _peer_python() -> str | None:
    return os.environ.get("BENCHAUDIT_INSPECT_PYTHON")


@pytest.mark.skipif(
    _peer_python() is None,
    reason="set BENCHAUDIT_INSPECT_PYTHON to a Python with inspect_ai "
    "installed to cross-check the reading against inspect_ai.log.read_eval_log",
)
def test_reading_equals_inspect_ais_own_reader(tmp_path: Path) -> None:
    script = (
        "import json, sys\nfrom inspect_ai.log import read_eval_log\nlog = read_eval_log(sys.argv[1])\n"
        "print(json.dumps({'acc': log.results.scores[0].metrics['accuracy'].value, 'samples': "
        "[[str(s.id), s.epoch, s.output.completion, (s.output.choices[0].stop_reason if s.output.choices "
        "else None)] for s in log.samples]}))"
    )
    for log in [*_new_logs(), *sorted((LOGS / "inspect-old").glob("*"))]:
        theirs = json.loads(subprocess.check_output([str(_peer_python()), "-c", script, str(log)], text=True))
        out = tmp_path / log.name
        assert main(["import", "inspect", str(log), "--report-dir", str(out)]) == 0
        (run,) = [p for p in out.iterdir() if p.is_dir()]
        records = {(r["question_id"], r["repeat"] + 1): r for r in _records(run)}
        assert _json(run / "summary.json")["results"][0]["score"] == pytest.approx(theirs["acc"], abs=1e-12)
        for sid, epoch, completion, stop in theirs["samples"]:
            assert records[(sid, epoch)]["raw_output"] == completion
            assert records[(sid, epoch)]["finish_reason"] == (
                "length" if stop in ("max_tokens", "model_length") else stop
            )


def test_inspect_evals_cybermetric_log_is_the_inspect_evals_layer_and_rescores_under_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = sorted((LOGS / "inspect-new").glob("*cybermetric-80*.eval"))
    assert len(logs) == 2
    assert _import(tmp_path, "inspect", *logs) == 0
    runs = _runs(tmp_path)
    for run in runs:
        report = _json(run / "import_report.json")
        assert report["matched"] == "cybermetric.cm80 inspect_evals" and report["equal"]
        result = _json(run / "summary.json")["results"][0]
        assert result["pipeline"] == "inspect_evals" and result["score"] == pytest.approx(report["reported"])
        for rec in _records(run):  # the harness's own reading equals the layer's inspect_choice reading
            assert rec["prediction"] == rec["released_prediction"]
    monkeypatch.setenv("BENCHAUDIT_DATA", str(DATA))
    assert main(["rescore", str(runs[0]), "--pipeline", "released", "--report-dir", str(tmp_path / "re")]) == 0
    (rescored,) = [p for p in (tmp_path / "re").iterdir() if p.is_dir()]
    assert _json(rescored / "summary.json")["results"][0]["pipeline"] == "released"
    assert (
        main(
            [
                "audit",
                *map(str, runs),
                "--toward",
                "released",
                "--out",
                str(tmp_path / "audit"),
                "--data-dir",
                str(DATA),
            ]
        )
        == 0
    )
    audit = _json(tmp_path / "audit" / "audit.json")
    assert "prompt.template" in json.dumps(audit)  # the upstream difference is named, not re-scored


# ------------------------------------------------------------------------- reading on the second core


def _numbers_then_error(n: int, fail_at: int | None = None) -> Any:
    from pytest_benchaudit.importers.common import ImportSourceError

    def make() -> Any:
        for i in range(n):
            if i == fail_at:
                raise ImportSourceError(f"log.eval: entry {i}: corrupt")
            yield {"i": i}

    return make


def test_samples_read_in_a_child_come_back_in_order_and_its_errors_are_ours() -> None:
    from pytest_benchaudit.importers.common import ImportSourceError
    from pytest_benchaudit.importers.sample_feed import feed

    assert [x["i"] for x in feed(_numbers_then_error(3000), 3000)] == list(range(3000))  # type: ignore[index]
    got: list[Any] = []
    with pytest.raises(ImportSourceError, match="log.eval: entry 1500: corrupt"):
        for x in feed(_numbers_then_error(3000, fail_at=1500), 3000):
            got.append(x)
    assert len(got) <= 1500  # whole batches before the error, never one after it
    stream = feed(_numbers_then_error(100_000), 100_000)
    assert next(iter(stream)) == {"i": 0}
    stream.close()  # type: ignore[attr-defined]  # a consumer that stops early ends the child (no hang)


def test_a_bare_import_detects_each_path_s_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cyber = sorted((LOGS / "inspect-new").glob("*cybermetric-80*.eval"))[0]
    assert _import(tmp_path, cyber, LOGS / "lm-eval" / "m2") == 0
    out = capsys.readouterr().out
    assert f"detected inspect in {cyber}" in out and "detected lm-eval in" in out
    harnesses = sorted(_json(r / "import_report.json")["harness"] for r in _runs(tmp_path))
    assert harnesses == ["inspect", "lm-eval", "lm-eval", "lm-eval"]
