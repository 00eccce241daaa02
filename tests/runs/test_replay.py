"""--model replay:RUN_DIR: a run's stored generations answer a new pytest run, no model server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_benchaudit.pipeline.types import Request
from pytest_benchaudit.runs.replay import ReplayBackend
from pytest_benchaudit.testing.runs import read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer


@pytest.fixture
def stored(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> Path:
    pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "stored",
        "-k",
        "mcq",
        "--max-retries",
        "0",
        "--no-cache",
    )
    (run,) = [p for p in (pytester.path / "stored").iterdir() if p.is_dir()]
    return run


def test_replay_serves_stored_generations_for_downstream_changes(pytester: pytest.Pytester, stored: Path) -> None:
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"replay:{stored}",
        "--report-dir",
        "replayed",
        "-k",
        "mcq",
        "--set",
        "extraction.reasoning=keep",
        "--no-cache",
    )
    # stored errors (no retries) are replayed as errors; the 429 with Retry-After was waited out, not an error
    result.assert_outcomes(passed=5, failed=7)
    (run,) = [p for p in (pytester.path / "replayed").iterdir() if p.is_dir()]
    old = {r["question_id"]: r for r in read_run(stored)["records"]}
    new = {r["question_id"]: r for r in read_run(run)["records"]}
    assert set(new) == set(old)
    assert all(new[q]["raw_output"] == old[q]["raw_output"] for q in old)  # the very same outputs
    assert new["t05"]["prediction"] == "C" and old["t05"]["prediction"] is None  # read differently
    assert read_run(run)["run"]["models"][0]["replay_of"] == str(stored)
    assert new["t01"]["model"] == "toy-model"


def test_replay_refuses_upstream_changes_naming_the_field(pytester: pytest.Pytester, stored: Path) -> None:
    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"replay:{stored}",
        "--report-dir",
        "replayed",
        "-k",
        "mcq",
        "--set",
        "inference.max_tokens=5",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*toy.mcq: inference.max_tokens: stored 64, asked 5*this needs new generations*"])


def test_replay_backend_names_differing_request_fields(stored: Path) -> None:
    backend = ReplayBackend(stored, "toy-model")
    rec = read_run(stored)["records"][0]
    asked = Request.model_validate({**rec["request"], "params": {**rec["request"]["params"], "max_tokens": 2048}})
    gen = asyncio.run(backend.generate(asked))
    assert gen.error and "inference.max_tokens: stored 64, asked 2048 — this needs new generations" in gen.error
    same = asyncio.run(backend.generate(Request.model_validate(rec["request"])))
    assert same.error is None and same.text == rec["raw_output"]
    other = Request.model_validate({**rec["request"], "messages": [{"role": "user", "content": "new prompt"}]})
    assert "prompt.template" in asyncio.run(backend.generate(other)).error


def test_replay_spec_errors(pytester: pytest.Pytester, toy) -> None:
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--model", "replay:nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--model replay:nowhere: replay:nowhere: not a readable run directory*"])
