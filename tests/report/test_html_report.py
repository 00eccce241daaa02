"""The offline HTML report of a compare document: self-contained, escaped, renders in a browser."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from helpers.html_report_doc import ATTR, FINDINGS, IMG, MATH, RUNS, SCRIPT, SWEEPS, TITLE, compare_doc
from pytest_benchaudit.report.html import render_html, write_html

HOSTILE = [SCRIPT, IMG, ATTR, MATH]
PLOT = '<img src="data:image/png;base64,'


@pytest.fixture
def report(tmp_path: Path) -> Path:
    out = write_html(compare_doc(), tmp_path / "sub" / "report.html", sweeps=SWEEPS, runs=RUNS, findings=FINDINGS)
    assert out == tmp_path / "sub" / "report.html" and out.is_file()
    return out


#: Each section's heading and a number it must show, rounded to what it means.
SECTIONS = {
    "Summary": "standardized",
    "Scores per task": "12.3",  # set b's own score, in percent
    "Ranks per task": "2.5",  # a tie keeps its half rank
    "Rank shifts between released and standardized": "[-0.20, 0.85]",  # rho's CI
    "Kendall τ-b between tasks": "0.67",
    "Principal components of the score matrix": None,  # filled in below from the PCA
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
    known["Principal components of the score matrix"] = f"{100 * compare_doc()['pca']['variance_explained'][0]:.1f}%"
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
    assert sorted(alts) == sorted(
        [
            "rank shift bump chart",
            "tau-b heatmap",
            "tau-b heatmap",
            "PCA scree plot all tasks",
            "PCA biplot all tasks",
            "similarity scatter",
            "per-field score deltas (percentage points)",
            "invalid rates per model and task",
        ]
    )
    visible = _visible(text)
    for heading, number in _known().items():
        assert heading in visible, heading
        assert number in visible, (heading, number)
    assert "Set a: released" in visible and "Set b: standardized" in visible  # both sets, labelled


def test_numbers_are_rounded_and_ranks_are_integers_unless_tied(report: Path) -> None:
    visible = _visible(report.read_text(encoding="utf-8"))
    assert not re.search(r"\d\.\d{4,}", visible), re.search(r".{30}\d\.\d{4,}.{10}", visible)
    assert not re.search(
        r"\b\d\.0\b", visible.split("Per-field score deltas")[0].split("Ranks per task")[1].split("Kendall")[0]
    )  # ranks 1, 2, 3: no 1.0
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
    doc = compare_doc()
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
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


def test_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    binary = _chromium()
    shot = tmp_path / "shot.png"
    proc = _browser(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000, proc.stderr[-2000:]

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
