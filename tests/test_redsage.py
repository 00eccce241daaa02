"""RedSage-Bench: hub-only data, read from a local export or downloaded once; offline = one clear message."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from pytest_benchaudit.dataset.suites import SuiteError, load_suite
from pytest_benchaudit.dataset.readers import load_questions
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

from conftest import SUITES, only_run_dir, read_run

# Rows written for this test in the hub dataset's format (content, question, answers{A..D}, solution).
FIXTURE = [
    {"content": "ctx", "question": "Which tool lists open ports on a host?",
     "answers": {"A": "nmap", "B": "grep", "C": "tar", "D": "ls"}, "solution": "A"},
    {"content": "ctx", "question": "Which Kali tool cracks password hashes?",
     "answers": {"A": "curl", "B": "john", "C": "vim", "D": "top"}, "solution": "B"},
]


def write_export(data_dir: Path, subset: str) -> Path:
    path = data_dir / "redsage" / f"{subset}-test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in FIXTURE))
    return path


def test_local_export_is_read_like_the_hub_rows(tmp_path: Path) -> None:
    write_export(tmp_path, "cybersecurity_skills")
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    questions, _ = load_questions(suite, "skills", tmp_path, "test")
    assert [q.gold for q in questions] == ["A", "B"]
    assert questions[1].choices == {"A": "curl", "B": "john", "C": "vim", "D": "top"}


def test_missing_export_without_datasets_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as if not installed
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    with pytest.raises(SuiteError) as err:
        load_questions(suite, "tools_kali", tmp_path, "test")
    message = str(err.value)
    assert "RISys-Lab/Benchmarks_CyberSec_RedSageMCQ" in message and "'datasets' package is not installed" in message
    assert str(tmp_path / "redsage" / "cybersecurity_tools_kali-test.jsonl") in message


def test_offline_hub_is_one_clear_error_and_a_download_writes_the_export(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("datasets")

    def offline(repo, config, split):
        raise ConnectionError("Couldn't reach 'RISys-Lab/Benchmarks_CyberSec_RedSageMCQ' on the Hub (LocalEntryNotFoundError)")

    fake.load_dataset = offline  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    suite = load_suite(SUITES / "redsage" / "suite.toml")
    with pytest.raises(SuiteError, match="could not load RISys-Lab/Benchmarks_CyberSec_RedSageMCQ .*ConnectionError"):
        load_questions(suite, "skills", tmp_path, "test")
    assert not list(tmp_path.rglob("*.jsonl*"))  # nothing half-written

    fake.load_dataset = lambda repo, config, split: iter(FIXTURE)  # type: ignore[attr-defined]
    questions, path = load_questions(suite, "skills", tmp_path, "test")
    assert len(questions) == 2 and path.name == "cybersecurity_skills-test.jsonl" and path.is_file()


def test_redsage_end_to_end_against_loopback(pytester: pytest.Pytester) -> None:
    for subset in ("cybersecurity_knowledge_generals", "cybersecurity_knowledge_frameworks", "cybersecurity_skills",
                   "cybersecurity_tools_cli", "cybersecurity_tools_kali"):
        write_export(pytester.path / "data", subset)
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        result = pytester.runpytest(str(SUITES / "redsage"), "--data-dir", "data", "--model", f"m@{server.url}",
                                    "--report-dir", "out")
    result.assert_outcomes(passed=5, failed=5)
    out = read_run(only_run_dir(pytester.path / "out"))
    assert sorted(r["task"] for r in out["summary"]["results"]) == [
        "knowledge_frameworks", "knowledge_generals", "skills", "tools_cli", "tools_kali"]
    (bench,) = out["summary"]["benchmarks"]
    assert bench["method"] == "micro" and bench["score"] == pytest.approx(0.5)


def test_unavailable_hub_data_skips_instead_of_stopping_the_run(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`pytest suites/` on a machine without the hub data: RedSage skips with the reason."""
    monkeypatch.setitem(sys.modules, "datasets", None)
    (pytester.path / "data").mkdir()
    result = pytester.runpytest(str(SUITES / "redsage"), "--data-dir", "data", "--model", "m@http://127.0.0.1:9/v1",
                                "-rs", "--report-dir", "out")
    result.assert_outcomes(skipped=5)
    result.stdout.fnmatch_lines(["*redsage: RISys-Lab/Benchmarks_CyberSec_RedSageMCQ*'datasets' package is not installed*"])
    assert "Traceback" not in result.stdout.str()
