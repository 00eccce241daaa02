"""The offline HTML report of a compare document: self-contained, escaped, renders in a browser."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

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


def _ranks(values: list[float]) -> dict[str, int]:
    order = sorted(range(len(values)), key=lambda i: -values[i])
    return {MODELS[i]: order.index(i) + 1 for i in range(len(values))}


def _doc() -> dict:
    return {
        "scores": {t: dict(zip(MODELS, v)) for t, v in SCORES.items()},
        "ranks": {t: _ranks(v) for t, v in SCORES.items()},
        "tau_b": [
            {"task_a": "seceval.mcq", "task_b": "cti-bench.mcq", "tau": 0.667, "p_value": 0.333, "inversions": 1, "n_models": 4},
            {"task_a": "seceval.mcq", "task_b": f"{ATTR}.rcm", "tau": 0.0, "p_value": 1.0, "inversions": 3, "n_models": 4},
        ],
        "rank_shift": [
            {"benchmark": "seceval", "model": m, "rank_a": a, "rank_b": b, "shift": b - a, "direction_stability": s}
            for m, a, b, s in [("alpha", 1, 3, 0.9), (SCRIPT, 2, 1, 0.8), (IMG, 3, 2, 0.6), (MATH, 4, 4, 1.0)]
        ],
        "spearman": [{"benchmark": "seceval", "rho": 0.4, "ci95": [-0.2, 0.85]}],
        "win_rate": {m: {"wins": i, "losses": 3 - i} for i, m in enumerate(MODELS)},
    }


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
    out = write_html(_doc(), tmp_path / "sub" / "report.html", sweeps=SWEEPS, runs=RUNS)
    assert out == tmp_path / "sub" / "report.html" and out.is_file()
    return out


def test_self_contained_with_three_plots(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"<(script|link|iframe|object|embed)\b", text, re.I)
    assert text.count(PLOT) == 3  # bump chart, sweep deltas, invalid rates
    assert text.count("<img") == 3
    for section in ("Scores per task", "Ranks per task", "Kendall", "Spearman", "Rank shifts", "Per-field score deltas",
                    "Invalid rates", "win_rate"):
        assert section in text
    assert "[-0.200, 0.850]" in text  # rho's CI


def test_hostile_strings_are_escaped(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    for s in HOSTILE:
        if s != MATH:
            assert s not in text, s
        assert html.escape(s, quote=True) in text, s
    assert "<svg" not in text and "onerror=\"" not in text


def test_bump_across_tasks_without_second_pipeline_and_empty_doc(tmp_path: Path) -> None:
    doc = _doc()
    del doc["rank_shift"]
    text = render_html(doc)
    assert text.count(PLOT) == 1 and 'alt="rank bump chart across tasks"' in text
    empty = write_html({}, tmp_path / "empty.html").read_text(encoding="utf-8")
    assert empty.count(PLOT) == 0 and "<h1>" in empty


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
    assert len(re.findall(r"<img\b", dom)) == 3  # only the three plots, no injected <img src=x>
    assert not re.search(r"<script\b|<svg\b", dom)
    # A serialised text node escapes <, > and & (not quotes): the hostile names are there as text.
    assert html.escape(SCRIPT, quote=False) in dom
    assert html.escape(IMG, quote=False) in dom
