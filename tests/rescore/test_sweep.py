"""`benchaudit sweep`: single-field counterfactuals from stored outputs, no model server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import ScriptedServer


@pytest.fixture
def toy_run(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> Path:
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


def sweep(pytester: pytest.Pytester, run: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    assert main(["sweep", str(run), "--json", "--suites-dir", str(pytester.path / "suites"), *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_sweep_downstream_fields(pytester: pytest.Pytester, toy_run: Path, capsys) -> None:
    rows = {
        r["variant"]: r
        for r in sweep(
            pytester, toy_run, capsys, "--vary", "scoring.denominator=valid", "--vary", "extraction.reasoning=keep"
        )
    }
    assert set(rows) == {"denominator=valid", "reasoning=keep"}
    valid = rows["denominator=valid"]
    # 5 of 12 correct over all items (stored errors included; the 429 that names its wait is waited
    # out even under --max-retries 0); 5 of the 6 valid answers
    assert valid["base_score"] == pytest.approx(5 / 12) and valid["score"] == pytest.approx(5 / 6)
    assert valid["delta_pp"] == pytest.approx(100 * (5 / 6 - 5 / 12)) and valid["moved_by"] == "scoring"
    keep = rows["reasoning=keep"]
    # the unclosed <think> draft is now read (C, wrong): one fewer invalid, same score
    assert keep["invalid_rate"] == pytest.approx(keep["base_invalid_rate"] - 1 / 12)
    assert keep["delta"] == 0 and keep["moved_by"] == "none"


def test_sweep_toward_a_layer_attributes_field_by_field(pytester: pytest.Pytester, toy_run: Path, capsys) -> None:
    rows = sweep(pytester, toy_run, capsys, "--toward", "released")
    # the toy's released layer differs downstream in reasoning handling, denominator and breakdown
    assert {r["variant"] for r in rows} >= {"reasoning=keep", "denominator=valid"}
    assert all(r["field"].split(".")[0] in ("extraction", "scoring", "aggregation") for r in rows)


def test_sweep_refuses_upstream_fields(pytester: pytest.Pytester, toy_run: Path, capsys) -> None:
    assert (
        main(["sweep", str(toy_run), "--vary", "inference.max_tokens=5", "--suites-dir", str(pytester.path / "suites")])
        == 2
    )
    assert "inference.max_tokens: stored 64, asked 5 — this needs new generations" in capsys.readouterr().err
