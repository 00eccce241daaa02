"""The example's hook implementations: what the entry point ``example`` registers with benchaudit."""

from __future__ import annotations

from pathlib import Path

from benchaudit_example.quiz import quiz_marked, quiz_points, read_quiz
from pytest_benchaudit.api import hookimpl


@hookimpl
def benchaudit_suite_dirs() -> list[Path]:
    return [Path(__file__).parent / "suites"]


@hookimpl
def benchaudit_readers() -> dict[str, object]:
    return {"quiz": read_quiz}


@hookimpl
def benchaudit_rules() -> list[object]:
    return [quiz_marked]


@hookimpl
def benchaudit_metrics() -> list[object]:
    return [quiz_points]
