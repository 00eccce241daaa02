"""``benchaudit multiverse``, and the multiverse in ``diagnose`` (BA07) and ``audit``, end to end on the toy run.

The documents validate against the published JSON Schema (jsonschema); bad input is one line and an
exit status, never a traceback; every string from a run is escaped in the HTML.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from pytest_benchaudit.cli.app import main

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def _schema(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")))


def test_multiverse_writes_its_document_and_page_verdict_first(
    toy_root: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, run = toy_root
    assert (
        main(
            ["multiverse", str(run), "--out", str(tmp_path), "--suites-dir", str(root / "suites"), "--resamples", "100"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("Which model orderings survive the multiverse:\n  mvtoy (1 task, 16 specifications each): ")
    doc = json.loads((tmp_path / "multiverse.json").read_text(encoding="utf-8"))
    _schema("multiverse").validate(doc)
    (verdict,) = doc["verdicts"]
    assert verdict["pairs"] == 6 == verdict["holds"] + verdict["most"] + verdict["flips"] + verdict["tied"]
    assert verdict["flips"] >= 1 and verdict["top_field"] is not None
    html = (tmp_path / "multiverse.html").read_text(encoding="utf-8")
    assert html.index('id="verdict"') < html.index('id="multiverse"') and "data:image/png;base64," in html
    assert "<script" not in html


def test_names_from_a_run_are_escaped_in_the_page(toy_root: tuple[Path, Path], tmp_path: Path) -> None:
    root, run = toy_root
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    lines = (copy / "records.jsonl").read_text(encoding="utf-8").splitlines()
    renamed = [
        json.dumps({**r, "model": "<img src=x onerror=alert(1)>" if r["model"] == "terse" else r["model"]})
        for r in map(json.loads, lines)
    ]
    (copy / "records.jsonl").write_text("\n".join(renamed) + "\n", encoding="utf-8")
    # run.json names the renamed model too (a record of a model the run did not ask is refused)
    meta = (
        (copy / "run.json").read_text(encoding="utf-8").replace('"terse"', json.dumps("<img src=x onerror=alert(1)>"))
    )
    (copy / "run.json").write_text(meta, encoding="utf-8")
    assert (
        main(
            [
                "multiverse",
                str(copy),
                "--out",
                str(tmp_path / "out"),
                "--suites-dir",
                str(root / "suites"),
                "--resamples",
                "0",
            ]
        )
        == 0
    )
    html = (tmp_path / "out" / "multiverse.html").read_text(encoding="utf-8")
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.parametrize(
    "args, words",
    [
        ([], ["give run directories", "--list BENCH"]),
        (["RUN"], ["--out DIR"]),
        (["RUN", "--out", "OUT", "--max-specs", "0"], ["--max-specs must be at least 1"]),
        (["nowhere", "--out", "OUT"], ["nowhere", "not found"]),
    ],
)
def test_bad_input_is_one_line(
    toy_root: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: list[str]
) -> None:
    root, run = toy_root
    argv = [str(run) if a == "RUN" else str(tmp_path / a) if a in ("OUT", "nowhere") else a for a in args]
    assert main(["multiverse", *argv, "--suites-dir", str(root / "suites")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    for word in words:
        assert word in err


def test_a_corrupt_run_is_one_error_naming_the_line(
    toy_root: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, run = toy_root
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    with (copy / "records.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"benchmark": "mvtoy", "task": 3}\n')
    assert main(["multiverse", str(copy), "--out", str(tmp_path / "out"), "--suites-dir", str(root / "suites")]) in (
        1,
        2,
    )
    err = capsys.readouterr().err
    assert "records.jsonl:33" in err and "Traceback" not in err and not (tmp_path / "out").exists()


def test_diagnose_reports_the_flipping_pairs_as_ba07(
    toy_root: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, run = toy_root
    assert main(["diagnose", str(run), "--json", "--suites-dir", str(root / "suites"), "--no-ledger"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _schema("findings").validate(doc)
    (finding,) = [f for f in doc["findings"] if f["failure_mode"] == "BA07-order-flips-across-specifications"]
    assert finding["task"] == "mcq" and finding["model"] == "*" and finding["field"] == finding["evidence"]["top_field"]
    pairs = {(p["model_a"], p["model_b"]) for p in finding["evidence"]["pairs"]}
    assert any("hedger" in pair for pair in pairs)
    assert all(p["b_better"] >= 0.25 for p in finding["evidence"]["pairs"])
    assert (
        main(["diagnose", str(run), "--json", "--suites-dir", str(root / "suites"), "--no-ledger", "--no-multiverse"])
        == 0
    )
    assert not [f for f in json.loads(capsys.readouterr().out)["findings"] if f["failure_mode"].startswith("BA07")]


def test_audit_puts_the_multiverse_first(
    toy_root: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, run = toy_root
    out = tmp_path / "audit"
    assert (
        main(
            [
                "audit",
                str(run),
                "--out",
                str(out),
                "--suites-dir",
                str(root / "suites"),
                "--data-dir",
                str(root / "data"),
                "--resamples",
                "200",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert text.startswith("Which model orderings survive the multiverse")
    doc = json.loads((out / "multiverse.json").read_text(encoding="utf-8"))
    _schema("multiverse").validate(doc)
    audit = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    _schema("audit").validate(audit)
    assert any(f["failure_mode"].startswith("BA07") for f in audit["findings"])
    html = (out / "report.html").read_text(encoding="utf-8")
    body = html[html.index("<h1>") :]
    first = body.index("<section")
    assert body[first:].startswith('<section id="verdict"><h2>Verdict per benchmark</h2><div id="mv-verdict">')
    assert "model orderings hold in every specification" in body[first : body.index('<div class="verdict"')]
    assert body.index('id="mv-verdict"') < body.index('id="multiverse"')
    assert '<a href="#multiverse">Multiverse</a>' in html
