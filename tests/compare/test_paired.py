"""compare.json's ``paired`` rows, ``rank_ties`` and ``mde80`` (:mod:`pytest_benchaudit.compare.paired_rows`).

The end-to-end test makes two real ``pytest suites/cybermetric -k cm80 --limit N --repeats 3`` runs
through pytester against the scripted server on 127.0.0.1 (each model answers a question correctly
with a known probability, from a seeded random stream per model and question), compares them with
``benchaudit compare`` and recomputes every paired number from ``records.jsonl`` with scipy.  The
other tests use hand-made run directories, checked against scipy and hand counts.
"""

from __future__ import annotations

import json
import random
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as st

from helpers import SUITES
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.compare.paired_rows import holm
from pytest_benchaudit.testing.runs import only_run_dir, write_run_dir
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer

Z95, Z80 = st.norm.ppf(0.975), st.norm.ppf(0.80)
LIMIT = 24
# Model -> the probability it answers a question correctly (the same for every question).
SKILL = {"alpha": 0.85, "beta": 0.45}


class Dice:
    """Answers the gold letter with the model's probability, from a random stream per model and
    question (seeded), else a wrong letter; the question is found by its text in the prompt."""

    def __init__(self, golds: dict[str, str]) -> None:
        self.golds = golds
        self.streams: dict[tuple[str, str], random.Random] = {}
        self.lock = threading.Lock()

    def __call__(self, call: Call) -> Reply:
        text = call.last_user_text
        question = max((q for q in self.golds if q in text), key=len)  # the longest: never a prefix of another
        model = str(call.body.get("model"))
        with self.lock:
            stream = self.streams.setdefault((model, question), random.Random(f"11:{model}:{question}"))
            right = stream.random() < SKILL[model]
        gold = self.golds[question]
        return Reply(content=f"Answer: {gold if right else ('A' if gold != 'A' else 'C')}")


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def _per_question_mean(records: list[dict[str, Any]]) -> dict[str, float]:
    scores: dict[str, list[float]] = defaultdict(list)
    for r in records:
        scores[r["question_id"]].append(float(r["score"]))
    assert {len(v) for v in scores.values()} == {3}  # three repeats of every question
    return {q: sum(v) / len(v) for q, v in scores.items()}


def _compare(tmp: Path, *runs: Path) -> dict[str, Any]:
    out = tmp / "cmp"
    assert main(["compare", *map(str, runs), "--out", str(out), "--resamples", "200", "--permutations", "50"]) == 0
    return json.loads((out / "compare.json").read_text())


def test_compare_of_two_repeated_cybermetric_runs_writes_paired_rows(
    pytester: pytest.Pytester, real_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = real_data / "cybermetric" / "CyberMetric-80-v1.json"
    if not path.is_file():
        pytest.skip(f"real-data file missing: {path}")
    golds = {q["question"]: q["solution"] for q in json.loads(path.read_text())["questions"]}
    runs: dict[str, Path] = {}
    with ScriptedServer(Dice(golds)) as server:
        for model in SKILL:
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
                "--model",
                f"{model}@{server.url}",
                "--report-dir",
                f"out-{model}",
                "-p",
                "no:randomly",
            )
            assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
            runs[model] = only_run_dir(pytester.path / f"out-{model}")
    recs = {m: _records(p) for m, p in runs.items()}
    assert all(len(v) == 3 * LIMIT for v in recs.values())
    capsys.readouterr()
    doc = _compare(pytester.path, runs["alpha"], runs["beta"])
    text = capsys.readouterr().out
    (row,) = doc["paired"]
    assert row["task"] == "cybermetric.cm80"
    # Recomputed here from records.jsonl: per question the mean of its 3 repeats, the pairs on the same ids.
    a, b = _per_question_mean(recs["alpha"]), _per_question_mean(recs["beta"])
    assert set(a) == set(b) and len(a) == LIMIT
    qids = sorted(a)
    xa, xb = np.array([a[q] for q in qids]), np.array([b[q] for q in qids])
    # model_a is the better by headline
    better, worse = ("alpha", "beta") if xa.mean() >= xb.mean() else ("beta", "alpha")
    assert (row["model_a"], row["model_b"]) == (better, worse)
    x, y = (xa, xb) if better == "alpha" else (xb, xa)
    d = x - y
    assert row["n"] == LIMIT
    assert row["diff"] == pytest.approx(d.mean(), abs=1e-12)
    assert row["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(LIMIT), rel=1e-9)
    assert row["ci95"] == pytest.approx([d.mean() - Z95 * row["se"], d.mean() + Z95 * row["se"]], abs=1e-6)
    binary = set(np.concatenate([xa, xb])) <= {0.0, 1.0}
    if binary:  # every question answered alike in its 3 repeats by both: McNemar
        assert row["test"] == "mcnemar_exact"
        only_x, only_y = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
        assert row["p_value"] == pytest.approx(st.binomtest(only_x, only_x + only_y, 0.5).pvalue, rel=1e-9)
    else:
        assert row["test"] == "paired_t"
        assert row["p_value"] == pytest.approx(st.ttest_rel(x, y).pvalue, rel=1e-9)
    assert row["p_holm"] == pytest.approx(row["p_value"])  # one pair: Holm leaves it
    assert row["mde80"] == pytest.approx((Z95 + Z80) * d.std(ddof=1) / np.sqrt(LIMIT), rel=1e-9)
    assert doc["mde80"]["cybermetric.cm80"]["mde80"] == pytest.approx(row["mde80"], rel=1e-9)
    assert doc["mde80"]["cybermetric.cm80"]["n"] == LIMIT
    # The headline of each run is the mean of the per-question means (the same reducer).
    assert doc["scores"]["cybermetric.cm80"]["alpha"] == pytest.approx(xa.mean())
    # 0.85 against 0.45 on 24 questions x 3: far apart, significant, no rank tie
    assert row["significant"] is True and doc["rank_ties"] == []
    assert "Paired differences, set a" in text and "1 of 1 pairs significant" in text
    assert f"{better}" in text.split("Paired differences, set a", 1)[1]


# --------------------------------------------------------------------------- hand-made runs


def _card_run(root: Path, name: str, records: list[dict[str, Any]], metric: str = "exact_match", **fields: Any) -> Path:
    """A hand-made run directory whose run.json holds the task's card (metric, denominator total, ``fields``)."""
    run = write_run_dir(root, name, records)
    task = records[0]["task"]
    card = {"fields": {"scoring.metric": metric, "scoring.denominator": "total", **fields}}
    (run / "run.json").write_text(json.dumps({"run_id": name, "pipeline_cards": {f"toy.{task}": card}}))
    return run


def _run(
    root: Path, name: str, model: str, scores: Mapping[str, Sequence[float]], task: str = "mcq", **fields: Any
) -> Path:
    """A run of ``model`` whose question ``q`` has the given scores, one record per repeat."""
    return _card_run(
        root,
        name,
        [
            {
                "question_id": q,
                "question_index": i,
                "model": model,
                "task": task,
                "repeat": k,
                "score": float(s),
                "correct": s == 1.0,
            }
            for i, (q, values) in enumerate(scores.items())
            for k, s in enumerate(values)
        ],
        **fields,
    )


BIN_A: dict[str, list[float]] = {
    f"q{i:02d}": [v] for i, v in enumerate([1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1])
}
BIN_B: dict[str, list[float]] = {
    f"q{i:02d}": [v] for i, v in enumerate([0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1])
}


def test_binary_scores_take_exact_mcnemar(tmp_path: Path) -> None:
    doc = _compare(tmp_path, _run(tmp_path, "ra", "a", BIN_A), _run(tmp_path, "rb", "b", BIN_B))
    (row,) = doc["paired"]
    x = np.array([v[0] for v in BIN_A.values()])
    y = np.array([v[0] for v in BIN_B.values()])
    only_a, only_b = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    assert (only_a, only_b) == (8, 1)  # counted by hand: a alone at q00 q02 q03 q06 q09 q12 q14 q17, b alone at q10
    assert row["test"] == "mcnemar_exact" and row["discordant"] == [8, 1]
    assert row["p_value"] == pytest.approx(st.binomtest(8, 9, 0.5).pvalue, rel=1e-12)
    assert row["p_value"] == pytest.approx(20 / 512, rel=1e-12)  # 2 * (C(9,0) + C(9,1)) / 2^9
    assert row["diff"] == pytest.approx(7 / 20)
    assert row["favours"] == "a" and row["lower_is_better"] is False


def test_swapping_the_models_negates_diff_and_keeps_p(tmp_path: Path) -> None:
    """Metamorphic: the same answers under swapped model names give the row with a and b swapped."""
    ab = _compare(tmp_path / "x", _run(tmp_path, "r1", "a", BIN_A), _run(tmp_path, "r2", "b", BIN_B))["paired"][0]
    ba = _compare(tmp_path / "y", _run(tmp_path, "r3", "a", BIN_B), _run(tmp_path, "r4", "b", BIN_A))["paired"][0]
    assert (ab["model_a"], ab["model_b"]) == ("a", "b") and (ba["model_a"], ba["model_b"]) == ("b", "a")
    # Fixed orientation (a - b by model name) from the rows: one is the other negated.
    signed_ab = ab["diff"] if ab["model_a"] == "a" else -ab["diff"]
    signed_ba = ba["diff"] if ba["model_a"] == "a" else -ba["diff"]
    assert signed_ab == pytest.approx(-signed_ba)
    assert ab["p_value"] == pytest.approx(ba["p_value"]) and ab["se"] == pytest.approx(ba["se"])
    # And the function itself, asked the other way round, negates diff and keeps p.
    from pytest_benchaudit.aggregate.repeat_stats import paired_difference

    xa, xb = [v[0] for v in BIN_A.values()], [v[0] for v in BIN_B.values()]
    one, other = paired_difference(xa, xb, True), paired_difference(xb, xa, True)
    assert one["diff"] == pytest.approx(-other["diff"]) and one["p_value"] == pytest.approx(other["p_value"])


def test_reordering_records_changes_nothing(tmp_path: Path) -> None:
    """Metamorphic: records.jsonl shuffled (repeats and questions interleaved otherwise) gives the same rows."""
    a = {
        f"q{i}": [float(v) for v in vals]
        for i, vals in enumerate(
            [[1, 1, 0], [1, 1, 1], [0, 1, 0], [1, 0, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0], [1, 0, 0]]
        )
    }
    b = {
        f"q{i}": [float(v) for v in vals]
        for i, vals in enumerate(
            [[0, 1, 0], [1, 0, 0], [0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0]]
        )
    }
    ra, rb = _run(tmp_path, "ra", "a", a), _run(tmp_path, "rb", "b", b)
    first = _compare(tmp_path / "one", ra, rb)
    for run in (ra, rb):
        lines = (run / "records.jsonl").read_text().splitlines()
        random.Random(3).shuffle(lines)
        (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    second = _compare(tmp_path / "two", ra, rb)
    assert second["paired"] == first["paired"] and second["mde80"] == first["mde80"]
    (row,) = first["paired"]
    # Fractional per-question means: the paired t test, recomputed with scipy on the same vectors.
    x = np.array([np.mean(v) for v in a.values()])
    y = np.array([np.mean(v) for v in b.values()])
    assert row["test"] == "paired_t"
    assert row["p_value"] == pytest.approx(st.ttest_rel(x, y).pvalue, rel=1e-9)
    assert row["diff"] == pytest.approx((x - y).mean())


def test_only_common_questions_are_paired(tmp_path: Path) -> None:
    a = {**BIN_A, "extra1": [1.0]}
    b = {k: v for k, v in BIN_B.items() if k not in ("q00", "q01")}
    (row,) = _compare(tmp_path, _run(tmp_path, "ra", "a", a), _run(tmp_path, "rb", "b", b))["paired"]
    assert (row["n"], row["n_a"], row["n_b"]) == (18, 21, 18)
    common = sorted(set(a) & set(b))
    d = np.array([a[q][0] - b[q][0] for q in common])
    assert row["diff"] == pytest.approx(d.mean())


def test_rank_ties_mark_neighbours_whose_order_is_not_significant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three models: a well ahead of b and c; b and c one question apart (not significant): a tie
    in the JSON, '≈' in the rank table, Holm over the three pairs checked by hand."""
    # 40 questions: BIN_A and BIN_B twice (a is 16 to 2 discordant ahead of b)
    a = {**BIN_A, **{f"r{q[1:]}": v for q, v in BIN_A.items()}}
    b = {**BIN_B, **{f"r{q[1:]}": v for q, v in BIN_B.items()}}
    c_scores = dict(b)
    c_scores["q00"] = [1.0]  # one question better than b
    runs = [_run(tmp_path, "ra", "a", a), _run(tmp_path, "rb", "b", b), _run(tmp_path, "rc", "c", c_scores)]
    capsys.readouterr()
    doc = _compare(tmp_path, *runs)
    text = capsys.readouterr().out
    rows = {(r["model_a"], r["model_b"]): r for r in doc["paired"]}
    assert set(rows) == {("a", "c"), ("a", "b"), ("c", "b")}
    raw = [rows[k]["p_value"] for k in (("a", "c"), ("a", "b"), ("c", "b"))]
    # Holm by hand: sorted ascending p1 <= p2 <= p3 -> 3 p1, max(that, 2 p2), max(that, p3), capped at 1.
    order = sorted(range(3), key=lambda i: raw[i])
    expected = [0.0] * 3
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (3 - j) * raw[i]))
        expected[i] = running
    assert [rows[k]["p_holm"] for k in (("a", "c"), ("a", "b"), ("c", "b"))] == pytest.approx(expected)
    assert rows[("c", "b")]["p_value"] == 1.0  # one discordant question: binomtest(1, 1) = 1
    assert rows[("a", "c")]["significant"] and rows[("a", "b")]["significant"]
    assert doc["rank_ties"] == [
        {
            "task": "toy.mcq",
            "better": "c",
            "worse": "b",
            "n": 40,
            "diff": pytest.approx(1 / 40),
            "ci95": rows[("c", "b")]["ci95"],
            "p_value": 1.0,
            "p_holm": 1.0,
        }
    ]
    ranks_line = next(line for line in text.splitlines() if line.startswith("b "))
    assert "≈" in ranks_line
    assert "not significantly behind the model ranked just above" in text


def test_holm_against_a_worked_example() -> None:
    # Holm (1979) step-down, by hand: sorted .01 .03 .04 .20 -> 4 x .01 = .04; 3 x .03 = .09;
    # max(.09, 2 x .04 = .08) = .09; max(.09, .20) = .20; back in input order.
    assert holm([0.01, 0.04, 0.03, 0.20]) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    assert holm([0.3, 0.6]) == pytest.approx([0.6, 0.6])  # 2 x .3 = .6; max(.6, .6)
    assert holm([None, 0.5]) == [None, 0.5]


def test_lower_is_better_rows_say_which_model_the_difference_favours(tmp_path: Path) -> None:
    """A CVSS absolute difference (lower is better): model_a has the lower headline and a negative diff favours it."""
    low = {f"q{i}": [v] for i, v in enumerate([0.5, 1.0, 0.0, 1.5, 0.5, 0.0])}
    high = {f"q{i}": [v] for i, v in enumerate([2.0, 1.5, 1.0, 2.5, 1.0, 0.5])}
    ra = _card_run(
        tmp_path,
        "ra",
        [
            {"question_id": q, "question_index": i, "model": "lo", "task": "vsp", "score": s[0], "correct": False}
            for i, (q, s) in enumerate(low.items())
        ],
        metric="cvss_abs_diff",
    )
    rb = _card_run(
        tmp_path,
        "rb",
        [
            {"question_id": q, "question_index": i, "model": "hi", "task": "vsp", "score": s[0], "correct": False}
            for i, (q, s) in enumerate(high.items())
        ],
        metric="cvss_abs_diff",
    )
    doc = _compare(tmp_path, ra, rb)
    (row,) = doc["paired"]
    assert row["lower_is_better"] is True, "the cvss_abs_diff metric reads lower-is-better"
    assert (row["model_a"], row["model_b"]) == ("lo", "hi")
    d = np.array([low[q][0] - high[q][0] for q in low])
    assert row["diff"] == pytest.approx(d.mean()) and row["diff"] < 0 and row["favours"] == "lo"
    assert row["test"] == "paired_t" and row["p_value"] == pytest.approx(
        st.ttest_rel([v[0] for v in low.values()], [v[0] for v in high.values()]).pvalue
    )


def test_the_text_lists_at_most_fifteen_significant_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """7 models 30 questions apart from each other: 21 significant pairs, 15 listed, the rest counted."""
    from pytest_benchaudit.compare.render import MAX_PAIRS_SHOWN

    runs = [_run(tmp_path, f"r{i}", f"m{i}", {f"q{j:03d}": [float(j < 30 * i)] for j in range(200)}) for i in range(7)]
    capsys.readouterr()
    doc = _compare(tmp_path, *runs)
    text = capsys.readouterr().out
    assert len(doc["paired"]) == 21 and all(r["significant"] for r in doc["paired"]) and doc["rank_ties"] == []
    block = text.split("Paired differences, set a", 1)[1].split("mde80", 1)[0]
    assert "21 of 21 pairs significant" in block
    assert sum(1 for line in block.splitlines() if line.startswith("toy.mcq")) == MAX_PAIRS_SHOWN == 15
    assert "(6 more significant pairs in compare.json 'paired')" in block
    assert "≈" not in text.split("Paired differences", 1)[0]


def test_each_set_of_a_two_set_compare_has_its_own_rows(tmp_path: Path) -> None:
    """--against: set a's rows at the top level and under by_set.a, set b's under by_set.b (its own answers)."""
    a1, b1 = _run(tmp_path, "a1", "a", BIN_A), _run(tmp_path, "b1", "b", BIN_B)
    a2, b2 = _run(tmp_path, "a2", "a", BIN_B), _run(tmp_path, "b2", "b", BIN_B)
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                str(a1),
                str(b1),
                "--against",
                str(a2),
                str(b2),
                "--out",
                str(out),
                "--resamples",
                "100",
                "--permutations",
                "20",
            ]
        )
        == 0
    )
    doc = json.loads((out / "compare.json").read_text())
    assert doc["paired"] == doc["by_set"]["a"]["paired"] and doc["paired"][0]["diff"] == pytest.approx(7 / 20)
    (row_b,) = doc["by_set"]["b"]["paired"]
    assert row_b["diff"] == 0.0 and row_b["p_value"] == 1.0 and row_b["favours"] is None  # the same answers
    assert doc["by_set"]["b"]["rank_ties"][0]["p_holm"] == 1.0


def test_the_reducer_of_the_card_makes_the_per_question_score(tmp_path: Path) -> None:
    """aggregation.reducer = any (pass@k over 3 repeats): a question right once counts 1, so 0/1 scores and McNemar."""
    a = {f"q{i}": v for i, v in enumerate([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]] * 3)}
    b = {f"q{i}": v for i, v in enumerate([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]] * 3)}
    (row,) = _compare(
        tmp_path,
        _run(tmp_path, "ra", "a", a, **{"aggregation.reducer": "any"}),
        _run(tmp_path, "rb", "b", b, **{"aggregation.reducer": "any"}),
    )["paired"]
    assert row["test"] == "mcnemar_exact" and row["discordant"] == [6, 0]
    assert row["diff"] == pytest.approx(6 / 12)
    assert row["p_value"] == pytest.approx(st.binomtest(6, 6, 0.5).pvalue)
    # The same records under the default mean reducer: fractional scores, the paired t test.
    (mean_row,) = _compare(tmp_path / "m", _run(tmp_path / "m", "ra", "a", a), _run(tmp_path / "m", "rb", "b", b))[
        "paired"
    ]
    assert mean_row["test"] == "paired_t" and mean_row["diff"] == pytest.approx(
        np.mean([np.mean(v) - np.mean(w) for v, w in zip(a.values(), b.values())])
    )


# --------------------------------------------------------------------------- grouped questions (issue 33)


def _grouped_run(
    root: Path, name: str, model: str, scores: Sequence[float], topics: Sequence[str], by: bool = True
) -> Path:
    """A run of ``model`` asked once per question, question i in topic ``topics[i]``; the card groups by topic."""
    return _card_run(
        root,
        name,
        [
            {
                "question_id": f"q{i:02d}",
                "question_index": i,
                "model": model,
                "task": "mcq",
                "score": float(s),
                "correct": s == 1.0,
                "question_meta": {"topic": t},
            }
            for i, (s, t) in enumerate(zip(scores, topics))
        ],
        **({"aggregation.by": "topic"} if by else {}),
    )


def test_a_grouped_task_clusters_the_paired_se_ci_and_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """aggregation.by = topic: the row's se is the larger of statsmodels' cluster-robust SE of d and SD(d)/sqrt(n),
    the test a t on G - 1 degrees of freedom, the CI diff ± t(G-1) se, and the row and the text say so."""
    import statsmodels.api as sm

    rng = np.random.default_rng(12)
    topics = [f"t{i % 6}" for i in range(48)]
    shift = {f"t{g}": s for g, s in enumerate([0.4, -0.3, 0.5, 0.0, 0.3, -0.2])}  # shared within a topic
    a = [float(rng.random() < 0.5 + shift[t] / 2) for t in topics]
    b = [float(rng.random() < 0.5 - shift[t] / 2) for t in topics]
    capsys.readouterr()
    doc = _compare(tmp_path, _grouped_run(tmp_path, "ra", "a", a, topics), _grouped_run(tmp_path, "rb", "b", b, topics))
    text = capsys.readouterr().out
    (row,) = doc["paired"]
    x, y = (np.array(a), np.array(b)) if row["model_a"] == "a" else (np.array(b), np.array(a))
    d = x - y
    groups = np.array([int(t[1:]) for t in topics])
    cr1 = float(sm.OLS(d, np.ones(48)).fit(cov_type="cluster", cov_kwds={"groups": groups}).bse[0])
    se = max(cr1, float(st.sem(d)))
    assert (row["test"], row["clustered_by"], row["n_groups"]) == ("clustered_t", "topic", 6)
    assert row["se"] == pytest.approx(se, rel=1e-9) and row["diff"] == pytest.approx(d.mean())
    assert row["p_value"] == pytest.approx(2 * st.t.sf(abs(d.mean()) / se, 5), rel=1e-9)
    q = st.t.ppf(0.975, 5)
    assert row["ci95"] == pytest.approx([d.mean() - q * se, d.mean() + q * se], abs=1e-6)
    assert "clustered by topic (6 groups" in text
    # The same answers without the grouping: the questions treated as independent, exact McNemar.
    (plain,) = _compare(
        tmp_path / "plain",
        _grouped_run(tmp_path / "plain", "ra", "a", a, topics, by=False),
        _grouped_run(tmp_path / "plain", "rb", "b", b, topics, by=False),
    )["paired"]
    assert plain["clustered_by"] is None and plain["n_groups"] is None and plain["test"] == "mcnemar_exact"
    assert "questions treated as independent" in capsys.readouterr().out


def test_paired_test_holds_its_size_when_topics_share_the_difference() -> None:
    """Seeded simulation, true null: ten topics, in each the two models' difference shared by its questions
    (mean 0 over topics).  The clustered test rejects at most 5% + 3 Monte-Carlo SE of the time and its CI
    covers 0 at least 95% - 3 MCSE; McNemar, blind to the topics, rejects far more often (issue 33: 48.6%)."""
    from pytest_benchaudit.aggregate.repeat_stats import paired_difference

    rng = np.random.default_rng(33)
    trials = 600
    rejected = {"clustered": 0, "mcnemar": 0}
    covered = 0
    for _ in range(trials):
        base = 1 / (1 + np.exp(-(0.5 + rng.normal(size=10))))
        shift = rng.choice([-0.3, 0.3], size=10)  # symmetric: the difference over topics is 0 in truth
        topic = np.repeat(np.arange(10), rng.integers(8, 13, size=10))
        pa, pb = np.clip(base + shift / 2, 0, 1)[topic], np.clip(base - shift / 2, 0, 1)[topic]
        a = (rng.random(len(topic)) < pa).astype(float).tolist()
        b = (rng.random(len(topic)) < pb).astype(float).tolist()
        clustered = paired_difference(a, b, True, topic.tolist())
        rejected["clustered"] += clustered["p_value"] < 0.05
        rejected["mcnemar"] += paired_difference(a, b, True)["p_value"] < 0.05
        covered += clustered["ci95"][0] <= 0 <= clustered["ci95"][1]
    size_mcse, cover_mcse = np.sqrt(0.05 * 0.95 / trials), np.sqrt(0.95 * 0.05 / trials)
    assert rejected["clustered"] / trials <= 0.05 + 3 * size_mcse, rejected
    assert covered / trials >= 0.95 - 3 * cover_mcse, covered
    assert rejected["mcnemar"] / trials > 0.05 + 3 * size_mcse, rejected


def test_models_on_disjoint_questions_claim_no_test_and_are_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two models scored on different questions: the row (n = 0) names no test, and compare.json's notes and
    the text say the ranking compares scores on different questions."""
    ra = _run(tmp_path, "ra", "a", {f"a{i}": [float(i % 2)] for i in range(10)})
    rb = _run(tmp_path, "rb", "b", {f"b{i}": [float(i % 3 == 0)] for i in range(12)})
    capsys.readouterr()
    doc = _compare(tmp_path, ra, rb)
    text = capsys.readouterr().out
    (row,) = doc["paired"]
    assert (row["n"], row["n_a"], row["n_b"]) == (0, 10, 12)
    assert row["test"] is None and row["p_value"] is None and row["ci95"] is None and "discordant" not in row
    note = next(n for n in doc["notes"] if "no common question" in n)
    assert "toy.mcq" in note and "a (10) and b (12)" in note and "different questions" in note
    assert f"note: {note}" in text and "1 untestable" in text
