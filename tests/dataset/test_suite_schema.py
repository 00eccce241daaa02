"""The suite.toml schema: every bad suite gets one line naming file, table and key; good ones pass."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import SuiteError, load_suite

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites"


@pytest.fixture
def seceval(tmp_path: Path) -> Path:
    """A copy of the real SecEval suite (and the shared standardized file) to break."""
    shutil.copy(SUITES / "standardized.toml", tmp_path / "standardized.toml")
    shutil.copytree(SUITES / "seceval", tmp_path / "seceval")
    return tmp_path / "seceval" / "suite.toml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


BAD = [
    ('question = "question"', 'qestion = "question"',
     r"\[tasks\.mcq\.data\]: unknown key 'qestion' \(did you mean 'question'\?\)"),
    ("[tasks.mcq.released]\n", "[tasks.mcq.relased]\n",
     r"\[tasks\.mcq\]: unknown key or layer 'relased' \(did you mean 'released'\?\)"),
    ('gold = "answer"\n', "", r"\[tasks\.mcq\.data\]: missing key 'gold'"),
    ("[ledger]", "[ledgr]", r"unknown key 'ledgr' \(did you mean 'ledger'\?\)"),
    ('title = "SecEval"', 'titel = "SecEval"', r"\[benchmark\]: unknown key 'titel' \(did you mean 'title'\?\)"),
    ('format = "json"\nid = "id"', 'format = "xml"\nid = "id"', r"\[tasks\.mcq\.data\] format"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD, ids=["data-key", "layer", "gold", "top", "benchmark", "format"])
def test_bad_suite_is_one_error_naming_file_table_and_key(seceval: Path, old: str, new: str, message: str) -> None:
    _edit(seceval, old, new)
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(seceval)
    assert str(seceval) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("command", [["validate", "{root}"], ["card", "seceval", "--suites-dir", "{root}"],
                                     ["ledger", "--suites-dir", "{root}"]])
def test_unknown_rule_fails_validate_card_and_ledger(seceval: Path, command: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _edit(seceval, 'rule = "all_capital_letters"', 'rule = "all_capitol_letters"')
    assert main([part.format(root=seceval.parent.parent) for part in command]) == 2
    err = capsys.readouterr().err
    assert "[tasks.mcq.released] extraction.rule: 'all_capitol_letters' is not a known rule" in err
    assert "did you mean 'all_capital_letters'?" in err and "Traceback" not in err


def test_the_shipped_suites_validate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(SUITES)]) == 0
    assert re.search(r"(\d+) of \1 suite\(s\) valid", capsys.readouterr().out)


def test_the_example_in_docs_validates(tmp_path: Path) -> None:
    text = (REPO / "docs" / "suites.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", text, re.S)
    assert example
    shutil.copy(SUITES / "standardized.toml", tmp_path / "standardized.toml")
    (tmp_path / "toybench").mkdir()
    (tmp_path / "toybench" / "suite.toml").write_text(example.group(1), encoding="utf-8")
    assert main(["validate", str(tmp_path)]) == 0


def test_validate_on_a_folder_without_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path)]) == 2
    assert "no */suite.toml found" in capsys.readouterr().err
