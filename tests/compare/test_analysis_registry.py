"""The compare document's analysis registry (:mod:`pytest_benchaudit.compare.analysis_registry`).

An analysis registered from here, outside the package, reaches ``compare.json``, the terminal text and the
HTML report of ``benchaudit compare`` on AthenaBench's published runs (imported from
``$BENCHAUDIT_DATA/athenabench/runs-mini``: 12 models x 6 tasks), computed from the run sets; its numbers are
checked against the runs' own ``summary.json``.  The built-in analyses are on the same registry.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.cli.compare_cmd import add_parser
from pytest_benchaudit.cli.compare_cmd import run as run_compare
from pytest_benchaudit.compare import (
    Analysis,
    AnalysisContext,
    HtmlKit,
    HtmlSection,
    analyses,
    compare_document,
    load_runs,
    make_sets,
    register,
    unregister,
)
from pytest_benchaudit.importers import import_athenabench_runs

HOSTILE = '<img src=x onerror="alert(1)">'


def _spread(ctx: AnalysisContext) -> dict[str, Any]:
    """Per task of set a: the highest headline score minus the lowest, over the models that have one."""
    out = {}
    for key, by_model in sorted(ctx.set_a.results.items()):
        scores = [r["score"] for r in by_model.values() if r["score"] is not None]
        out[key] = {"spread": max(scores) - min(scores), "n_models": len(scores)}
    ctx.note("score_spread: a toy analysis registered by the test")
    return out


def _spread_text(part: Mapping[str, Any]) -> str:
    return "Score spread (toy)\n" + "\n".join(
        f"  {k}: {v['spread']:.4f} over {v['n_models']} models" for k, v in part.items()
    )


def _spread_html(part: Mapping[str, Any], _doc: Mapping[str, Any], kit: HtmlKit) -> str:
    return kit.note(f"max - min headline score per task {HOSTILE}") + kit.table(
        ["task", "spread", "models"], [[k, kit.fmt(v["spread"]), v["n_models"]] for k, v in part.items()]
    )


TOY = Analysis(
    name="score_spread",
    compute=_spread,
    text=_spread_text,
    html=HtmlSection("spread", f"Score spread {HOSTILE}", _spread_html, nav="Spread"),
    summary="toy: max - min headline per task",
)


@pytest.fixture
def toy() -> Iterator[Analysis]:
    register(TOY)
    try:
        yield TOY
    finally:
        unregister(TOY.name)


@pytest.fixture(scope="module")
def released(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    root = tmp_path_factory.mktemp("registry") / "released"
    import_athenabench_runs(source, root, SUITES, str(real_data))
    return root


def _compare(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run_compare(parser.parse_args(["compare", *argv]))


def _expected_spread(root: Path) -> dict[str, dict[str, Any]]:
    """The spread recomputed from each run's summary.json (what the runs themselves say their scores are)."""
    scores: dict[str, list[float]] = {}
    for summary in sorted(root.glob("*/summary.json")):
        for r in json.loads(summary.read_text(encoding="utf-8"))["results"]:
            if r["score"] is not None and not r.get("variant"):
                scores.setdefault(f"{r['benchmark']}.{r['task']}", []).append(r["score"])
    return {k: {"spread": max(v) - min(v), "n_models": len(v)} for k, v in sorted(scores.items())}


def test_the_built_in_analyses_are_registered_in_order() -> None:
    from pytest_benchaudit.compare.analysis_registry import REPORT_ANCHORS
    from pytest_benchaudit.report import html

    # The registry refuses the report's own anchors: the two lists are one.
    assert REPORT_ANCHORS == {anchor for anchor, _title in html._NAV}
    names = [a.name for a in analyses()]
    assert names[:3] == ["peer_gaps", "similarity", "sensitivity"]
    assert [a.on_request for a in analyses()[:3]] == [False, True, True]
    assert all(a.text is not None and a.html is not None for a in analyses()[:3])


def test_a_registered_analysis_is_in_compare_json_the_text_and_the_html(released, toy, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert (
        _compare(
            str(released),
            "--out",
            str(out),
            "--html",
            str(out / "report.html"),
            "--resamples",
            "20",
            "--permutations",
            "20",
        )
        == 0
    )
    doc = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    expected = _expected_spread(released)
    assert sorted(doc["score_spread"]) == sorted(expected) and len(expected) == 6
    for key, want in expected.items():
        assert doc["score_spread"][key]["n_models"] == want["n_models"] == 12
        assert doc["score_spread"][key]["spread"] == pytest.approx(want["spread"], abs=1e-12)
    assert "score_spread: a toy analysis registered by the test" in doc["notes"]
    text = capsys.readouterr().out
    assert "Score spread (toy)" in text
    vsp = expected["athenabench.vsp"]
    assert f"  athenabench.vsp: {vsp['spread']:.4f} over 12 models" in text
    # The toy's text comes after the core tables and before the notes.
    assert text.index("Per-task ranks") < text.index("Score spread (toy)") < text.index("note: score_spread")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<section id="spread"><h2>Score spread &lt;img src=x onerror=&quot;alert(1)&quot;&gt;</h2>' in page
    assert '<a href="#spread">Spread</a>' in page
    assert HOSTILE not in page  # every string the section gave the kit is escaped
    section = page[page.index('<section id="spread">') :]
    section = section[: section.index("</section>")]
    assert section.count("<tr>") == 1 + 6  # the header and one row per task
    # After the PCA, before the findings/notes: where the registered analyses' sections go.
    assert page.index('<section id="pca">') < page.index('<section id="spread">') < page.index('<section id="notes">')


def test_an_unregistered_analysis_is_gone(released, tmp_path) -> None:
    register(TOY)
    unregister(TOY.name)
    assert TOY.name not in [a.name for a in analyses()]
    assert _compare(str(released), "--out", str(tmp_path), "--resamples", "10", "--permutations", "10") == 0
    assert "score_spread" not in json.loads((tmp_path / "compare.json").read_text(encoding="utf-8"))


def test_an_on_request_analysis_runs_only_with_its_options(released) -> None:
    seen: list[object] = []

    def compute(ctx: AnalysisContext) -> dict[str, Any]:
        seen.append(ctx.options["scaled"])
        factor = ctx.options["scaled"]
        assert isinstance(factor, int)
        return {k: {m: factor * r["score"] for m, r in by.items()} for k, by in ctx.set_a.results.items()}

    register(Analysis(name="scaled", compute=compute, on_request=True))
    try:
        set_a, set_b = make_sets(load_runs([released]))
        plain = compare_document(set_a, set_b, n_resamples=10, permutations=10)
        assert "scaled" not in plain and seen == []
        asked = compare_document(
            *make_sets(load_runs([released])), n_resamples=10, permutations=10, options={"scaled": 100}
        )
        assert seen == [100]
        for key, by_model in asked["scores"].items():
            assert asked["scaled"][key] == pytest.approx({m: 100 * s for m, s in by_model.items()})
    finally:
        unregister("scaled")


@pytest.mark.parametrize(
    ("analysis", "message"),
    [
        (Analysis(name="peer_gaps", compute=lambda ctx: None), "'peer_gaps' is already registered"),
        (Analysis(name="scores", compute=lambda ctx: None), "core document already has that key"),
        (Analysis(name="two words", compute=lambda ctx: None), "letters, digits and '_'"),
        (
            Analysis(name="peerish", compute=lambda ctx: None, html=HtmlSection("peers", "x", lambda p, d, k: "")),
            "anchor 'peers' is taken by 'peer_gaps'",
        ),
        (
            Analysis(name="pcaish", compute=lambda ctx: None, html=HtmlSection("pca", "x", lambda p, d, k: "")),
            "anchor 'pca' is taken by \"the report's own section\"",
        ),
    ],
)
def test_a_clashing_registration_is_refused_by_name(analysis: Analysis, message: str) -> None:
    before = [a.name for a in analyses()]
    with pytest.raises(ValueError, match=message):
        register(analysis)
    assert [a.name for a in analyses()] == before
