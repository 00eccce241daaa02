"""runs/store.py's typed document API: read_document / write_document, read_summary_json, read_run_json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchaudit.aggregate.summary_documents import SUMMARY
from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.runs.run_meta import RUN_META
from pytest_benchaudit.runs.store import read_document, read_run_json, read_summary_json, write_document

SUMMARY_DOC = {"results": [], "benchmarks": [], "gates": []}


def test_a_document_reads_as_written_validated(tmp_path: Path) -> None:
    path = write_document(tmp_path / "summary.json", SUMMARY, {"results": [], "benchmarks": [], "gates": []})
    assert read_document(path, SUMMARY) == SUMMARY_DOC
    assert read_summary_json(tmp_path) == SUMMARY_DOC


def test_an_unknown_key_is_one_error_naming_the_file_and_the_key(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({**SUMMARY_DOC, "surprise": 1}))
    with pytest.raises(RunDirError, match=r"summary\.json: unknown key 'surprise'"):
        read_summary_json(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "n_records": "many"}))
    with pytest.raises(RunDirError, match=r"run\.json: key 'n_records'"):
        read_run_json(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"started": "now"}))
    with pytest.raises(RunDirError, match=r"run\.json: key 'run_id' is missing"):
        read_run_json(tmp_path)


def test_a_document_that_is_not_one_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"cannot write .*summary\.json: key 'results' is missing"):
        write_document(tmp_path / "summary.json", SUMMARY, {"benchmarks": [], "gates": []})
    assert not (tmp_path / "summary.json").exists()


def test_what_is_read_is_returned_as_read(tmp_path: Path) -> None:
    """Validation decides; the document is not pydantic's copy (an int stays an int, key order stays)."""
    run = {"run_id": "r", "ended": None, "started": "2026-01-01T00:00:00Z", "limit": 3}
    (tmp_path / "run.json").write_text(json.dumps(run))
    meta = read_run_json(tmp_path)
    assert meta == run and list(meta) == list(run)
    assert read_document(tmp_path / "run.json", RUN_META) == run
