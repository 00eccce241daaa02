"""``benchaudit schema``: the published JSON Schemas are the ones the code's types give, and real
documents validate against them (checked with jsonschema, a validator the project did not write)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_benchaudit.cli import main
from pytest_benchaudit.cli.schema_cmd import DOCUMENTS, schema_of, schema_text

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.name)
def test_the_published_schema_is_the_one_the_types_give(doc):
    published = DOCS / f"{doc.name}.schema.json"
    assert published.is_file(), f"docs/schemas/{doc.name}.schema.json missing: run benchaudit schema --out docs/schemas"
    assert published.read_text(encoding="utf-8") == schema_text(doc), (
        f"docs/schemas/{doc.name}.schema.json is stale: run benchaudit schema --out docs/schemas"
    )


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.name)
def test_each_schema_is_valid_and_closed(doc):
    schema = schema_of(doc)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema.get("additionalProperties") is False  # a key benchaudit does not write is refused


def test_schema_prints_one_document_and_writes_all(tmp_path, capsys):
    assert main(["schema", "summary"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["title"] == "summary" and "results" in printed["properties"]
    assert main(["schema", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{d.name}.schema.json" for d in DOCUMENTS)


def test_an_unknown_document_is_one_clear_error(capsys):
    assert main(["schema", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert "not a document" in err and "summary" in err and "Traceback" not in err


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((DOCS / f"{name}.schema.json").read_text(encoding="utf-8")))


def test_what_a_real_run_and_its_audit_write_validates_against_the_published_schemas(pytester, scripted, toy):
    """A pytest run of two models with a --vary variant against the loopback server, then compare, audit
    and diagnose on it: every document they write validates against docs/schemas (jsonschema)."""
    import subprocess
    import sys

    result = pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"m1@{scripted.url}",
        "--model",
        f"m2@{scripted.url}",
        "--vary",
        "scoring.denominator=valid",
        "--pipeline",
        "released",
        "--report-dir",
        "out",
        "--max-retries",
        "1",
        "-p",
        "no:randomly",
    )
    assert result.ret in (0, 1)
    (run,) = [p for p in (pytester.path / "out").iterdir() if p.is_dir()]
    _validator("run").validate(json.loads((run / "run.json").read_text()))
    _validator("summary").validate(json.loads((run / "summary.json").read_text()))
    lines = (run / "records.jsonl").read_text().splitlines()
    assert lines
    for line in lines:
        _validator("record").validate(json.loads(line))
    for card in json.loads((run / "run.json").read_text())["pipeline_cards"].values():
        _validator("card").validate(card)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_benchaudit.cli", *args],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done

    cli("compare", str(run), "--out", "cmp")
    _validator("compare").validate(json.loads((pytester.path / "cmp" / "compare.json").read_text()))
    cli("audit", str(run), "--out", "aud", "--data-dir", "data", "--suites-dir", "suites")
    _validator("audit").validate(json.loads((pytester.path / "aud" / "audit.json").read_text()))
    findings = cli("diagnose", str(run), "--json", "--data-dir", "data", "--suites-dir", "suites").stdout
    _validator("findings").validate(json.loads(findings))
