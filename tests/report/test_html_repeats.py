"""The HTML report's repeats table: a real ``--repeats 3`` run against a scripted server on 127.0.0.1,
``benchaudit compare --html``, and every number of the table read back from the page and checked
against the run's summary.json (and the summary's own numbers against records.jsonl)."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.report.html.repeats import HEADERS, repeats_section
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import mcq_suite_toml, task_toml, write_suite

OPTIONS = ["first option", "second option", "third option", "fourth option"]
GOLD = "B"
# Question id -> (topic, P(right) for model a); model b is right 0.2 less often.  Two questions per
# topic, scored alike: the clustered standard error differs from the plain one.
QUESTIONS = {
    "h01": ("net", 0.9),
    "h02": ("net", 0.8),
    "h03": ("web", 0.2),
    "h04": ("web", 0.3),
    "h05": ("crypto", 0.5),
    "h06": ("crypto", 0.6),
    "h07": ("os", 1.0),
    "h08": ("os", 0.0),
}

# The toy suite's shape (testing.toy), sampled at temperature 0.7 with 16 tokens, and another reading of
# the same answers, so `benchaudit audit` has a layer to move toward.
SUITE = mcq_suite_toml(
    "rh",
    title="Repeats in the HTML report",
    tasks=[
        task_toml(
            "mcq", "rh.jsonl", {"standardized": {"temperature": 0.7, "max_tokens": 16, "by": "topic"}}, meta=["topic"]
        )
    ],
    extra='\n[tasks.mcq.released]\nbase = "standardized"\nscoring = { metric = "exact_match", denominator = "valid" }\n',
)


class Dice:
    """Question ``hNN`` answered with the gold letter with a known probability per model, from a random
    stream seeded per model and question."""

    def __init__(self) -> None:
        self.streams = {(m, q): random.Random(f"3:{m}:{q}") for m in ("a", "b") for q in QUESTIONS}
        self.lock = threading.Lock()

    def __call__(self, call: Any) -> Reply:
        qid = re.search(r"question (h\d\d)", call.last_user_text).group(1)  # type: ignore[union-attr]
        model = str(call.body.get("model"))
        p = QUESTIONS[qid][1] - (0.2 if model == "b" else 0.0)
        with self.lock:
            right = self.streams[(model, qid)].random() < p
        return Reply(content=f"Answer: {GOLD if right else 'D'}")


class _Tables(HTMLParser):
    """The cells of every table inside ``<section id="repeats">``."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.depth = 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.depth += 1
            if dict(attrs).get("id") == "repeats":
                self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _repeats_table(html: str) -> list[dict[str, str]]:
    parser = _Tables()
    parser.feed(html)
    if not parser.rows:
        return []
    head, *body = parser.rows
    return [dict(zip(head, row)) for row in body]


def _write(root: Path) -> None:
    write_suite(
        root,
        "rh",
        SUITE,
        {
            "rh.jsonl": [
                {"id": q, "question": f"Report question {q}?", "options": OPTIONS, "gold": GOLD, "topic": t}
                for q, (t, _p) in QUESTIONS.items()
            ]
        },
    )


def _run(pytester: pytest.Pytester, server: ScriptedServer, out: str, *extra: str) -> Path:
    pytester.runpytest(
        "suites/rh",
        "--data-dir",
        "data",
        "--model",
        f"a@{server.url}",
        "--model",
        f"b@{server.url}",
        "--report-dir",
        out,
        "-p",
        "no:randomly",
        *extra,
    )
    return only_run_dir(pytester.path / out)


def _pp(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.2f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.2f}%"


def test_repeats_table_shows_the_summary_numbers_of_a_real_run(pytester: pytest.Pytester) -> None:
    _write(pytester.path)
    with ScriptedServer(Dice()) as server:
        repeated = _run(pytester, server, "rep", "--repeats", "3")
        once = _run(pytester, server, "once")
    summary = json.loads((repeated / "summary.json").read_text())["results"]
    assert {r["model"] for r in summary} == {"a", "b"} and all(r["repeats"] == 3 for r in summary)
    html_path = pytester.path / "report.html"
    # In a process of its own: matplotlib imported inside a pytester test is dropped from sys.modules at
    # its teardown, and a later test's figures would then mix two copies of its classes.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "compare",
            str(repeated),
            "--against",
            str(once),
            "--out",
            str(pytester.path / "cmp"),
            "--html",
            str(html_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    page = html_path.read_text(encoding="utf-8")
    assert '<a href="#repeats">Repeats</a>' in page
    table = _repeats_table(page)
    assert table and list(table[0]) == HEADERS
    # Only the run asked 3 times has rows: the run asked once has none.
    assert sorted(row["model"] for row in table) == ["a", "b"]
    assert all(row["repeats"] == "3" for row in table)
    records = [json.loads(line) for line in (repeated / "records.jsonl").read_text().splitlines()]
    for r in summary:
        (row,) = [t for t in table if t["model"] == r["model"]]
        assert row["benchmark"] == "rh" and row["task"] == "mcq" and row["reducer"] == "mean"
        assert row["questions"] == str(r["n_questions"]) == str(len(QUESTIONS))
        assert row["headline"] == _pct(r["score"])
        assert row["se"] == _pp(r["se"]) and row["se clustered"] == _pp(r["se_clustered"])
        assert row["sampling sd"] == _pp(r["sampling_sd"])
        assert row["retest agreement"] == f"{100 * r['retest_agreement']:.1f}%"
        # The clustered interval (aggregation.by = topic) is the one shown, as the gates read it.
        assert r["ci95_clustered"] is not None
        assert row["CI kind"] == (
            f"clustered by topic, {r['n_groups']} groups: Wilson on the design-effect n, t quantile"
        )
        assert row["95% CI"] == f"{_pct(r['ci95_clustered'][0])} – {_pct(r['ci95_clustered'][1])}"
        # The summary's numbers themselves, recounted from the records (per question: mean of 3).
        mine = [x for x in records if x["model"] == r["model"]]
        per_q: dict[str, list[float]] = {}
        for x in mine:
            per_q.setdefault(x["question_id"], []).append(x["score"])
        means = [sum(v) / len(v) for v in per_q.values()]
        m = sum(means) / len(means)
        assert r["score"] == pytest.approx(m)
        sd = math.sqrt(sum((v - m) ** 2 for v in means) / (len(means) - 1))
        assert r["se"] == pytest.approx(sd / math.sqrt(len(means)))
        per_repeat = [sum(x["score"] for x in mine if x["repeat"] == k) / len(QUESTIONS) for k in range(3)]
        pm = sum(per_repeat) / 3
        assert r["sampling_sd"] == pytest.approx(math.sqrt(sum((v - pm) ** 2 for v in per_repeat) / 2))
        assert r["retest_agreement"] == pytest.approx(sum(len(set(v)) == 1 for v in per_q.values()) / len(per_q))
    # The server sampled: the numbers are not those of a deterministic model.
    assert any(r["sampling_sd"] for r in summary) and any(r["retest_agreement"] < 1 for r in summary)


def test_no_repeats_no_section_and_strings_escaped() -> None:
    assert repeats_section([]) == "" and repeats_section(None) == ""
    assert repeats_section([{"benchmark": "b", "task": "t", "model": "m", "repeats": 1, "score": 0.5}]) == ""
    row = {
        "benchmark": "b",
        "task": "t",
        "model": "<script>x</script>",
        "pipeline": "standardized",
        "variant": "",
        "repeats": 2,
        "reducer": "mean",
        "n_questions": 4,
        "score": 2.5,
        "lower_is_better": True,
        "se": 0.25,
        "se_clustered": None,
        "ci95": [1.5, 3.5],
        "ci95_clustered": None,
        "sampling_sd": 0.125,
        "retest_agreement": 0.75,
    }
    html = repeats_section([row])
    assert "<script>" not in html and "&lt;script&gt;" in html
    (cells,) = _repeats_table(html)
    # An error metric (lower is better) in its own unit; the interval over questions when none is clustered.
    assert cells["headline"] == "2.500" and cells["se"] == "0.250" and cells["se clustered"] == "—"
    assert cells["95% CI"] == "1.500 – 3.500" and cells["CI kind"] == "over questions"
    assert cells["sampling sd"] == "0.125" and cells["retest agreement"] == "75.0%"


def test_the_audit_report_shows_the_repeats_table_of_its_runs(pytester: pytest.Pytester) -> None:
    """`benchaudit audit` of a run asked 3 times: its report's repeats table carries the run's own
    summary numbers (the audit's score rows pass the error bars through), one row per model and layer."""
    _write(pytester.path)
    with ScriptedServer(Dice()) as server:
        repeated = _run(pytester, server, "rep", "--repeats", "3")
    summary = json.loads((repeated / "summary.json").read_text())["results"]
    out = pytester.path / "audit"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "audit",
            str(repeated),
            "--toward",
            "released",
            "--suites-dir",
            "suites",
            "--data-dir",
            "data",
            "--out",
            str(out),
            "--resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=pytester.path,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "audit.json").read_text())
    mine = [r for r in doc["scores"] if r["layer"] == "standardized"]
    assert {r["model"] for r in mine} == {"a", "b"} and all(r["repeats"] == 3 for r in mine)
    table = _repeats_table((out / "report.html").read_text(encoding="utf-8"))
    assert {(row["model"], row["pipeline"]) for row in table} == {
        (m, layer) for m in ("a", "b") for layer in ("standardized", "released")
    }
    for r in summary:
        (row,) = [t for t in table if t["model"] == r["model"] and t["pipeline"] == "standardized"]
        assert row["repeats"] == "3" and row["questions"] == str(r["n_questions"])
        assert row["headline"] == _pct(r["score"]) and row["se"] == _pp(r["se"])
        assert row["sampling sd"] == _pp(r["sampling_sd"])
        assert row["retest agreement"] == f"{100 * r['retest_agreement']:.1f}%"
        assert row["95% CI"] == f"{_pct(r['ci95_clustered'][0])} – {_pct(r['ci95_clustered'][1])}"
