"""Suite paths as typed: case-insensitive resolution, and an unknown suite listing the suites."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_benchaudit.pytest_plugin.paths import SuitePathError, resolve_suite_args


def make_suites(root: Path) -> None:
    for name in ("seceval", "cti_bench"):
        (root / "suites" / name).mkdir(parents=True)
        (root / "suites" / name / "suite.toml").write_text("")


def test_case_insensitive_match_is_rewritten_and_said(tmp_path: Path) -> None:
    make_suites(tmp_path)
    args, notes = resolve_suite_args(["suites/secEval", "-k", "mcq", "Suites/CTI_Bench/suite.toml::mcq"], tmp_path)
    assert args == ["suites/seceval", "-k", "mcq", "suites/cti_bench/suite.toml::mcq"]
    assert notes == [
        "suites/secEval → suites/seceval (case-insensitive match)",
        "Suites/CTI_Bench/suite.toml::mcq → suites/cti_bench/suite.toml::mcq (case-insensitive match)",
    ]
    absolute = str(tmp_path / "suites" / "SECEVAL")
    assert resolve_suite_args([absolute], Path("/"))[0] == [str(tmp_path / "suites" / "seceval")]


def test_existing_and_unrelated_paths_are_left_alone(tmp_path: Path) -> None:
    make_suites(tmp_path)
    (tmp_path / "tests").mkdir()
    args, notes = resolve_suite_args(["suites/seceval", "tests", "nowhere/x.py"], tmp_path)
    assert args == ["suites/seceval", "tests", "nowhere/x.py"]
    # the local seceval shadows the packaged one: said (tests/test_packaging.py), nothing else is
    assert [note.split(":")[0] for note in notes] == ["suites/seceval"]


def test_unknown_suite_lists_the_suites(tmp_path: Path) -> None:
    make_suites(tmp_path)
    with pytest.raises(SuitePathError) as info:
        resolve_suite_args(["suites/secevl"], tmp_path)
    assert str(info.value) == (
        "suites/secevl: no suite 'secevl' in suites/ (did you mean 'seceval'?); suites there: cti_bench, seceval"
    )


def test_pytest_runs_the_suite_as_typed(pytester: pytest.Pytester, toy) -> None:
    result = pytester.runpytest("suites/TOY", "--data-dir", "data", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*13 tests collected*"])
    header = pytester.runpytest("suites/Toy", "--data-dir", "data", "--collect-only")
    header.stdout.fnmatch_lines(["benchaudit: suites/Toy → suites/toy (case-insensitive match)"])
    unknown = pytester.runpytest("suites/tyo", "--data-dir", "data")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["ERROR: suites/tyo: no suite 'tyo' in suites/*; suites there: toy"])
