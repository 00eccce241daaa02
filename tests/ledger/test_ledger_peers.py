"""``benchaudit ledger``: peer layers (inspect_evals, lm_eval and variants) field by field against ``released``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.ledger.ledger_peers import is_peer_layer, peer_differences
from pytest_benchaudit.ledger.ledger_render import render_markdown, render_table
from pytest_benchaudit.ledger.ledger_rows import build_ledger
from pytest_benchaudit.testing.toy import layer_toml, mcq_suite_toml

PEERS = (
    """
[templates.same_as_plain]
user = "{question}\\n{options}"

[templates.peer]
user = "Answer the question.\\n{question}\\n{options}"

"""
    + layer_toml("mcq", "released", max_tokens=16, reasoning="keep", denominator="valid")
    + "\n"
    + layer_toml(
        "mcq",
        "inspect_evals",
        template="peer",
        max_tokens=16,
        reasoning="keep",
        why={"prompt.template": "peer 1.0 template.py", "scoring": "peer 1.0 counts every question"},
        notes=["asks once"],
    )
    + "\n"
    + layer_toml("mcq", "lm_eval_same", template="same_as_plain", max_tokens=32, reasoning="keep", denominator="valid")
)


def _suites(root: Path) -> Path:
    for name, extra in (("withpeers", PEERS), ("plainbench", "")):
        (root / name).mkdir(parents=True)
        (root / name / "suite.toml").write_text(mcq_suite_toml(name, title=name) + extra)
    return root


def test_peer_fields_against_released(tmp_path: Path) -> None:
    suites = _suites(tmp_path / "suites")
    assert is_peer_layer("inspect_evals") and is_peer_layer("lm_eval_5shot") and not is_peer_layer("lm_evalx")
    assert not is_peer_layer("released_base")
    rows = {r["benchmark"]: r for r in build_ledger(suites)["benchmarks"]}
    assert "peers" not in rows["plainbench"]  # a suite without peer layers: its row as before
    peers = {p["layer"]: p for p in rows["withpeers"]["peers"]}
    assert sorted(peers) == ["inspect_evals", "lm_eval_same"]
    fields = {f["field"]: f for f in peers["inspect_evals"]["fields"]}
    assert sorted(fields) == ["prompt.template", "scoring.denominator"]
    assert (fields["scoring.denominator"]["released"], fields["scoring.denominator"]["peer"]) == ("valid", "total")
    assert fields["scoring.denominator"]["why"] == "peer 1.0 counts every question"  # the stage's why
    assert fields["prompt.template"]["why"] == "peer 1.0 template.py"
    assert fields["prompt.template"]["content"] == {
        "user": {"released": "{question}\n{options}", "peer": "Answer the question.\n{question}\n{options}"}
    }
    assert peers["inspect_evals"]["notes"] == ["asks once"] and fields["prompt.template"]["tasks"] == ["mcq"]
    # another template name with the same text is no difference; max_tokens is, with no why given
    same = peers["lm_eval_same"]["fields"]
    assert [(f["field"], f["released"], f["peer"], f["why"]) for f in same] == [("inference.max_tokens", 16, 32, None)]
    text = render_table(build_ledger(suites))
    assert "peer layer inspect_evals: 2 fields differ from released" in text
    assert 'scoring.denominator: released "valid", inspect_evals "total" — why: peer 1.0 counts every question' in text
    assert "inference.max_tokens: released 16, lm_eval_same 32 — no why given" in text
    md = render_markdown(build_ledger(suites))
    assert "Peer layers, field by field against `released`:" in md and "- peer layer inspect_evals" in md


def test_the_ledger_command_on_the_project_suites(capsys: pytest.CaptureFixture[str]) -> None:
    """Every peer layer of the project's suites, recomputed here from the suites' own pipelines."""
    assert main(["ledger", "--format", "json", "--suites-dir", str(SUITES)]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["benchmark"]: r for r in doc["benchmarks"]}
    for name in ("cti_bench", "athenabench"):  # published runs' benchmarks: no peer layer, no new key
        assert "peers" not in rows[name]
    for name, row in rows.items():
        suite = load_suite(SUITES / name / "suite.toml")
        assert [p["layer"] for p in row.get("peers", [])] == [p["layer"] for p in peer_differences(suite)]
        for peer in row.get("peers", []):
            for f in peer["fields"]:
                for task in f["tasks"]:
                    a = suite.pipeline(task, "released").card()["fields"]
                    b = suite.pipeline(task, peer["layer"]).card()["fields"]
                    assert (a.get(f["field"]), b.get(f["field"])) == (f["released"], f["peer"]) and a != b


def test_the_html_ledger_section_lists_every_peer_field_with_its_why() -> None:
    """The report's ledger section shows the same peer differences as `benchaudit ledger`: one table row
    per (benchmark, layer, field), the peer's why in it, none without one for the project's suites."""
    from html.parser import HTMLParser

    from pytest_benchaudit.report.html.audits import ledger_section

    rows = [r for r in build_ledger(SUITES)["benchmarks"] if r.get("peers")]
    assert {r["benchmark"] for r in rows} >= {"cybermetric", "mmlu_cs"}
    expected = [
        (r["benchmark"], layer["layer"], f["field"], f["why"])
        for r in rows
        for layer in r["peers"]
        for f in layer["fields"]
    ]
    assert expected and all(why for *_, why in expected)

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: list[list[list[str]]] = []
            self.inside = False

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self.tables[-1][-1].append("")
                self.inside = True

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th"):
                self.inside = False

        def handle_data(self, data: str) -> None:
            if self.inside:
                self.tables[-1][-1][-1] += data

    parser = Cells()
    parser.feed(ledger_section(rows, None))
    (peer_table,) = [t for t in parser.tables if t and "why (the peer's code)" in t[0]]
    shown = [(row[0], row[1], row[2], row[6]) for row in peer_table[1:]]
    assert shown == expected
