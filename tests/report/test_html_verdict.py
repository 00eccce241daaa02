"""The report answers the author's question first: a verdict per benchmark on the first screen, then the
evidence (one table per benchmark, findings by size, pp apart from metric units, small-sample warnings,
biplot labels that do not overlap).

The verdict is checked against what other code computed: the audit's own per-layer scores, the
attribution rows, and ``benchaudit rescore`` run with the command the verdict prints."""

from __future__ import annotations

import argparse
import html
import itertools
import json
import random
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as st

pytest.importorskip("matplotlib")

from helpers import SUITES
from pytest_benchaudit.report.html import render_html
from pytest_benchaudit.report.html.analysis_plots import biplot_figure, text_box
from pytest_benchaudit.report.html.sets import win_rates
from pytest_benchaudit.report.html.verdict import verdicts

# --------------------------------------------------------------------------- a small two-benchmark document

ALPHA = {
    "bench_a.t1": {"m1": 0.80, "m2": 0.60, "m3": 0.55, "m4": 0.30},
    "bench_a.t2": {"m1": 0.50, "m2": 0.70, "m3": 0.70, "m4": 0.10},
}
BETA = {
    "bench_b.mcq": {"x1": 0.90, "x2": 0.40, "x3": 0.65},
    "bench_b.vsp": {"x1": 1.20, "x2": 2.50, "x3": 1.90},
}  # a MAD: lower is better, CVSS points
LOWER = {"bench_b.vsp"}


def _ranks(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for task, by_model in scores.items():
        models = sorted(by_model)
        sign = 1 if task in LOWER else -1  # rank 1 = best, direction-aware
        ranks = st.rankdata([sign * by_model[m] for m in models], method="average")
        out[task] = {m: float(r) for m, r in zip(models, ranks)}
    return out


def _side(label: str, scores: dict[str, dict[str, float]]) -> dict[str, Any]:
    tasks = {
        t: {"metrics": ["cvss_abs_diff_cti" if t in LOWER else "exact_match"], "lower_is_better": t in LOWER}
        for t in scores
    }
    return {"label": label, "pipelines": [label], "scores": scores, "ranks": _ranks(scores), "tasks": tasks}


def _doc(b_moves: dict[tuple[str, str], float] | None = None) -> dict[str, Any]:
    """Set a = ALPHA + BETA; set b = the same with ``b_moves`` added to (task, model) scores."""
    a = {**ALPHA, **BETA}
    b = {t: dict(v) for t, v in a.items()}
    for (task, model), d in (b_moves or {}).items():
        b[task][model] = round(b[task][model] + d, 6)
    return {
        "by_set": {"a": _side("released", a), "b": _side("standardized", b)},
        "label_a": "released",
        "label_b": "standardized",
        "comparison": {"a": "released", "b": "standardized", "by": "pipelines"},
        "sets": {
            "a": {"label": "released", "runs": ["/runs/ra-m1", "/runs/ra-x1"]},
            "b": {"label": "standardized", "runs": []},
        },
        "spearman": [
            {"benchmark": "bench_a", "rho": 0.8, "ci95": [0.2, 1.0], "n_models": 4},
            {"benchmark": "bench_b", "rho": 0.5, "ci95": [-1.0, 1.0], "n_models": 3},
        ],
        "rank_shift": [
            {"benchmark": "bench_a", "model": m, "rank_a": 1.0, "rank_b": 1.0, "shift": 0.0}
            for m in ("m1", "m2", "m3", "m4")
        ],
        "min_shift_for_stability": 3,
    }


MOVES = {
    ("bench_a.t1", "m2"): -0.031,
    ("bench_a.t2", "m4"): 0.12,
    ("bench_b.mcq", "x3"): -0.05,
    ("bench_b.vsp", "x2"): 0.4,
}

SWEEPS = [
    {
        "benchmark": "bench_a",
        "task": "t2",
        "model": "m4",
        "variant": "denominator=total",
        "field": "scoring.denominator",
        "value": "total",
        "delta_pp": 12.0,
        "delta": 0.12,
        "unit": "pp",
        "moved_by": "scoring",
        "run": "/runs/ra-m4",
    },
    {
        "benchmark": "bench_a",
        "task": "t1",
        "model": "m2",
        "variant": "extraction.rule=final_answer_letter",
        "field": "extraction.rule",
        "value": "final_answer_letter",
        "delta_pp": -3.1,
        "delta": -0.031,
        "unit": "pp",
        "moved_by": "extraction",
    },
    {
        "benchmark": "bench_b",
        "task": "vsp",
        "model": "x2",
        "variant": "extraction.rule=cvss_final_vector",
        "field": "extraction.rule",
        "value": "cvss_final_vector",
        "delta_pp": None,
        "delta": 0.4,
        "unit": "cvss_abs_diff_cti",
        "lower_is_better": True,
        "moved_by": "scoring",
    },
]
FINDINGS = [
    {
        "benchmark": "bench_a",
        "task": "t1",
        "model": "m1",
        "run": "ra-m1",
        "failure_mode": "FM05",
        "field": "extraction.reasoning",
        "effect_pp": -20.0,
        "effect": "re-scored: -20.0 pp",
        "hypothesis": "h",
    },
    {
        "benchmark": "bench_b",
        "task": "mcq",
        "model": "x1",
        "run": "ra-x1",
        "failure_mode": "FM12",
        "field": "dataset",
        "effect_pp": 0.4,
        "effect": "recomputed",
        "hypothesis": "h",
    },
    {
        "benchmark": "bench_b",
        "task": "vsp",
        "model": "x1",
        "failure_mode": "FM14",
        "field": "inference.seed",
        "effect_pp": None,
        "effect": "needs new generations",
        "hypothesis": "h",
    },
]


def _by_bench(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {v["benchmark"]: v for v in found}


def test_verdict_per_benchmark_is_built_from_the_fields() -> None:
    found = _by_bench(verdicts(_doc(MOVES), SWEEPS, FINDINGS))
    assert sorted(found) == ["bench_a", "bench_b"]
    a, b = found["bench_a"], found["bench_b"]
    # the largest move, by hand: bench_a's moves are -3.1 pp (m2, t1) and +12 pp (m4, t2)
    assert (a["largest_move"]["model"], a["largest_move"]["task"]) == ("m4", "bench_a.t2")
    assert a["largest_move"]["pp"] == pytest.approx(12.0)
    # bench_b: mcq moves in pp, vsp (a MAD) in its own unit: never one number
    assert b["largest_move"]["pp"] == pytest.approx(-5.0) and b["largest_move"]["task"] == "bench_b.mcq"
    assert b["largest_metric_move"]["delta"] == pytest.approx(0.4)
    assert b["largest_metric_move"]["unit"] == "cvss_abs_diff_cti" and "pp" not in b["largest_metric_move"]
    # causes by |effect|, one per field, across sweeps and findings; the MAD cause kept apart
    assert [(c["field"], c["pp"]) for c in a["causes"]] == [
        ("extraction.reasoning", -20.0),
        ("scoring.denominator", 12.0),
        ("extraction.rule", -3.1),
    ]
    assert [c["field"] for c in b["causes"]] == ["dataset"]  # the seed finding has no effect: not a sized cause
    assert [(c["field"], c["delta"]) for c in b["metric_causes"]] == [("extraction.rule", 0.4)]
    # the commands: a sweep row re-scores its own run; a finding without a value re-runs diagnose on its run
    assert a["causes"][1]["command"] == "benchaudit rescore /runs/ra-m4 --set scoring.denominator=total"
    assert a["causes"][2]["command"] == "benchaudit rescore RUN --set extraction.rule=final_answer_letter"
    assert a["causes"][0]["command"] == "benchaudit diagnose /runs/ra-m1"
    assert a["rank"]["rho"] == 0.8 and a["rank"]["n_models"] == 4 and a["rank"]["small_sample"]
    assert a["dependent"] and b["dependent"]


def test_verdict_ignores_display_strings_and_input_order() -> None:
    base = verdicts(_doc(MOVES), SWEEPS, FINDINGS)
    reworded = [dict(f, effect="something else", hypothesis="reworded", title="t") for f in FINDINGS]
    assert verdicts(_doc(MOVES), SWEEPS, reworded) == base
    shuffled_sweeps, shuffled_findings = list(reversed(SWEEPS)), list(reversed(FINDINGS))
    assert verdicts(_doc(MOVES), shuffled_sweeps, shuffled_findings) == base
    # a benchmark's verdict does not depend on another benchmark's data
    alone = verdicts(
        {**_doc(MOVES), "spearman": _doc()["spearman"][:1]},
        [s for s in SWEEPS if s["benchmark"] == "bench_a"],
        [f for f in FINDINGS if f["benchmark"] == "bench_a"],
    )
    assert _by_bench(alone)["bench_a"]["causes"] == _by_bench(base)["bench_a"]["causes"]
    # a finding on a cell a re-score already moved is one cell moved, not two
    twice = FINDINGS + [
        {
            "benchmark": "bench_a",
            "task": "t2",
            "model": "m4",
            "failure_mode": "FM01",
            "field": "scoring.denominator",
            "effect_pp": 12.0,
            "hypothesis": "h",
        }
    ]
    denominator = next(
        c
        for c in _by_bench(verdicts(_doc(MOVES), SWEEPS, twice))["bench_a"]["causes"]
        if c["field"] == "scoring.denominator"
    )
    assert denominator["n_moved"] == 1 and denominator["source"] == "re-score"  # the exact command wins the tie
    # a changed number changes the verdict
    bigger = [dict(f, effect_pp=-60.0) if f["failure_mode"] == "FM05" else f for f in FINDINGS]
    assert _by_bench(verdicts(_doc(MOVES), SWEEPS, bigger))["bench_a"]["causes"][0]["pp"] == -60.0


def test_a_finding_in_a_metric_unit_stays_apart_from_points() -> None:
    mad = {
        "benchmark": "bench_b",
        "task": "vsp",
        "model": "x3",
        "run": "ra-x3",
        "failure_mode": "FM12",
        "field": "dataset",
        "effect_pp": None,
        "effect_delta": -0.9,
        "hypothesis": "h",
    }
    b = _by_bench(verdicts(_doc(MOVES), SWEEPS, FINDINGS + [mad]))["bench_b"]
    assert [(c["field"], c["pp"]) for c in b["causes"]] == [("dataset", 0.4)]  # its pp cause unchanged
    assert [(c["field"], c["delta"], c["unit"]) for c in b["metric_causes"]] == [
        ("dataset", -0.9, "cvss_abs_diff_cti"),
        ("extraction.rule", 0.4, "cvss_abs_diff_cti"),
    ]
    # the sentence names a material error-metric move only (1% of its base or more)
    assert "extraction.rule moves cvss_abs_diff_cti" not in b["sentence"]  # no base score: not judged
    sized = [dict(SWEEPS[2], base_score=2.5)]
    assert (
        "extraction.rule moves cvss_abs_diff_cti by +0.4 (from 2.5)"
        in _by_bench(verdicts(_doc(), sized, []))["bench_b"]["sentence"]
    )
    tiny = [dict(SWEEPS[2], base_score=2.5, delta=0.02)]
    assert "moves cvss_abs_diff_cti" not in _by_bench(verdicts(_doc(), tiny, []))["bench_b"]["sentence"]
    every = _by_bench(verdicts(_doc(), [], [dict(FINDINGS[1], model="*", run="")]))["bench_b"]
    assert "every model · mcq" in render_html(_doc(), findings=[dict(FINDINGS[1], model="*", run="")])
    assert every["causes"][0]["command"] == "benchaudit diagnose RUN"


def test_an_upstream_cause_is_reproduced_by_a_new_run() -> None:
    row = {
        "benchmark": "bench_a",
        "task": "t1",
        "model": "m3",
        "variant": "max_tokens=5",
        "kind": "upstream",
        "field": "inference.max_tokens",
        "value": 5,
        "delta_pp": -40.0,
        "delta": -0.4,
        "moved_by": "inference",
    }
    a = _by_bench(verdicts(_doc(), [row], []))["bench_a"]
    assert a["causes"][0]["command"] == "pytest suites/bench_a --model m3@URL --vary inference.max_tokens=5"
    assert "benchaudit rescore" not in render_html(_doc(), sweeps=[row])  # rescore refuses upstream fields


def test_no_move_is_not_pipeline_dependent() -> None:
    (a, b) = verdicts(_doc({("bench_a.t1", "m1"): 0.004}), [], [])
    assert a["dependent"] is False and "not pipeline-dependent beyond 1 pp" in a["sentence"]
    assert b["largest_move"]["pp"] == 0.0


def test_metric_change_between_sets_is_not_compared() -> None:
    doc = _doc(MOVES)
    doc["by_set"]["b"]["tasks"]["bench_b.vsp"] = {"metrics": ["cvss_abs_diff"], "lower_is_better": True}
    b = _by_bench(verdicts(doc, [], []))["bench_b"]
    assert b["largest_metric_move"] is None and b["metric_differs"] == ["bench_b.vsp"]


def test_the_sentence_says_what_the_move_leaves_out_and_where_a_larger_cause_acts() -> None:
    """Issue 33, item 16: the move compares the sets on the tasks both score with one metric, a cause changes
    one field alone on any task; a cause larger than the move says why (AthenaBench's VSP: -35.2 pp)."""
    doc = _doc(MOVES)
    doc["by_set"]["b"]["tasks"]["bench_b.vsp"] = {"metrics": ["cvss_closeness"], "lower_is_better": False}
    vsp = {
        "benchmark": "bench_b",
        "task": "vsp",
        "model": "x2",
        "variant": "denominator=total",
        "field": "scoring.denominator",
        "value": "total",
        "delta_pp": -35.2,
        "delta": -0.352,
        "unit": "pp",
        "moved_by": "scoring",
    }
    found = _by_bench(verdicts(doc, [*SWEEPS, vsp], FINDINGS))
    b = found["bench_b"]
    assert abs(b["causes"][0]["pp"]) > abs(b["largest_move"]["pp"])  # the case: a cause larger than the move
    assert (
        "released → standardized moves a score by up to -5.0 pp on the tasks both score with one metric (vsp "
        "left out: its metric differs between the sets)"
    ) in b["sentence"]
    assert (
        "largest cause scoring.denominator, changed alone (-35.2 pp on vsp, a task the move above leaves out)"
        in b["sentence"]
    )
    # on a task the move compares, a larger single-field effect is one the other changes offset
    a = found["bench_a"]
    assert a["largest_move"]["pp"] == pytest.approx(12.0) and a["causes"][0]["pp"] == -20.0
    assert (
        "largest cause extraction.reasoning, changed alone (-20.0 pp on t1, more than the move between the sets: "
        "their other changes offset it)"
    ) in a["sentence"]
    # a cause within the move's size needs no excuse; nothing left out, nothing said of it
    small = _by_bench(verdicts(_doc(MOVES), SWEEPS[:2], []))["bench_a"]
    assert small["sentence"].endswith("largest cause scoring.denominator, changed alone (+12.0 pp on t2).")
    assert "left out" not in small["sentence"]


def _tables(section_html: str) -> list[tuple[list[str], list[list[str]]]]:
    out = []
    for t in re.findall(r"<table>(.*?)</table>", section_html, re.S):
        heads = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", t)]
        rows = [
            [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", t.split("<tbody>", 1)[1])
        ]
        out.append((heads, rows))
    return out


def _section(page: str, anchor: str) -> str:
    m = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert m, anchor
    return m.group(1)


def test_disjoint_benchmarks_get_their_own_tables_and_win_rates() -> None:
    page = render_html(_doc())
    tables = _tables(_section(page, "scores"))
    assert len(tables) == 4  # two sets x two benchmarks
    for heads, rows in tables:
        models = {r[0] for r in rows}
        assert models in ({"m1", "m2", "m3", "m4"}, {"x1", "x2", "x3"}), models  # never mixed
        assert "—" not in {c for r in rows for c in r}  # every model beside only the tasks it ran
        assert heads[-1] == "mean win rate"
    # win rate by hand: on each task, the share of the other models it beats (tie = 1/2)
    ranks = _ranks(ALPHA)
    for m in ALPHA["bench_a.t1"]:
        per_task = []
        for scores in ALPHA.values():
            others = [o for o in scores if o != m]
            per_task.append(sum((scores[m] > scores[o]) + 0.5 * (scores[m] == scores[o]) for o in others) / len(others))
        assert win_rates(ranks, list(ALPHA))[m] == pytest.approx(sum(per_task) / len(per_task))
    # adding a benchmark whose models never met bench_a's changes none of bench_a's win rates
    both = {**ranks, **_ranks(BETA)}
    assert {m: v for m, v in win_rates(both, list(both)).items() if m.startswith("m")} == win_rates(ranks, list(ALPHA))
    shown = {r[0]: r[-1] for heads, rows in tables[:1] for r in rows}
    assert shown["m1"] == f"{100 * win_rates(ranks, list(ALPHA))['m1']:.1f}%"


def test_findings_are_sorted_by_effect() -> None:
    random.seed(3)
    shuffled = [dict(FINDINGS[0], effect_pp=v, task=f"t{v}") for v in (1.0, -30.0, None, 5.5, -0.2)]
    random.shuffle(shuffled)
    rows = _tables(_section(render_html({}, findings=shuffled), "findings"))[0][1]
    assert [r[-1] for r in rows] == ["-30.0", "+5.5", "+1.0", "-0.2", "re-scored: -20.0 pp"]


def test_pp_and_metric_units_never_share_an_axis() -> None:
    page = render_html({}, sweeps=SWEEPS)
    alts = re.findall(r'<img src="data:image/png;base64,[^"]+" alt="([^"]*)"', page)
    assert alts == ["per-field score deltas (percentage points)", "per-field score deltas (cvss_abs_diff_cti)"]
    deltas = [r[5] for r in _tables(_section(page, "sweeps"))[0][1]]
    assert deltas == ["+12.0 pp", "-3.1 pp", "+0.4 cvss_abs_diff_cti"]


def _pca(models: list[str], tasks: list[str], coords: list[tuple[float, float]]) -> dict[str, Any]:
    n = len(tasks)
    return {
        "models": models,
        "columns": tasks,
        "models_left_out": [],
        "eigenvalues": [n * 0.7, n * 0.3],
        "variance_explained": [0.7, 0.3],
        "cumulative": [0.7, 1.0],
        "loadings": {t: [0.9 - 0.01 * k, 0.1 + 0.01 * k] for k, t in enumerate(tasks)},
        "model_coordinates": dict(zip(models, [list(c) for c in coords])),
        "parallel_analysis": {"threshold": [1.5, 1.0], "n_components": 1, "n_permutations": 100},
    }


def test_small_samples_are_flagged() -> None:
    few = _pca([f"m{k}" for k in range(5)], ["b.t1", "b.t2"], [(k * 0.3, k * 0.1) for k in range(5)])
    many = _pca([f"m{k}" for k in range(8)], ["b.t1", "b.t2"], [(k * 0.3, k * 0.1) for k in range(8)])
    warn = "Small sample: this PCA (5 models x 2 tasks) rests on 5 models"
    assert warn in html.unescape(render_html({"pca": few}))
    assert "Small sample" not in render_html({"pca": many})
    page = html.unescape(render_html(_doc(MOVES)))
    assert "bench_b: Small sample: Spearman ρ rests on 3 models" in page
    assert "bench_a: Small sample: Spearman ρ rests on 4 models" in page
    doc = _doc(MOVES)
    doc["spearman"][0]["n_models"] = 8
    assert "bench_a: Small sample" not in html.unescape(render_html(doc))
    tau = [
        {"task_a": "b.t1", "task_b": "b.t2", "tau": 0.4, "p_value": 0.5, "inversions": 3, "n_models": n} for n in (9, 5)
    ]
    assert "Small sample: τ-b of the pairs with 5 common models rests on 5 models" in html.unescape(
        render_html({"tau_b": tau, "scores": ALPHA})
    )
    assert "Small sample" not in render_html({"tau_b": tau[:1], "scores": ALPHA})


def test_biplot_labels_do_not_overlap() -> None:
    # ten models packed close, and long task names whose arrows end together: fixed offsets would collide
    models = [f"model-{k}-with-a-long-name" for k in range(10)]
    coords = [(0.02 * k, 0.01 * (k % 3)) for k in range(9)] + [(3.0, -2.0)]
    tasks = [f"bench.task_{k}_named_at_length" for k in range(4)]
    fig = biplot_figure(_pca(models, tasks, coords), "crowded")
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text()]
    assert sorted(t.get_text() for t in labels) == sorted(
        [str(k) for k in range(1, 11)] + [t.partition(".")[2] for t in tasks]
    )
    boxes = [text_box(t, renderer) for t in labels]  # the text, not its leader line
    for (i, p), (j, q) in itertools.combinations(enumerate(boxes), 2):
        assert not p.overlaps(q), (labels[i].get_text(), labels[j].get_text())
    frame = ax.get_window_extent(renderer)
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    # the same points labelled at one fixed offset (the old layout) do overlap: the case is a real one
    anchors = [ax.transData.transform(c) for c in coords[:9]]
    w, h = boxes[0].width, boxes[0].height
    assert any(abs(p[0] - q[0]) < w and abs(p[1] - q[1]) < h for p, q in itertools.combinations(anchors, 2))
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0] == "1  model-0-with-a-long-name" and len(legend) == 10


def test_every_table_and_plot_has_a_definition_line() -> None:
    """Each section with a table says what its numbers are; each plot has a caption."""
    from helpers.html_report_doc import FINDINGS as F
    from helpers.html_report_doc import RUNS
    from helpers.html_report_doc import SWEEPS as S
    from helpers.html_report_doc import compare_doc as full_doc

    ledger = [
        {
            "benchmark": "b",
            "cells": {"dataset": {"status": "matched"}, "prompt.template": {"status": "undefined"}},
            "summary": "no",
        }
    ]
    upstream = [{"task": "b.t", "fields": [{"field": "prompt.template", "stored": "released", "standardized": "x"}]}]
    page = render_html(full_doc(), sweeps=S, runs=RUNS, findings=F, ledger=ledger, upstream=upstream)
    sections = re.findall(r'<section id="([^"]+)">(.*?)</section>', page, re.S)
    assert {"verdict", "causes", "scores", "ranks", "tau", "pca", "findings", "sweeps", "invalid", "ledger"} <= {
        a for a, _ in sections
    }
    for anchor, body in sections:
        for fig in re.findall(r"<figure>.*?</figure>", body, re.S):
            assert re.search(r"<figcaption>[^<]{20,}</figcaption>", fig), anchor
        if "<table>" in body:  # what the numbers mean: a definition line in the section of each table
            assert re.search(r'<p class="note">[^<]{30,}</p>', body), anchor


# --------------------------------------------------------------------------- the published CTI-Bench runs


@pytest.fixture(scope="module")
def cti_audit(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pytest_benchaudit.cli.audit_cmd import add_parser, run
    from pytest_benchaudit.importers import import_cti_bench_responses

    source = real_data / "cti-bench" / "responses"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    root = tmp_path_factory.mktemp("cti-verdict")
    import_cti_bench_responses(source, root / "released", SUITES, str(real_data))
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    out = root / "audit"
    assert (
        run(
            parser.parse_args(
                [
                    "audit",
                    str(root / "released"),
                    "--out",
                    str(out),
                    "--suites-dir",
                    str(SUITES),
                    "--data-dir",
                    str(real_data),
                    "--resamples",
                    "50",
                ]
            )
        )
        == 0
    )
    return out


def _cti_verdict(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = json.loads((out / "audit.json").read_text())
    moved = [r for r in doc["attribution"] if r.get("moved_by") not in (None, "none")]
    (v,) = verdicts(doc["compare"], moved, doc["findings"])
    return doc, v


def test_cti_verdict_matches_the_audit_scores(cti_audit: Path) -> None:
    doc, v = _cti_verdict(cti_audit)
    assert v["benchmark"] == "cti_bench"
    # the largest move, recomputed from the audit's per-layer score table (not the compare document)
    released = {(f"cti_bench.{r['task']}", r["model"]): r for r in doc["scores"] if r["layer"] == "released"}
    standard = {(f"cti_bench.{r['task']}", r["model"]): r for r in doc["scores"] if r["layer"] == "standardized"}
    # cells scored with the same share metric under both layers (a metric change does not compare)
    cells = {
        k: 100 * (standard[k]["score"] - released[k]["score"])
        for k in released.keys() & standard.keys()
        if released[k]["metric"] == standard[k]["metric"] and not doc["compare"]["tasks"][k[0]]["lower_is_better"]
    }
    want = max(cells, key=lambda k: abs(cells[k]))
    got = v["largest_move"]
    assert (got["task"], got["model"]) == want and got["pp"] == pytest.approx(cells[want])
    # the top cause is the largest single-field pp effect among the attribution rows and the findings
    sizes = [abs(r["delta_pp"]) for r in doc["attribution"] if r.get("delta_pp") is not None]
    sizes += [abs(f["effect_pp"]) for f in doc["findings"] if f.get("effect_pp") is not None]
    assert abs(v["causes"][0]["pp"]) == pytest.approx(max(sizes), abs=0.05)
    assert v["rank"]["n_models"] == 5 and v["rank"]["small_sample"]


def test_cti_verdict_command_reproduces_its_cause(cti_audit: Path, real_data: Path, tmp_path: Path) -> None:
    from pytest_benchaudit.cli.app import main

    _, v = _cti_verdict(cti_audit)
    cause = next(c for c in v["causes"] if c["command"].startswith("benchaudit rescore ") and "RUN" not in c["command"])
    argv = shlex.split(cause["command"])[1:] + [
        "--report-dir",
        str(tmp_path),
        "--suites-dir",
        str(SUITES),
        "--data-dir",
        str(real_data),
    ]
    assert main(argv) == 0
    (new,) = [p for p in tmp_path.iterdir() if (p / "summary.json").is_file()]
    base_run = Path(shlex.split(cause["command"])[2])
    key = (cause["task"], cause["model"])

    def headline(run: Path) -> float:
        rows = json.loads((run / "summary.json").read_text())["results"]
        (row,) = [r for r in rows if (r["task"], r["model"]) == key and not r.get("variant")]
        return float(row["score"])

    assert 100 * (headline(new) - headline(base_run)) == pytest.approx(cause["pp"], abs=0.01)


def _chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if not path:
        pytest.skip("chromium is not installed (make install-browser installs it with apt-get when run as root)")
    return path


def _browser(binary: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1280,800",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


#: Run in a copy of the page (the report itself allows no script): the verdict's box in the viewport.
PROBE = (
    "<script>const r = document.getElementById('verdict').getBoundingClientRect();"
    "const widths = Array.from(document.querySelectorAll('table'), t => t.scrollWidth);"
    "document.body.setAttribute('data-probe', JSON.stringify({top: r.top, bottom: r.bottom, "
    "left: r.left, right: r.right, vw: innerWidth, vh: innerHeight, widest: Math.max(...widths), "
    "page: document.documentElement.scrollWidth}));</script>"
)


def test_verdict_is_on_the_first_screen(cti_audit: Path, tmp_path: Path) -> None:
    binary = _chromium()
    page = (cti_audit / "report.html").read_text(encoding="utf-8")
    assert 'http-equiv="Content-Security-Policy"' in page and "<script" not in page
    probe = tmp_path / "probe.html"
    probe.write_text(
        re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page).replace("</body>", PROBE + "</body>"),
        encoding="utf-8",
    )
    dom = _browser(binary, tmp_path, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'data-probe="([^"]+)"', dom)
    assert found, dom[-2000:]
    box = json.loads(html.unescape(found.group(1)))
    # --dump-dom keeps the window's width but not all of its height (the page lays out at 1280 px wide
    # all the same): the verdict must end above 800 px, the first screen of a 1280 x 800 window.
    assert box["vw"] == 1280, box
    assert 0 <= box["top"] < 120 and box["bottom"] <= 800, box  # the whole verdict, before any scroll
    assert box["right"] <= box["vw"], box  # and no wider than the page
    assert box["page"] <= 1280 and box["widest"] <= 1280 - 2 * 24, box  # no table scrolls sideways (24 px margins)
    # The screenshot of that first screen shows the verdict box's bottom border (#c9d3df) across the page.
    shot = tmp_path / "first-screen.png"
    _browser(binary, tmp_path, f"--screenshot={shot}", (cti_audit / "report.html").as_uri())
    from matplotlib.image import imread

    pixels = (imread(str(shot))[..., :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (800, 1280)
    border = ((pixels == (201, 211, 223)).all(axis=2).sum(axis=1) > 1000).nonzero()[0]
    assert len(border) >= 2 and border.max() == pytest.approx(box["bottom"], abs=2), (border, box)
    visible = html.unescape(re.sub(r"<[^>]+>", " ", _section(page, "verdict")))
    assert "cti_bench is pipeline-dependent" in visible or "cti_bench is not pipeline-dependent" in visible
    assert "rank stability" in visible and "benchaudit rescore RUN --set" in visible


def test_sensitivity_shows_every_rho_column_and_peer_gaps_name_their_unit() -> None:
    sens = {
        "n_resamples": 50,
        "runs": [{"kind": "downstream", "scope": "extraction"}],
        "columns": {"rho_gen": "regenerated", "rho_ext": "extraction only", "rho_downstream": "every field"},
        "benchmarks": [
            {
                "benchmark": "bench_b",
                "rho_gen": None,
                "why_no_gen": "no regenerated run",
                "rho_ext": 0.9,
                "ci95_ext": [0.5, 1.0],
                "n_models_ext": 5,
                "rho_downstream": 0.7,
                "ci95_downstream": [0.1, 1.0],
                "n_models_downstream": 5,
            }
        ],
    }
    gaps = [
        {
            "task": "bench_b.vsp",
            "model": "x1",
            "gap_a": -0.5,
            "gap_b": -0.2,
            "delta": 0.3,
            "comparable": True,
            "metric_a": "cvss_abs_diff_cti",
            "metric_b": "cvss_abs_diff_cti",
            "n_peers": 2,
        }
    ]
    page = render_html({"sensitivity": sens, "peer_gaps": gaps, "label_a": "a", "label_b": "b"})
    ((heads, rows),) = _tables(_section(page, "sensitivity"))
    assert heads[1:10] == ["ρ_gen", "95% CI", "models", "ρ_ext", "95% CI", "models", "ρ_downstream", "95% CI", "models"]
    assert rows[0][7:10] == ["0.70", "[0.10, 1.00]", "5"]
    visible = html.unescape(_section(page, "sensitivity"))
    assert "bench_b: Small sample: ρ_ext rests on 5 models" in visible
    assert "bench_b: Small sample: ρ_downstream rests on 5 models" in visible
    ((_, peer_rows),) = _tables(_section(page, "peers"))
    assert peer_rows[0][2:5] == ["-0.5 cvss_abs_diff_cti", "-0.2 cvss_abs_diff_cti", "+0.3 cvss_abs_diff_cti"]
