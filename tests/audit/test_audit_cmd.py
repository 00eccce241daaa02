"""``benchaudit audit`` on AthenaBench's published runs: re-scored toward the standardized layer,
attributed field by field, both layers compared, ledger, report and Every Eval Ever files."""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path

import pytest
from fake_embedder import fake_embedder

from helpers import SUITES
from pytest_benchaudit.cli.audit_cmd import add_parser, run
from pytest_benchaudit.importers import import_athenabench_runs


def _audit(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["audit", *argv]))


@pytest.fixture(scope="module")
def released(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    root = tmp_path_factory.mktemp("athena-audit") / "released"
    import_athenabench_runs(source, root, SUITES, str(real_data))
    return root


def test_audit_of_the_published_runs(released: Path, real_data: Path, tmp_path: Path, capsys) -> None:
    findings = tmp_path / "findings.json"
    finding = {
        "benchmark": "athenabench",
        "task": "vsp",
        "model": "m",
        "pipeline": "released",
        "run": "m",
        "failure_mode": "FM01",
        "title": "invalid answers",
        "field": "scoring.denominator",
        "stage": "downstream",
        "hypothesis": "the denominator",
        "evidence": {"n_invalid": 90},
        "effect_pp": -48.6,
        "effect": "-48.6 pp",
        "effect_kind": "rescored",
        "effect_delta": -0.486,
        "effect_is_zero": False,
    }  # as `benchaudit diagnose --json` writes one (read_findings validates it)
    findings.write_text(json.dumps({"findings": [finding]}))
    out = tmp_path / "audit"
    assert (
        _audit(
            str(released),
            "--out",
            str(out),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(real_data),
            "--findings",
            str(findings),
            "--resamples",
            "200",
        )
        == 0
    )
    doc = json.loads((out / "audit.json").read_text())
    assert doc["layers"] == {"from": ["released"], "toward": "standardized"} and len(doc["rescored_runs"]) == 12
    # the paper's largest single-field effect: Qwen3-4B's VSP under the total denominator
    (vsp,) = [
        r
        for r in doc["attribution"]
        if r["model"] == "Qwen/Qwen3-4B-Instruct-2507" and r["task"] == "vsp" and r["field"] == "scoring.denominator"
    ]
    assert vsp["delta_pp"] == pytest.approx(-35.2, abs=0.05)  # 78.2 -> 43.0: invalid vectors get no credit
    ups = {r["task"]: {d["field"] for d in r["fields"]} for r in doc["upstream_differences"]}
    assert "prompt.template" in ups["athenabench.mcq"] and "inference.max_tokens" in ups["athenabench.mcq"]
    assert [r["benchmark"] for r in doc["ledger"]] == ["athenabench"]
    both = {(r["layer"], r["task"], r["model"]) for r in doc["scores"]}
    assert len(both) == 2 * 6 * 12 and all("score_total" in r and "score_valid" in r for r in doc["scores"])
    cmp = doc["compare"]
    assert cmp["spearman"][0]["n_models"] == 12 and cmp["sensitivity"]["benchmarks"][0]["rho_ext"] is not None
    assert len(doc["exports"]) == 12 and all(Path(p).is_file() for p in doc["exports"])
    page = (out / "report.html").read_text()
    for heading in (
        "Rank shifts between released and standardized",
        "Ledger and upstream fields",
        "Per-field score deltas",
        "Generation against extraction sensitivity",
        "Diagnose findings",
        "Peer gaps",
        "Principal components",
    ):
        assert heading in page, heading
    text = capsys.readouterr().out
    assert "single-field variants moved a score" in text and "needs new generations" in text
    assert doc["findings"][0]["failure_mode"] == "FM01"  # the file given, not a new diagnosis


def test_audit_diagnoses_the_runs_when_no_findings_are_given(released: Path, real_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    assert (
        _audit(
            str(released),
            "--out",
            str(out),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(real_data),
            "--resamples",
            "50",
        )
        == 0
    )
    doc = json.loads((out / "audit.json").read_text())
    hidden = [
        f
        for f in doc["findings"]
        if f["model"] == "Qwen/Qwen3-4B-Instruct-2507" and f["task"] == "vsp" and f["field"] == "scoring.denominator"
    ]
    assert hidden and hidden[0]["effect_pp"] == pytest.approx(-35.2, abs=0.1)
    page = html.unescape((out / "report.html").read_text())
    assert "Diagnose findings" in page
    # Issue 33, item 16: the move leaves VSP out (its layers score it with different metrics), the causes do
    # not; the sentence says both, so a cause larger than the move reads as what it is.
    from pytest_benchaudit.report.html.verdict import verdicts

    moved = [r for r in doc["attribution"] if r.get("moved_by") not in (None, "none")]
    (v,) = verdicts(doc["compare"], moved, doc["findings"])
    assert v["metric_differs"] == ["athenabench.vsp"] and v["largest_move"]["task"] != "athenabench.vsp"
    assert abs(v["causes"][0]["pp"]) > abs(v["largest_move"]["pp"])
    assert (
        "moves a score by up to -2.3 pp on the tasks both score with one metric (vsp left out: its metric "
        "differs between the sets)"
    ) in v["sentence"]
    assert (
        "largest cause scoring.denominator, changed alone (-35.2 pp on vsp, a task the move above leaves out)"
        in v["sentence"]
        and v["sentence"] in page
    )


def test_audit_refuses_runs_already_under_the_target_layer(released: Path, tmp_path: Path, capsys) -> None:
    assert _audit(str(released), "--toward", "released", "--out", str(tmp_path / "o")) == 2
    assert "already under 'released'" in capsys.readouterr().err
    assert not (tmp_path / "o" / "audit.json").exists()


def test_audit_of_the_published_runs_by_what_is_sent_with_both_rhos_and_both_similarities(
    released: Path, real_data: Path, tmp_path: Path, capsys
) -> None:
    """AthenaBench's templates released and dataset_prompt are both user = "{prompt}": no upstream difference;
    top_p/seed at temperature 0 "no effect expected"; rho_ext (extraction fields only) beside rho_downstream;
    the similarity of both layers, from what each task asks, checked against scipy on the recorded cosines."""
    from scipy import stats as st

    out = tmp_path / "audit"
    with fake_embedder() as (spec, seen):
        assert (
            _audit(
                str(released),
                "--out",
                str(out),
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(real_data),
                "--findings",
                str(_no_findings(tmp_path)),
                "--resamples",
                "100",
                "--similarity",
                "--embedder",
                spec,
            )
            == 0
        )
    doc = json.loads((out / "audit.json").read_text())
    ups = {r["task"]: r for r in doc["upstream_differences"]}
    assert all(
        "prompt.template" not in {d["field"] for d in ups[f"athenabench.{t}"]["fields"]}
        for t in ("ate", "rcm", "rms", "taa", "vsp")
    )
    assert all(
        {d["field"] for d in r["no_effect"]} == {"inference.decoding.top_p", "inference.decoding.seed"}
        for r in ups.values()
    )
    # rho_ext: the extraction-only re-scores; rho_downstream: every downstream field
    assert len(doc["extraction_only_runs"]) == 12
    (row,) = doc["compare"]["sensitivity"]["benchmarks"]
    assert row["rho_ext"] is not None and row["rho_downstream"] is not None and row["n_models_ext"] == 12
    scopes = {r["scope"] for r in doc["compare"]["sensitivity"]["runs"]}
    assert scopes == {"extraction", "downstream"}
    # similarity: what was embedded, both layers' r against scipy
    sim = doc["compare"]["similarity"]
    vsp = sim["texts"]["athenabench.vsp"]
    assert len(vsp["embedded"]) == 51 and seen.count(vsp["embedded"][1]) >= 1
    assert not any("Analyze the following CVE description" in t for t in vsp["embedded"])
    assert "Attack Vector (AV): Network (N), Adjacent (A), Local (L), Physical (P)" in vsp["template_removed"]["lines"]
    for side in ("a", "b"):
        table = doc["compare"]["by_set"][side]["similarity"]
        pairs = [p for p in table["pairs"] if p["tau_b"] is not None]
        ref = st.pearsonr([p["similarity"] for p in pairs], [p["tau_b"] for p in pairs])
        assert table["n_pairs"] == 15 and table["pearson_r"] == pytest.approx(ref.statistic)
        assert sim["layers"][side]["p_value"] == pytest.approx(ref.pvalue)
    text = capsys.readouterr().out
    assert "released (a): Pearson r" in text and "standardized (b): Pearson r" in text
    assert "rho_ext" in text and "rho_downstream" in text and "no effect expected: inference.decoding.seed" in text
    assert "same requests: prompt.template" in text
    # Issue 33, item 16: a reason shared by the six tasks is said once, naming them (it was said six times)
    moot = [line for line in text.splitlines() if "no effect expected" in line]
    assert len(moot) == 2 and all(
        line.startswith("no effect expected: inference.decoding.")
        and " on athenabench ate, mcq, rcm, rms, taa, vsp: temperature is 0" in line
        for line in moot
    )
    assert len([line for line in text.splitlines() if line.startswith(("upstream: ", "same requests: "))]) == 3


def _no_findings(tmp_path: Path) -> Path:
    """A findings file with none (diagnose is not what this test checks, and costs time)."""
    path = tmp_path / "findings.json"
    path.write_text(json.dumps({"findings": []}))
    return path
