"""``diagnose`` on runs with repeated generations: FM14 measured, BA06 (an order within the noise).

Real pytest runs through pytester against the scripted server on 127.0.0.1: each model answers a
question correctly with a known probability, from a seeded random stream per model and question.
Every number a finding states is recomputed here from ``records.jsonl`` (numpy, scipy, counts).
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as st

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.diagnose import LoadedRun, diagnose
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

OPTIONS = ["first option", "second option", "third option", "fourth option"]
N_QUESTIONS = 30
GOLD = "B"


class Dice:
    """Question ``rNN`` answered with the gold letter with probability ``skill[model]``, from a
    random stream seeded per model and question."""

    def __init__(self, skill: dict[str, float], seed: int = 5) -> None:
        self.skill, self.seed = skill, seed
        self.streams: dict[tuple[str, str], random.Random] = {}
        self.lock = threading.Lock()

    def __call__(self, call: Call) -> Reply:
        qid = re.search(r"question (r\d+)", call.last_user_text).group(1)  # type: ignore[union-attr]
        model = str(call.body.get("model"))
        with self.lock:
            stream = self.streams.setdefault((model, qid), random.Random(f"{self.seed}:{model}:{qid}"))
            right = stream.random() < self.skill[model]
        return Reply(content=f"Answer: {GOLD if right else 'C'}")


def _suite(root: Path) -> None:
    write_mcq_suite(
        root,
        "rep",
        [
            {"id": f"r{i:02d}", "question": f"Repeat question r{i:02d}?", "options": OPTIONS, "gold": GOLD}
            for i in range(N_QUESTIONS)
        ],
    )


def _run(pytester: pytest.Pytester, skill: dict[str, float], *extra: str, out: str = "out") -> Path:
    _suite(pytester.path)
    models = [arg for m in skill for arg in ("--model", f"{m}@URL")]
    with ScriptedServer(Dice(skill)) as server:
        result = pytester.runpytest(
            "suites/rep",
            "--data-dir",
            "data",
            "--report-dir",
            out,
            "-p",
            "no:randomly",
            *[a.replace("URL", server.url) for a in models],
            *extra,
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
    return only_run_dir(pytester.path / out)


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def _diagnose_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["diagnose", str(run_dir), "--json", "--no-ledger"]) == 0
    return json.loads(capsys.readouterr().out)


def _by_id(doc: dict[str, Any], fm: str) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] + doc["folded"] if f["failure_mode"] == fm]


SAMPLED = ("--set", "inference.decoding.temperature=0.7")


def test_fm14_measures_the_spread_when_repeats_exist(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """--repeats 4, sampled without a seed: FM14 states the headline's sampling SD across the 4
    repeat indices and the questions whose verdict flips, both recomputed here from the records."""
    run_dir = _run(pytester, {"m": 0.6}, "--repeats", "4", *SAMPLED)
    records = _records(run_dir)
    assert len(records) == 4 * N_QUESTIONS and all("seed" not in r["request"]["params"] for r in records)
    (f,) = _by_id(_diagnose_json(run_dir, capsys), "FM14-sampling-without-seed")
    per_repeat: dict[int, list[float]] = defaultdict(list)
    verdicts: dict[str, set[bool]] = defaultdict(set)
    for r in records:
        per_repeat[r["repeat"]].append(r["score"])
        verdicts[r["question_id"]].add(r["correct"])
    headlines = [np.mean(per_repeat[k]) for k in sorted(per_repeat)]
    sd = float(np.std(headlines, ddof=1))
    flipped = sorted(q for q, v in verdicts.items() if len(v) > 1)
    ev = f["evidence"]
    assert ev["repeats"] == 4 and ev["n_questions"] == N_QUESTIONS
    assert ev["sampling_sd"] == pytest.approx(sd, rel=1e-9)
    assert ev["n_flipped"] == len(flipped) and set(ev["question_ids"]) <= set(flipped)
    assert ev["flip_share"] == pytest.approx(len(flipped) / N_QUESTIONS, abs=1e-6)
    assert ev["retest_agreement"] == pytest.approx(1 - len(flipped) / N_QUESTIONS)
    # p = 0.6, 4 repeats: a question keeps its verdict with probability 0.6^4 + 0.4^4 = 0.155, so most flip
    assert len(flipped) > N_QUESTIONS / 2
    assert f"a sampling SD of {100 * sd:.1f} pp" in f["hypothesis"]
    assert f"the mean of 4 repeats by about {100 * sd / 2:.1f} pp" in f["hypothesis"]  # SD / sqrt(K)
    assert f"{len(flipped)} of {N_QUESTIONS}" in f["hypothesis"]
    assert "needs repeated generations" not in f["effect"] and "measured from the repeats" in f["effect"]
    assert f["effect_pp"] is None and f["effect_kind"] == "none"


def test_fm14_without_repeats_stays_as_it_was(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(pytester, {"m": 0.6}, *SAMPLED)
    (f,) = _by_id(_diagnose_json(run_dir, capsys), "FM14-sampling-without-seed")
    assert f["effect"] == "needs repeated generations; one sample per question gives no estimate"
    assert "repeats" not in f["evidence"] and "one generation per question" in f["hypothesis"]


def test_fm14_not_reported_for_seeded_repeats(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(pytester, {"m": 0.6}, "--repeats", "3", *SAMPLED, "--set", "inference.decoding.seed=9")
    assert _by_id(_diagnose_json(run_dir, capsys), "FM14-sampling-without-seed") == []


def _paired_from_records(records: list[dict[str, Any]], a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    per: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        per[(r["model"], r["question_id"])].append(r["score"])
    qids = sorted({q for (_m, q) in per})
    return (np.array([np.mean(per[(a, q)]) for q in qids]), np.array([np.mean(per[(b, q)]) for q in qids]))


def test_ba06_names_neighbours_whose_order_is_within_the_noise(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three models asked 3 times: 'top' far ahead, 'near' and 'nearer' of the same skill. The
    pair of the last two is not significant (BA06, its p recomputed with scipy); top's lead is."""
    skill = {"top": 0.95, "near": 0.5, "nearer": 0.5}
    run_dir = _run(pytester, skill, "--repeats", "3")
    records = _records(run_dir)
    doc = _diagnose_json(run_dir, capsys)
    (f,) = _by_id(doc, "BA06-order-within-noise")
    assert f["model"] == "*" and f["evidence"]["n_models"] == 3 and f["evidence"]["n_pairs"] == 3
    (ev,) = f["evidence"]["pairs"]  # top's lead over the next is significant: one tied pair
    assert {ev["model_a"], ev["model_b"]} == {"near", "nearer"}
    x, y = _paired_from_records(records, ev["model_a"], ev["model_b"])
    assert x.mean() >= y.mean()  # model_a is the better by headline
    assert ev["n"] == N_QUESTIONS and ev["diff"] == pytest.approx((x - y).mean())
    if set(np.concatenate([x, y])) <= {0.0, 1.0}:
        only_x, only_y = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
        assert ev["p_value"] == pytest.approx(st.binomtest(only_x, only_x + only_y, 0.5).pvalue)
    else:
        assert ev["test"] == "paired_t" and ev["p_value"] == pytest.approx(st.ttest_rel(x, y).pvalue)
    assert ev["p_holm"] >= 0.05
    assert "1 of the 2 neighbouring pairs in the ranking of 3 models" in f["hypothesis"]
    assert f"{ev['model_a']} above {ev['model_b']}" in f["hypothesis"] and "may flip" in f["hypothesis"]
    assert f["stage"] == "upstream" and f["pipeline"] == "standardized" and f["evidence"]["repeats"] == [3]
    # The finding's mde80 is compare's for the same task (same rows, same function).
    assert f["evidence"]["mde80"] is not None and "80% power" in f["effect"]
    # The pair is the one compare.json writes for the same run (one function, one set of rows).
    assert (
        main(
            ["compare", str(run_dir), "--out", str(pytester.path / "cmp"), "--resamples", "100", "--permutations", "20"]
        )
        == 0
    )
    cmp = json.loads((pytester.path / "cmp" / "compare.json").read_text())
    row = next(r for r in cmp["paired"] if (r["model_a"], r["model_b"]) == (ev["model_a"], ev["model_b"]))
    assert {k: row[k] for k in ev} == ev
    assert cmp["rank_ties"] == [
        {
            "task": "rep.mcq",
            "better": ev["model_a"],
            "worse": ev["model_b"],
            "n": ev["n"],
            "diff": ev["diff"],
            "ci95": ev["ci95"],
            "p_value": ev["p_value"],
            "p_holm": ev["p_holm"],
        }
    ]
    assert cmp["mde80"]["rep.mcq"]["mde80"] == pytest.approx(f["evidence"]["mde80"])


def test_ba06_is_independent_of_the_order_of_the_runs_and_records(pytester: pytest.Pytester) -> None:
    """Metamorphic: the same records given in another order (models across two runs, shuffled) give the same finding."""
    run_dir = _run(pytester, {"p": 0.55, "q": 0.5}, "--repeats", "2")
    meta = json.loads((run_dir / "run.json").read_text())
    records = _records(run_dir)
    one = [f.model_dump() for f in diagnose([LoadedRun("r", meta, records)]) if f.failure_mode.startswith("BA06")]
    shuffled = list(records)
    random.Random(1).shuffle(shuffled)
    split = [
        LoadedRun("r", meta, [r for r in shuffled if r["model"] == "q"]),
        LoadedRun("r", meta, [r for r in shuffled if r["model"] == "p"]),
    ]
    two = [f.model_dump() for f in diagnose(split) if f.failure_mode.startswith("BA06")]
    assert one == two and len(one) == 1
    assert one[0]["evidence"]["pairs"][0]["p_holm"] >= 0.05


def test_no_ba06_when_every_order_is_significant(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(pytester, {"good": 1.0, "bad": 0.0})
    assert _by_id(_diagnose_json(run_dir, capsys), "BA06-order-within-noise") == []
