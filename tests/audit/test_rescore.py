"""Offline re-scoring: stored raw outputs, new downstream fields, no model server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.scripted_server import ScriptedServer

from conftest import only_run_dir, read_run


@pytest.fixture
def toy_run(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> Path:
    pytester.runpytest("suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}",
                       "--report-dir", "out", "-k", "mcq", "--max-retries", "0")
    return only_run_dir(pytester.path / "out")


def rescore(pytester: pytest.Pytester, run: Path, *args: str) -> tuple[int, Path | None]:
    before = {p for p in run.parent.iterdir()}
    rc = main(["rescore", str(run), "--report-dir", str(run.parent), "--suites-dir",
               str(pytester.path / "suites"), *args])
    new = [p for p in run.parent.iterdir() if p not in before]
    return rc, (new[0] if new else None)


def comparable(recs: list[dict]) -> list[tuple]:
    keys = ("question_id", "prediction", "valid", "invalid_reason", "score", "correct", "raw_output", "request")
    return sorted(tuple(json.dumps(r[k], sort_keys=True) for k in keys) for r in recs)


def test_rescore_without_changes_reproduces_the_run(pytester: pytest.Pytester, toy_run: Path) -> None:
    rc, new = rescore(pytester, toy_run)
    assert rc == 0 and new is not None
    old, fresh = read_run(toy_run), read_run(new)
    assert comparable(fresh["records"]) == comparable(old["records"])
    strip = lambda rs: [{k: v for k, v in r.items() if k != "pipeline_hash"} for r in rs]  # noqa: E731
    assert strip(fresh["summary"]["results"]) == strip(old["summary"]["results"])
    assert fresh["run"]["source"]["kind"] == "rescore" and fresh["run"]["source"]["run_id"] == old["run"]["run_id"]


def test_downstream_overrides_change_only_downstream(pytester: pytest.Pytester, toy_run: Path) -> None:
    rc, new = rescore(pytester, toy_run, "--set", "extraction.reasoning=keep", "--set", "scoring.denominator=valid")
    assert rc == 0
    out = read_run(new)
    recs = {r["question_id"]: r for r in out["records"]}
    # the unclosed <think> draft is now read as the answer (C), as released code would read it
    assert recs["t05"]["valid"] and recs["t05"]["prediction"] == "C"
    (res,) = out["summary"]["results"]
    assert res["denominator"] == "valid" and res["score"] == res["score_valid"]
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    assert card["overrides"] == {"extraction.reasoning": "keep", "scoring.denominator": "valid"}
    assert card["upstream_hash"] == read_run(toy_run)["run"]["pipeline_cards"]["toy.mcq"]["upstream_hash"]


def test_upstream_change_is_refused_naming_the_field(pytester: pytest.Pytester, toy_run: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rc, new = rescore(pytester, toy_run, "--set", "inference.max_tokens=5")
    assert rc == 2 and new is None
    err = capsys.readouterr().err
    assert "inference.max_tokens: stored 64, asked 5 — this needs new generations" in err


def test_switching_layer_applies_its_downstream_stages(pytester: pytest.Pytester, toy_run: Path) -> None:
    rc, new = rescore(pytester, toy_run, "--pipeline", "released")
    assert rc == 0
    card = read_run(new)["run"]["pipeline_cards"]["toy.mcq"]
    assert card["pipeline"] == "released"
    assert card["fields"]["extraction.reasoning"] == "keep" and card["fields"]["scoring.denominator"] == "valid"
    (res,) = read_run(new)["summary"]["results"]
    assert res["denominator"] == "valid"


def test_rescore_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rescore", str(tmp_path)]) == 2
    assert "not a benchaudit run directory" in capsys.readouterr().err
