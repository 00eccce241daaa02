"""The HTML report's paired differences and the ``≈`` marks of its rank table.

Two real ``pytest suites/cybermetric -k cm80 --limit 24 --repeats 3`` runs through pytester (one run of
two models, one of a third) against the scripted server on 127.0.0.1, each model answering a question
correctly with a known probability from a random stream seeded per model and question (as
tests/compare/test_paired.py does), then ``benchaudit compare --html`` in a process of its own
(matplotlib imported inside a pytester test is dropped from sys.modules at its teardown, which
breaks later figures).  Every number of the section is read back from the page and checked against
compare.json, and compare.json's against records.jsonl with scipy; the ``≈`` marks and their
tooltips equal ``rank_ties``.  The imported AthenaBench runs (12 models x 6 tasks) check the cap on
listed pairs, both tests and the page in headless Chromium (no console error).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import threading
from collections import defaultdict
from html.parser import HTMLParser
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as st

from helpers import SUITES
from pytest_benchaudit.compare.render import MAX_PAIRS_SHOWN as TEXT_CAP
from pytest_benchaudit.report.html.paired import MAX_PAIRS_SHOWN, READING_GUIDE, paired_section
from pytest_benchaudit.report.html.sets import TIE_LEGEND, ranks_section
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer

LIMIT = 24
# Model -> P(right) on every question: alpha and beta close (their order should not be significant on
# 24 questions), gamma far below both.
SKILL = {"alpha": 0.85, "beta": 0.80, "gamma": 0.30}


class Dice:
    """The gold letter with the model's probability, from a random stream per model and question (seeded),
    else a wrong letter; the question is found by its text in the prompt."""

    def __init__(self, golds: dict[str, str]) -> None:
        self.golds = golds
        self.streams: dict[tuple[str, str], random.Random] = {}
        self.lock = threading.Lock()

    def __call__(self, call: Call) -> Reply:
        text = call.last_user_text
        question = max((q for q in self.golds if q in text), key=len)  # the longest: never a prefix of another
        model = str(call.body.get("model"))
        with self.lock:
            stream = self.streams.setdefault((model, question), random.Random(f"26:{model}:{question}"))
            right = stream.random() < SKILL[model]
        gold = self.golds[question]
        return Reply(content=f"Answer: {gold if right else ('A' if gold != 'A' else 'C')}")


# --------------------------------------------------------------------------- reading the page back


class _Blocks(HTMLParser):
    """Inside ``<section id=ID>``: headings and notes as (tag, text), tables as ("table", rows), each
    cell (text, the title of a ``<span>`` in it or None)."""

    def __init__(self, anchor: str) -> None:
        super().__init__()
        self.anchor = anchor
        self.inside = False
        self.blocks: list[tuple[str, Any]] = []
        self.text: list[str] | None = None
        self.cell: list[str] | None = None
        self.title: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self.inside = a.get("id") == self.anchor
        elif not self.inside:
            return
        elif tag in ("h2", "h3", "h4", "p"):
            self.text = []
        elif tag == "table":
            self.blocks.append(("table", []))
        elif tag == "tr":
            self.blocks[-1][1].append([])
        elif tag in ("td", "th"):
            self.cell, self.title = [], None
        elif tag == "span" and self.cell is not None:
            self.title = a.get("title")

    def handle_endtag(self, tag: str) -> None:
        if not self.inside:
            return
        if tag == "section":
            self.inside = False
        elif tag in ("h2", "h3", "h4", "p") and self.text is not None:
            self.blocks.append((tag, "".join(self.text).strip()))
            self.text = None
        elif tag in ("td", "th") and self.cell is not None:
            self.blocks[-1][1][-1].append(("".join(self.cell).strip(), self.title))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        elif self.text is not None:
            self.text.append(data)


def _blocks(page: str, anchor: str) -> list[tuple[str, Any]]:
    parser = _Blocks(anchor)
    parser.feed(page)
    return parser.blocks


def _dicts(rows: list[list[tuple[str, str | None]]]) -> list[dict[str, str]]:
    head, *body = rows
    return [dict(zip([h for h, _ in head], [c for c, _ in row])) for row in body]


def _paired_tasks(page: str, side: str = "a") -> dict[str, dict[str, Any]]:
    """Per task of a set: its summary line, the listed significant pairs, the 'more' line and the tie rows."""
    out: dict[str, dict[str, Any]] = {}
    task: dict[str, Any] | None = None
    mine = False
    for kind, value in _blocks(page, "paired"):
        if kind == "h3":
            mine, task = value.startswith(f"Set {side}:"), None
        elif not mine:
            continue
        elif kind == "h4":
            task = out.setdefault(value.removesuffix(" ↓"), {"line": None, "pairs": [], "more": None, "ties": []})
        elif task is None:
            continue
        elif kind == "p" and task["line"] is None:
            task["line"] = value
        elif kind == "p" and "more significant pairs" in value:
            task["more"] = value
        elif kind == "table":
            rows = _dicts(value)
            task["ties" if "ranked above" in rows[0] else "pairs"] = rows
    return out


def _rank_marks(page: str, side: str = "a") -> dict[tuple[str, str], tuple[str, str | None]]:
    """(task column, model) -> (cell text, tooltip) for every rank cell of a set's rank tables."""
    marks: dict[tuple[str, str], tuple[str, str | None]] = {}
    bench = ""
    mine = False
    for kind, value in _blocks(page, "ranks"):
        if kind == "h3":
            mine = value.startswith(f"Set {side}:")
        elif not mine:
            continue
        elif kind == "h4":
            bench = value
        elif kind == "table":
            head, *body = value
            for row in body:
                model = row[0][0]
                for (task, _), cell in zip(head[1:], row[1:]):
                    if task != "benchmark rank":
                        marks[(f"{bench}.{task}", model)] = cell
    return marks


# --------------------------------------------------------------------------- the expected text, written here


def _p(v: float | None) -> str:
    return "—" if v is None else "< 0.001" if v < 0.001 else f"{v:.2g}"


def _diff(v: float, share: bool) -> str:
    return f"{100 * v:+.1f}" if share else f"{v:+.3f}"


def _ci(ci: list[float] | None, share: bool) -> str:
    if ci is None:
        return "—"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if share else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _share(an: dict[str, Any], task: str) -> bool:
    """A share metric: higher is better and every score in [0, 1] (differences then in points)."""
    return not an["tasks"][task]["lower_is_better"] and all(0 <= v <= 1 for v in an["scores"][task].values())


def _check_task(task: str, shown: dict[str, Any], doc: dict[str, Any], share: bool) -> None:
    """One task's block of the page against one set's rows, ties and mde80 (compare.json, or its by_set)."""
    rows = [r for r in doc["paired"] if r["task"] == task]
    significant = [r for r in rows if r["significant"]]
    line = shown["line"]
    assert line.startswith(f"{len(significant)} of {len(rows)} pairs significant, {len(rows) - len(significant)} not.")
    assert f"Holm's correction over the task's {len(rows)} pairs" in line
    mde = doc["mde80"][task]
    mde_text = f"{100 * mde['mde80']:.1f} pp" if share else f"{mde['mde80']:.3f}"
    assert f"mde80: {mde_text} at {mde['n']} common questions." in line
    tests = {r["test"] for r in rows}
    assert ("exact McNemar" in line) == ("mcnemar_exact" in tests) and ("paired t" in line) == ("paired_t" in tests)
    listed = significant[:MAX_PAIRS_SHOWN]
    unit = " (pp)" if share else ""
    assert len(shown["pairs"]) == len(listed)
    for cells, r in zip(shown["pairs"], listed):  # compare.json's order
        assert (cells["model a"], cells["model b"], cells["questions"]) == (r["model_a"], r["model_b"], str(r["n"]))
        assert cells[f"diff a − b{unit}"] == _diff(r["diff"], share)
        assert cells[f"95% CI{unit}"] == _ci(r["ci95"], share)
        assert (cells["p"], cells["p Holm"]) == (_p(r["p_value"]), _p(r["p_holm"]))
        assert cells["favours"] == (r["favours"] or "neither")
    left = len(significant) - len(listed)
    assert (shown["more"] is None) == (left == 0)
    if left:
        assert shown["more"].startswith(f"{left} more significant pairs of this task")
    ties = [t for t in doc["rank_ties"] if t["task"] == task]
    assert [
        (c["ranked above"], c["ranked below (≈)"], c["questions"], c[f"diff{unit}"], c[f"95% CI{unit}"], c["p Holm"])
        for c in shown["ties"]
    ] == [
        (t["better"], t["worse"], str(t["n"]), _diff(t["diff"], share), _ci(t["ci95"], share), _p(t["p_holm"]))
        for t in ties
    ]


def _check_marks(page: str, doc: dict[str, Any], side: str = "a") -> None:
    """The ≈ marks of a set's rank table are exactly its rank_ties, each naming its pair's p_holm."""
    marks = _rank_marks(page, side)
    assert marks, "no rank table"
    tied = {(t["task"], t["worse"]): t for t in doc["rank_ties"]}
    for (task, model), (text, tip) in marks.items():
        t = tied.get((task, model))
        assert text.endswith(" ≈") == (t is not None), (task, model, text)
        if t is None:
            assert tip is None
        else:
            assert (
                tip == f"not significantly behind {t['better']} (p Holm = {_p(t['p_holm'])}, {t['n']} common questions)"
            )
    assert set(tied) <= set(marks)
    if side == "a":
        assert (TIE_LEGEND in page) == bool(tied)


def _compare_html(runs: list[Path], out: Path) -> tuple[dict[str, Any], str]:
    page = out / "report.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "compare",
            *map(str, runs),
            "--out",
            str(out),
            "--html",
            str(page),
            "--resamples",
            "200",
            "--permutations",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "compare.json").read_text()), page.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- a real pair of runs


def _per_question_mean(records: list[dict[str, Any]], model: str) -> dict[str, float]:
    scores: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r["model"] == model:
            scores[r["question_id"]].append(float(r["score"]))
    assert {len(v) for v in scores.values()} == {3}  # three repeats of every question
    return {q: sum(v) / len(v) for q, v in scores.items()}


def test_the_page_shows_compare_json_paired_rows_of_two_real_runs(pytester: pytest.Pytester, real_data: Path) -> None:
    path = real_data / "cybermetric" / "CyberMetric-80-v1.json"
    if not path.is_file():
        pytest.skip(f"real-data file missing: {path}")
    golds = {q["question"]: q["solution"] for q in json.loads(path.read_text())["questions"]}
    runs: list[Path] = []
    with ScriptedServer(Dice(golds)) as server:
        for out, models in (("out-ab", ["alpha", "beta"]), ("out-g", ["gamma"])):
            flags = [x for m in models for x in ("--model", f"{m}@{server.url}")]
            result = pytester.runpytest(
                str(SUITES / "cybermetric"),
                "-k",
                "cm80",
                "--limit",
                str(LIMIT),
                "--repeats",
                "3",
                "--data-dir",
                str(real_data),
                *flags,
                "--report-dir",
                out,
                "-p",
                "no:randomly",
            )
            assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
            runs.append(only_run_dir(pytester.path / out))
    records = [json.loads(line) for run in runs for line in (run / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3 * LIMIT * len(SKILL)
    doc, page = _compare_html(runs, pytester.path / "cmp")
    task = "cybermetric.cm80"

    # compare.json's rows recomputed from the records (per question: the mean of its 3 repeats; paired t:
    # the means are shares of 3, not 0/1) and Holm by hand over the task's three pairs.
    means = {m: _per_question_mean(records, m) for m in SKILL}
    order = sorted(SKILL, key=lambda m: (-np.mean(list(means[m].values())), m))
    pairs = list(combinations(order, 2))
    p_raw = []
    for (a, b), row in zip(pairs, doc["paired"]):
        qids = sorted(means[a])
        x, y = np.array([means[a][q] for q in qids]), np.array([means[b][q] for q in qids])
        assert (row["model_a"], row["model_b"], row["n"], row["test"]) == (a, b, LIMIT, "paired_t")
        assert row["diff"] == pytest.approx((x - y).mean(), abs=1e-12)
        assert row["p_value"] == pytest.approx(st.ttest_rel(x, y).pvalue, rel=1e-9)
        p_raw.append(row["p_value"])
    ranked = sorted(range(3), key=lambda i: p_raw[i])
    holm = [0.0] * 3
    running = 0.0
    for j, i in enumerate(ranked):
        running = max(running, min(1.0, (3 - j) * p_raw[i]))
        holm[i] = running
    assert [r["p_holm"] for r in doc["paired"]] == pytest.approx(holm)
    # The seeded dice give both kinds: alpha and beta too close to tell apart on 24 questions, gamma far below.
    assert [r["significant"] for r in doc["paired"]] == [False, True, True]
    assert [(t["better"], t["worse"]) for t in doc["rank_ties"]] == [tuple(order[:2])]

    assert '<a href="#paired">Paired differences</a>' in page and READING_GUIDE in page
    shown = _paired_tasks(page)
    assert list(shown) == [task]
    _check_task(task, shown[task], doc, share=True)
    assert "Test: paired t;" in shown[task]["line"]
    _check_marks(page, doc)
    (_text, tip) = _rank_marks(page)[(task, order[1])]
    assert tip is not None and f"p Holm = {_p(doc['rank_ties'][0]['p_holm'])}" in tip and order[0] in tip


# --------------------------------------------------------------------------- AthenaBench's published runs


@pytest.fixture(scope="module")
def athena_runs(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"AthenaBench released runs not available: {source}")
    from pytest_benchaudit.importers import import_athenabench_runs

    root = tmp_path_factory.mktemp("athena-paired") / "runs"
    import_athenabench_runs(source, root, SUITES, str(real_data))
    return root


@pytest.fixture(scope="module")
def athena(athena_runs: Path) -> tuple[dict[str, Any], str, Path]:
    doc, page = _compare_html([athena_runs], athena_runs.parent / "cmp")
    return doc, page, athena_runs.parent / "cmp" / "report.html"


def test_the_imported_athenabench_runs_report_lists_capped_pairs_and_ties(
    athena: tuple[dict[str, Any], str, Path],
) -> None:
    doc, page, _ = athena
    assert MAX_PAIRS_SHOWN == TEXT_CAP  # the page lists as many per task as the terminal does per set
    shown = _paired_tasks(page)
    tasks = sorted({r["task"] for r in doc["paired"]})
    assert sorted(shown) == tasks and len(tasks) == 6
    for task in tasks:
        _check_task(task, shown[task], doc, _share(doc, task))
    # 12 models: 66 pairs a task; some tasks have more significant pairs than are listed, one has none.
    assert {len([r for r in doc["paired"] if r["task"] == t]) for t in tasks} == {66}
    assert any(shown[t]["more"] for t in tasks) and any(not shown[t]["pairs"] for t in tasks)
    assert "Test: exact McNemar;" in shown["athenabench.ate"]["line"]
    assert "Test: paired t;" in shown["athenabench.vsp"]["line"]
    _check_marks(page, doc)
    assert page.count('class="tie"') == len(doc["rank_ties"]) > 0


def test_the_audit_report_shows_each_layer_pairs(athena_runs: Path, real_data: Path) -> None:
    """benchaudit audit compares the released layer (set a) with the runs re-scored toward standardized (set b):
    each set's block and ≈ marks are its own rows; standardized VSP is a MAD (lower is better, its own unit)."""
    out = athena_runs.parent / "audit"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "audit",
            str(athena_runs),
            "--out",
            str(out),
            "--suites-dir",
            str(SUITES),
            "--data-dir",
            str(real_data),
            "--resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cmp = json.loads((out / "audit.json").read_text())["compare"]
    page = (out / "report.html").read_text(encoding="utf-8")
    for side in ("a", "b"):
        an = cmp["by_set"][side]
        shown = _paired_tasks(page, side)
        assert sorted(shown) == sorted({r["task"] for r in an["paired"]}) and len(shown) == 6
        for task in shown:
            _check_task(task, shown[task], an, _share(an, task))
        _check_marks(page, an, side)
    assert cmp["by_set"]["b"]["tasks"]["athenabench.vsp"]["lower_is_better"] is True
    assert "athenabench.vsp ↓" in page and _paired_tasks(page, "b")["athenabench.vsp"]["pairs"]
    assert page.count('class="tie"') == sum(len(cmp["by_set"][s]["rank_ties"]) for s in ("a", "b"))


def _console(binary: str, profile: Path, page: Path) -> tuple[str, list[str]]:
    """The page's DOM after load in headless Chromium, and every console message it logged."""
    done = subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def test_the_athenabench_page_loads_in_chromium_without_console_errors(
    athena: tuple[dict[str, Any], str, Path], tmp_path: Path
) -> None:
    binary = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if not binary:
        pytest.skip("chromium is not installed (make test installs it with apt-get when run as root)")
    doc, _, page = athena
    # The check can fail: a page breaking its own Content-Security-Policy logs a console error.
    bad = tmp_path / "bad.html"
    bad.write_text(page.read_text(encoding="utf-8").replace("</body>", "<script>1</script></body>"), encoding="utf-8")
    assert _console(binary, tmp_path / "profile", bad)[1]
    dom, messages = _console(binary, tmp_path / "profile", page)
    assert messages == []
    assert '<section id="paired">' in dom and dom.count('class="tie"') == len(doc["rank_ties"])


# --------------------------------------------------------------------------- small documents


def test_hostile_names_are_escaped_and_an_untestable_tie_says_so() -> None:
    evil = "<img src=x onerror=alert(1)>"
    doc = {
        "scores": {"b.t": {evil: 1.0, "m": 1.0}},
        "ranks": {"b.t": {evil: 1.5, "m": 1.5}},
        "tasks": {"b.t": {"lower_is_better": True}},
        "paired": [
            {
                "task": "b.t",
                "model_a": evil,
                "model_b": "m",
                "n": 1,
                "diff": 0.0,
                "se": None,
                "ci95": None,
                "p_value": None,
                "p_holm": None,
                "significant": None,
                "test": "paired_t",
                "mde80": None,
                "lower_is_better": True,
                "favours": None,
            }
        ],
        "rank_ties": [
            {
                "task": "b.t",
                "better": evil,
                "worse": "m",
                "n": 1,
                "diff": 0.0,
                "ci95": None,
                "p_value": None,
                "p_holm": None,
            }
        ],
        "mde80": {"b.t": {"mde80": None, "n": 1, "sd_diff": None, "pairs": 1}},
    }
    html = paired_section(doc) + ranks_section(doc)
    assert evil not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    shown = _paired_tasks(paired_section(doc))
    line = shown["b.t"]["line"]
    assert line.startswith("0 of 1 pairs significant, 1 not.") and "not measured" in line and not shown["b.t"]["pairs"]
    assert shown["b.t"]["ties"][0]["p Holm"] == "untestable"
    # A lower-is-better metric's differences stay in its own unit.
    assert shown["b.t"]["ties"][0]["diff"] == "+0.000"
    (_text, tip) = _rank_marks(ranks_section(doc))[("b.t", "m")]
    assert tip is not None and "untestable" in tip and evil in tip  # the parser unescapes the attribute
    assert paired_section({}) == "" and paired_section({"paired": []}) == ""
