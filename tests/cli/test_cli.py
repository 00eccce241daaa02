"""The `benchaudit` command over real run directories made by a pytest run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import ScriptedServer


@pytest.fixture
def run_dir(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> Path:
    pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--max-retries",
        "0",
    )
    return only_run_dir(pytester.path / "out")


def test_show_prints_summary_and_cards(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "toy — pipeline 'standardized'" in out and "toy-model" in out
    assert 'extraction.reasoning     "strip"' in out


def test_summarize_recomputes_the_same_summary(run_dir: Path) -> None:
    before = json.loads((run_dir / "summary.json").read_text())["results"]
    (run_dir / "summary.json").unlink()
    assert main(["summarize", str(run_dir)]) == 0
    after = json.loads((run_dir / "summary.json").read_text())["results"]
    assert after == before


def test_summarize_skips_a_torn_last_line(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = run_dir / "records.jsonl"
    n = len(records.read_text().splitlines())
    with records.open("a") as fh:
        fh.write('{"benchmark": "toy", "task": "mc')  # a run killed mid-write
    assert main(["summarize", str(run_dir)]) == 0
    assert "incomplete" in capsys.readouterr().err
    (res,) = json.loads((run_dir / "summary.json").read_text())["results"]
    assert res["n"] == n


def test_card_and_errors(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["card", str(run_dir), "--task", "toy.mcq"]) == 0
    card = json.loads(capsys.readouterr().out)["toy.mcq"]
    assert card["fields"]["scoring.denominator"] == "total"
    assert main(["card", str(run_dir), "--task", "toy.nope"]) == 2
    assert "--task toy.nope: no card for 'toy.nope' in this run; tasks in this run: toy.mcq" in capsys.readouterr().err
    assert main(["show", str(tmp_path)]) == 2
    assert "not a benchaudit run directory" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "benchaudit"
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "summarize" in proc.stdout


def test_card_of_a_suite_with_layer_and_override(capsys: pytest.CaptureFixture[str]) -> None:
    suites = str(Path(__file__).resolve().parents[2] / "suites")
    assert (
        main(
            [
                "card",
                "cti_bench",
                "--task",
                "mcq",
                "--pipeline",
                "released",
                "--suites-dir",
                suites,
                "--set",
                "prompt.format.system_role=prepend_user",
            ]
        )
        == 0
    )
    card = json.loads(capsys.readouterr().out)["cti_bench.mcq"]
    assert card["pipeline"] == "released" and card["fields"]["scoring.denominator"] == "valid"
    assert card["fields"]["prompt.format.system_role"] == "prepend_user"
    assert card["overrides"] == {"prompt.format.system_role": "prepend_user"}
    assert card["why"]["extraction.rule"].startswith("format_mcq()")
    assert main(["card", "nosuch", "--suites-dir", suites]) == 2
    assert "no suite 'nosuch'" in capsys.readouterr().err
    assert main(["card", "seceval", "--set", "inference.max_tokens=zero", "--suites-dir", suites]) == 2
    assert "inference.max_tokens" in capsys.readouterr().err


def test_import_and_sweep_through_the_command(
    tmp_path: Path, real_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The published AthenaBench outputs become run directories the offline commands accept."""
    runs = real_data / "athenabench" / "runs-mini"
    if not runs.is_dir():
        pytest.skip(f"published AthenaBench outputs not found under {runs}")
    suites = str(Path(__file__).resolve().parents[2] / "suites")
    assert main(["import", "athenabench-runs", str(runs), "--report-dir", str(tmp_path), "--suites-dir", suites]) == 0
    capsys.readouterr()
    (qwen4b,) = [p for p in tmp_path.iterdir() if p.name.endswith("Qwen3-4B-Instruct-2507")]
    assert main(["sweep", str(qwen4b), "--vary", "scoring.denominator=total", "--json", "--suites-dir", suites]) == 0
    rows = {(r["task"], r["variant"]): r for r in json.loads(capsys.readouterr().out)}
    vsp = rows[("vsp", "denominator=total")]
    # the released VSP score counts valid vectors only: 90 of 200 were invalid for this model
    assert vsp["base_invalid_rate"] == pytest.approx(90 / 200) and vsp["moved_by"] == "scoring"
    # over all 200 each invalid vector gets no credit (0, scoring.invalid_credit): 78.2% -> 43.0%
    assert vsp["delta_pp"] == pytest.approx(-35.2, abs=0.05)


def test_the_command_list_says_what_each_command_module_says() -> None:
    """`benchaudit --help` lists commands from app.py's table (no module imported); it must not drift."""
    from importlib import import_module

    from pytest_benchaudit.cli.app import _LIST_HELP, COMMANDS

    for name, module in COMMANDS.items():
        own = getattr(import_module(f"pytest_benchaudit.cli.{module}"), "HELP", None)
        assert own is None or own == _LIST_HELP[name], name
