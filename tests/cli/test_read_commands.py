"""Issue 33, item 14 (read side): what every read command answers on the same bad run directories.

One damaged directory is one line with one exit status whatever the command (common/errors.py: 2 for
a path that is not a run directory or a bad option, 1 for a run directory that cannot be used); a record
of another run is refused by each naming ``file:line`` and why, or set aside with ``--skip-bad-records``
leaving every number as it was; an output folder among the runs read is refused; a misspelt name gets
the nearest; an error names the option the user gave (or says that a default does not fit).  The run
is real (a pytest run of the toy suite against the scripted server on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.cli_runs import cli, record_lines
from pytest_benchaudit.runs.store import ForeignRecord, load_run
from pytest_benchaudit.testing.runs import writer_lock_held


def _append(run: Path, record: dict[str, Any]) -> None:
    with (run / "records.jsonl").open("a") as fh:
        fh.write(json.dumps(record) + "\n")


_lines = record_lines


# --------------------------------------------------------------------------- a record of another run


def another_models(run: Path) -> None:
    """A record of a model the run never asked, as a script that concatenates two runs leaves it."""
    record = _lines(run)[0]
    _append(run, {**record, "model": "gpt-other"})


def another_pipelines(run: Path) -> None:
    """A record of this model and task made under another pipeline (another run's hash)."""
    record = _lines(run)[1]
    _append(run, {**record, "question_id": "t99", "pipeline_hash": "0123456789abcdef"})


def another_task(run: Path) -> None:
    record = _lines(run)[2]
    _append(run, {**record, "benchmark": "secbench", "task": "mcq"})


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (another_models, "model 'gpt-other' is not one the run asked (run.json models: toy-model)"),
        (another_pipelines, "its pipeline_hash '0123456789abcdef' is not the hash of the run's card for toy.mcq"),
        (another_task, "task secbench.mcq has no pipeline card in run.json (cards: toy.extra, toy.mcq)"),
    ],
)
def test_a_record_of_another_run_is_refused_naming_file_line_and_why(
    damage: Callable[[Path], None], why: str, toy_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage(toy_run)
    with pytest.raises(ForeignRecord, match="records.jsonl:14: not a record of this run: "):
        load_run(toy_run)
    for command, *extra in (
        ["summarize"],
        ["show"],
        ["export", "--out", toy_run.parent / "exp"],
        ["compare", "--out", toy_run.parent / "cmp"],
        ["diagnose"],
    ):
        rc, _, err = cli(capsys, command, toy_run, *extra)
        assert rc == 1 and len(err.strip().splitlines()) == 1, (command, err)
        assert f"records.jsonl:14: not a record of this run: {why}" in err, (command, err)


def test_set_aside_with_skip_bad_records_the_run_reads_as_it_was_written(
    toy_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Metamorphic: appending other runs' records, then setting them aside, changes no number."""
    rc, _, _ = cli(capsys, "summarize", toy_run)
    before = json.loads((toy_run / "summary.json").read_text())["results"]
    for damage in (another_models, another_pipelines, another_task):
        damage(toy_run)
    rc, _, err = cli(capsys, "summarize", toy_run, "--skip-bad-records")
    assert rc == 0 and "skipped 3 line(s) that are not records of this run" in err
    assert json.loads((toy_run / "summary.json").read_text())["results"] == before


# --------------------------------------------------------------------------- one directory, one exit status


def _bad_dirs(toy_run: Path) -> dict[str, tuple[Path, int]]:
    """Damaged copies of ``toy_run`` (its records.jsonl, run.json, summary.json): name -> (path, exit status)."""
    root = toy_run.parent.parent / "bad"
    root.mkdir()

    def copy(name: str) -> Path:
        shutil.copytree(toy_run, root / name)
        return root / name

    out: dict[str, tuple[Path, int]] = {"missing": (root / "nope", 2)}
    (root / "a-file").write_text("x")
    out["a file"] = (root / "a-file", 2)
    (root / "no-run-json").mkdir()
    out["a folder without run.json"] = (root / "no-run-json", 2)
    p = copy("run-json-not-json")
    (p / "run.json").write_text("{not json")
    out["run.json not JSON"] = (p, 1)
    p = copy("run-json-dir")
    (p / "run.json").unlink()
    (p / "run.json").mkdir()
    out["run.json a directory"] = (p, 1)
    p = copy("no-records")
    (p / "records.jsonl").unlink()
    out["no records.jsonl"] = (p, 1)
    p = copy("not-a-record")
    _append(p, {"x": 1})
    out["a line that is not a record"] = (p, 1)
    p = copy("another-model")
    another_models(p)
    out["a record of another model"] = (p, 1)
    p = copy("another-pipeline")
    another_pipelines(p)
    out["a record of another pipeline"] = (p, 1)
    p = copy("no-record-lines")
    (p / "records.jsonl").write_text("")
    out["no records in records.jsonl"] = (p, 1)
    p = copy("records-dir")
    (p / "records.jsonl").unlink()
    (p / "records.jsonl").mkdir()
    out["records.jsonl a directory"] = (p, 1)
    p = copy("records-nul")
    with (p / "records.jsonl").open("ab") as fh:
        fh.write(b"\0" * 4096)
    out["NUL bytes in records.jsonl"] = (p, 1)
    p = copy("records-fifo")
    (p / "records.jsonl").unlink()
    os.mkfifo(p / "records.jsonl")
    out["records.jsonl a FIFO"] = (p, 1)
    return out


# Every command that reads a run directory, with what it needs besides the run (outputs under {tmp}).
COMMANDS = {
    "show": [],
    "summarize": [],
    "rescore": ["--set", "scoring.denominator=valid", "--report-dir", "{tmp}/re"],
    "sweep": ["--vary", "scoring.denominator=valid"],
    "compare": ["--out", "{tmp}/cmp"],
    "export": ["--out", "{tmp}/exp"],
    "audit-gold": [],
    "judge-agreement": [],
    "diagnose": [],
    "sample": ["--for", "gold", "--out", "{tmp}/s.csv"],
    "audit": ["--out", "{tmp}/audit", "--toward", "released"],
    "plan": ["--task", "toy.mcq", "--mde", "0.1", "--from"],
    "card": [],
    "multiverse": ["--out", "{tmp}/mv"],
}
# card reads run.json only: the damage below run.json is not its to judge.
RUN_JSON_ONLY = {
    "missing",
    "a file",
    "a folder without run.json",
    "run.json not JSON",
    "run.json a directory",
    "in progress",
}


@pytest.mark.timeout(600)
def test_every_command_answers_one_bad_directory_with_one_exit_status(
    toy_run: Path, toy_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(toy_root)  # suites/ and data/ of the toy run
    monkeypatch.setenv("BENCHAUDIT_DATA", str(toy_root / "data"))
    cases = _bad_dirs(toy_run)
    held_run = toy_root / "bad" / "in-progress"
    shutil.copytree(toy_run, held_run)
    with writer_lock_held(held_run):
        cases["in progress"] = (held_run, 1)
        wrong: list[str] = []
        for name, (path, expected) in cases.items():
            for command, extra in COMMANDS.items():
                if command == "card" and name not in RUN_JSON_ONLY:
                    continue
                tmp = toy_root / "outputs" / command
                argv = [a.format(tmp=tmp) for a in extra]
                rc, _, err = cli(capsys, command, *argv, path)
                lines = [x for x in err.strip().splitlines() if not x.startswith("warning:")]
                if rc != expected or len(lines) != 1 or not lines[0].startswith(f"benchaudit {command}: "):
                    wrong.append(f"{name}: {command} -> {rc} (expected {expected}): {err.strip()[:300]}")
        assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------- outputs among the inputs


def test_rescore_refuses_to_write_into_the_folder_it_reads(toy_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = toy_run.parent  # a folder of run directories, as an import writes
    before = sorted(p.name for p in folder.iterdir())
    for target, why in (
        (folder, f"--report-dir {folder}: that is {folder}, which this command reads"),
        (folder / "std", f"--report-dir {folder / 'std'}: inside {folder}, which this command reads"),
        (toy_run, f"--report-dir {toy_run}: that is {toy_run}, which this command reads"),
        (toy_run / "x", f"--report-dir {toy_run / 'x'}: inside {toy_run}, which this command reads"),
    ):
        source = folder if target in (folder, folder / "std") else toy_run
        rc, _, err = cli(capsys, "rescore", source, "--set", "scoring.denominator=valid", "--report-dir", target)
        assert rc == 2 and why in err, err
    assert sorted(p.name for p in folder.iterdir()) == before and sorted(p.name for p in toy_run.iterdir()) == [
        "records.jsonl",
        "run.json",
        "summary.json",
    ]
    rc, out, err = cli(
        capsys, "rescore", folder, "--set", "scoring.denominator=valid", "--report-dir", folder.parent / "std"
    )  # beside it: as before
    assert rc == 0, err
    rc, _, err = cli(capsys, "audit", toy_run, "--out", toy_run / "audit", "--toward", "released")
    assert rc == 2 and f"--out {toy_run / 'audit'}: inside {toy_run}, which this command reads" in err


# --------------------------------------------------------------------------- names and options


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["card", "{run}", "--task", "mqc"], "--task mqc: no card for 'mqc' in this run (did you mean 'mcq'?)"),
        (["card", "toy", "--task", "mqc"], "toy has no task 'mqc' (did you mean 'mcq'?)"),
        (["card", "toy", "--pipeline", "relased"], "toy.mcq has no pipeline 'relased' (did you mean 'released'?)"),
        (
            ["compare", "{run}", "--out", "{tmp}/c", "--pipelines", "standardzed,released"],
            "no records under pipeline 'standardzed' (did you mean 'standardized'?)",
        ),
        (
            ["compare", "{run}", "--out", "{tmp}/c", "--similar", "toy.mqc~toy.extra"],
            "--similar toy.mqc~toy.extra: no scores for toy.mqc in these runs (did you mean 'toy.mcq'?)",
        ),
        (
            ["plan", "--task", "toy.mcq", "--mde", "0.1", "--from", "{run}", "--models", "toy-modl,x"],
            "--models 'toy-modl,x': give two of the runs' models, A,B (did you mean 'toy-model'?)",
        ),
        (
            ["audit-gold", "{run}", "--pipeline", "standardzed"],
            "--pipeline standardzed: no records under pipeline 'standardzed' (did you mean 'standardized'?)",
        ),
        (
            ["sample", "{run}", "--for", "gold", "--out", "{tmp}/s.csv", "--pipeline", "standardzed"],
            "--pipeline standardzed: no records under pipeline 'standardzed' (did you mean 'standardized'?)",
        ),
        (
            ["judge-agreement", "{run}", "--pipeline", "standardzed"],
            "--pipeline standardzed: no records under pipeline 'standardzed' (did you mean 'standardized'?)",
        ),
        (
            ["rescore", "{run}", "--set", "scoring.denominatr=valid"],
            "unknown field 'scoring.denominatr' (did you mean 'scoring.denominator'?)",
        ),
        (
            ["export", "{run}", "--format", "every-eval-evr"],
            "unknown format 'every-eval-evr' (did you mean 'every-eval-ever'?)",
        ),
        (["schema", "summry"], "schema 'summry': not a document (did you mean 'summary'?)"),
        # the option the user gave (or did not) is the one named
        (
            ["rescore", "{run}", "--pipeline", "relased"],
            "--pipeline relased: unknown pipeline layer 'relased' (did you mean 'released'?)",
        ),
        (["sweep", "{run}", "--toward", "relased"], "--toward relased: unknown pipeline layer 'relased'"),
        (["audit", "{run}", "--out", "{tmp}/a", "--toward", "relased"], "--toward relased: unknown pipeline layer"),
        (
            ["audit", "{run}", "--out", "{tmp}/a"],
            "the runs are already under 'standardized', the layer an audit goes "
            "toward by default; name another with --toward LAYER",
        ),
        (["card", "{run}", "--pipeline", "released"], "--pipeline: for a benchmark's suite (benchaudit card BENCH)"),
        (["card", "{run}", "--set", "scoring.denominator=valid"], "--set: for a benchmark's suite"),
        (
            ["rescore", "{run}", "--set", "scoring.denominator=valid", "--report-dir", "{file}"],
            "--report-dir {file}: {file} is a file, not a folder",
        ),
        (["compare", "{run}", "--out", "{file}"], "--out {file}: {file} is a file, not a folder"),
        (["compare", "{run}", "--out", "{tmp}/c", "--html", "{file}/r.html"], "--html {file}: {file} is a file"),
        (["export", "{run}", "--out", "{file}"], "--out {file}: {file} is a file, not a folder"),
        (["audit", "{run}", "--out", "{file}", "--toward", "released"], "--out {file}: {file} is a file, not a folder"),
    ],
)
def test_a_misspelt_name_gets_the_nearest_and_errors_name_the_option_given(
    argv: list[str],
    expected: str,
    toy_run: Path,
    toy_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(toy_root)
    monkeypatch.setenv("BENCHAUDIT_DATA", str(toy_root / "data"))
    a_file = toy_root / "a-file"
    a_file.write_text("x")
    fill = {"run": toy_run, "tmp": toy_root / "outputs", "file": a_file}
    rc, _, err = cli(capsys, *[a.format(**fill) for a in argv])
    assert rc == 2 and expected.format(**fill) in err, err
    assert len(err.strip().splitlines()) == 1, err
