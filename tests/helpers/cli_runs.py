"""What the tests of the read commands share: ``benchaudit`` run in-process (never a traceback), and a toy run
made once per test module by a real pytest, copied for each test (fixtures: tests/conftest.py loads this module as a plugin)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import build_toy_run, only_run_dir


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]


def cli(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    """``benchaudit ARGV`` in-process: (exit status, stdout, stderr), never a traceback."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    no_traceback(out + err)
    return rc, out, err


def record_lines(run: Path) -> list[dict[str, Any]]:
    """records.jsonl of ``run``, one dict per line."""
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def built_toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Once per module: the toy suite and a finished run of it (12 + 1 records), made by a real pytest."""
    return build_toy_run(tmp_path_factory.mktemp("toy"))


@pytest.fixture
def toy_root(built_toy: Path, tmp_path: Path) -> Path:
    shutil.copytree(built_toy, tmp_path / "root")
    return tmp_path / "root"


@pytest.fixture
def toy_run(toy_root: Path) -> Path:
    return only_run_dir(toy_root / "out")
