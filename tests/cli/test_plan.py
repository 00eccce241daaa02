"""``benchaudit plan``: the power analysis of a paired comparison, against scipy's normal quantiles,
statsmodels' t-test power and an exact McNemar power computed here from scipy's binomtest, from real
``--repeats`` runs against a scripted server on 127.0.0.1, and by simulation (seeded numpy: paired
answers at the planned size are detected at least 80% of the time by the test compare runs).
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_benchaudit.aggregate.power import Variances, paired_variances, questions_for
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.data import real_data_dir
from pytest_benchaudit.testing.runs import only_run_dir, write_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

OPTIONS = ["first option", "second option", "third option", "fourth option"]
GOLD = "B"
# Question id -> the probability each model answers it correctly (model b is a little worse, unevenly).
P_A = {f"p{i:02d}": p for i, p in enumerate([1.0, 0.9, 0.8, 0.7, 0.5, 0.5, 0.3, 0.2, 0.1, 0.0, 0.6, 0.4], 1)}
P_B = {q: max(0.0, p - (0.3 if i % 3 == 0 else 0.0)) for i, (q, p) in enumerate(P_A.items())}


class TwoModelDice:
    """A script: model ``a`` (``b``) answers question ``pNN`` with the gold letter with probability
    ``P_A[pNN]`` (``P_B``), from a random stream seeded per model and question."""

    def __init__(self, seed: int = 11) -> None:
        self.streams = {(m, q): random.Random(f"{seed}:{m}:{q}") for m in "ab" for q in P_A}
        self.lock = threading.Lock()

    def __call__(self, call: Any) -> Reply:
        qid = re.search(r"question (p\d\d)", call.last_user_text).group(1)  # type: ignore[union-attr]
        model = str(call.body.get("model"))
        probability = (P_A if model == "a" else P_B)[qid]
        with self.lock:
            right = self.streams[(model, qid)].random() < probability
        return Reply(content=f"Answer: {GOLD if right else 'C'}")


def _suite(root: Path) -> None:
    write_mcq_suite(
        root, "pw", [{"id": q, "question": f"Power question {q}?", "options": OPTIONS, "gold": GOLD} for q in P_A]
    )


def _run(pytester: pytest.Pytester, models: tuple[str, ...], *extra: str) -> Path:
    _suite(pytester.path)
    with ScriptedServer(TwoModelDice()) as server:
        args = [a for m in models for a in ("--model", f"{m}@{server.url}")]
        pytester.runpytest("suites/pw", "--data-dir", "data", *args, "--report-dir", "out", "-p", "no:randomly", *extra)
    return only_run_dir(pytester.path / "out")


def _plan(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> dict[str, Any]:
    capsys.readouterr()  # what an in-process pytest run printed before
    assert (
        main(["plan", "--suites-dir", str(root / "suites"), "--data-dir", str(root / "data"), "--json", *args]) == 0
    ), capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _scores(run_dir: Path) -> dict[str, dict[str, list[float]]]:
    """model -> question -> scores in repeat order, read here from records.jsonl."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.setdefault(r["model"], {}).setdefault(r["question_id"], []).append((r["repeat"], r["score"]))
    return {m: {q: [s for _, s in sorted(v)] for q, v in qs.items()} for m, qs in out.items()}


def _closed_form(mde: float, var: float, alpha: float = 0.05, power: float = 0.80) -> int:
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return max(2, math.ceil(z * z * var / mde**2 - 1e-9))


def _t_questions(mde: float, var: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """The paired t test's questions from statsmodels' power solver (an implementation we did not write)."""
    from statsmodels.stats.power import TTestPower

    n = TTestPower().solve_power(effect_size=mde / math.sqrt(var), alpha=alpha, power=power, alternative="two-sided")
    return max(2, math.ceil(float(n) - 1e-9))


def _mcnemar_power(n: int, psi: float, mde: float, alpha: float = 0.05) -> float:
    """The exact McNemar power written out here: for each discordant count m (those with any weight),
    the rejection region read off scipy's binomtest p-values (the largest k <= m/2 it rejects, which
    moves by at most one from one m to the next), then the binomial chances of landing in it."""
    psi = max(psi, mde)
    q = (psi + mde) / (2 * psi)
    sd = math.sqrt(n * psi * (1 - psi))
    total, c = 0.0, -1
    for m in range(max(1, int(n * psi - 7 * sd)), min(n, int(n * psi + 7 * sd) + 1) + 1):
        if c < 0:  # the first m, or none rejected yet: search from the bottom
            c = max((k for k in range(m // 2 + 1) if stats.binomtest(k, m).pvalue < alpha), default=-1)
        else:
            while c + 1 <= m // 2 and stats.binomtest(c + 1, m).pvalue < alpha:
                c += 1
            while c >= 0 and not stats.binomtest(c, m).pvalue < alpha:
                c -= 1
        if c >= 0:
            total += stats.binom.pmf(m, n, psi) * (stats.binom.cdf(c, m, q) + stats.binom.sf(m - c - 1, m, q))
    return total


def _check_mcnemar_row(row: dict[str, Any], psi: float, mde: float, alpha: float = 0.05, power: float = 0.80) -> None:
    """The K = 1 row of a 0/1 metric: exact McNemar, at the fewest questions whose exact power reaches ``power``."""
    n = row["questions"]
    assert row["test"] == "mcnemar_exact"
    assert row["power"] == pytest.approx(_mcnemar_power(n, psi, mde, alpha), abs=1e-9)
    assert _mcnemar_power(n, psi, mde, alpha) >= power > _mcnemar_power(n - 1, psi, mde, alpha)


def test_no_runs_plans_from_the_stated_binary_assumption(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without runs: Var = 1/4 + 1/4 per question (two independent 0/1 scores right half the time, so half
    the questions discordant), all counted between questions.  K = 1: the exact McNemar test compare runs on
    0/1 scores, which needs more questions than the normal approximation's 1,570 (issue 33: at that n it
    reaches 0.77-0.78); K > 1: the paired t, the same questions at every K."""
    _suite(pytester.path)
    plan = _plan(capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.05")
    assert _closed_form(0.05, 0.5) == 1570  # (1.95996 + 0.84162)^2 * 0.5 / 0.0025 = 1569.8, rounded up
    psi = 0.5 + 0.05**2  # the alternative with Var(D) = 0.5 and mean 0.05: Var(D) = psi - mde^2 on 0/1 scores
    assert _mcnemar_power(1570, psi, 0.05) < 0.80  # what the plan used to promise
    first, *rest = plan["rows"]
    _check_mcnemar_row(first, psi, 0.05)
    assert first["repeats"] == 1 and first["questions"] > 1570 and first["fits"] is False
    n = _t_questions(0.05, 0.5)
    assert [(r["repeats"], r["questions"], r["generations"], r["fits"], r["test"]) for r in rest] == [
        (k, n, n * k, False, "paired_t") for k in (2, 3, 5, 10)
    ]
    assert plan["task_questions"] == len(P_A) and plan["best"] is None and plan["questions_any_repeats"] == n
    assert plan["discordance"] == pytest.approx(psi) and plan["variances"]["binary"] is True
    assert plan["z_total"] == pytest.approx(stats.norm.ppf(0.975) + stats.norm.ppf(0.80), abs=1e-12)
    assert "assumed (no runs given)" in plan["variances"]["source"] and not plan["variances"]["within_measured"]
    # --alpha / --power reach both tests; --repeats picks the rows.
    other = _plan(
        capsys, pytester.path, "--task", "pw", "--mde", "0.2", "--alpha", "0.01", "--power", "0.9", "--repeats", "4,1"
    )
    assert [r["repeats"] for r in other["rows"]] == [1, 4]
    _check_mcnemar_row(other["rows"][0], 0.5 + 0.2**2, 0.2, 0.01, 0.9)
    assert other["rows"][1]["questions"] == _t_questions(0.2, 0.5, 0.01, 0.9)
    # The text form says the same, the assumption and the tests in words.
    assert (
        main(
            [
                "plan",
                "--suites-dir",
                str(pytester.path / "suites"),
                "--data-dir",
                str(pytester.path / "data"),
                "--task",
                "pw.mcq",
                "--mde",
                "0.05",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "each model right with probability 0.5" in text and f"{first['questions']:,}" in text
    assert "exact McNemar" in text and "paired t" in text and f"{first['power']:.3f}" in text
    assert "no K of 1, 2, 3, 5, 10 suffices: pw.mcq has 12 questions" in text


def test_two_models_with_repeats_measure_both_variances(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real run of two models x 12 questions x 4 repeats: the plan's variances are the method-of-moments
    estimates computed here with numpy from records.jsonl, its rows the closed form of them."""
    run_dir = _run(pytester, ("a", "b"), "--repeats", "4")
    scores = _scores(run_dir)
    assert {len(v) for m in scores.values() for v in m.values()} == {4}
    a = np.array([scores["a"][q] for q in P_A])
    b = np.array([scores["b"][q] for q in P_A])
    within = float(np.mean(a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)))
    d = a.mean(axis=1) - b.mean(axis=1)
    between = max(float(np.var(d, ddof=1) - within / 4), 0.0)
    plan = _plan(capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.25", "--from", str(run_dir))
    v = plan["variances"]
    assert v["within"] == pytest.approx(within, abs=1e-12) and v["between"] == pytest.approx(between, abs=1e-12)
    assert v["within_measured"] and v["questions"] == 12 and v["repeats"] == 4 and within > 0
    assert plan["models"] == ["a", "b"]
    # 0/1 answers asked once: McNemar for the alternative with the measured Var(D) and a mean of the mde.
    psi = max(between + within + 0.25**2, 0.25)
    assert plan["discordance"] == pytest.approx(psi, abs=1e-12) and v["binary"] is True
    _check_mcnemar_row(plan["rows"][0], psi, 0.25)
    for row in plan["rows"]:
        k = row["repeats"]
        if k > 1:
            assert row["test"] == "paired_t" and row["questions"] == _t_questions(0.25, between + within / k)
        assert row["fits"] == (row["questions"] <= 12)
    # More repeats never need more questions; with the within part measured they need fewer.
    needed = [r["questions"] for r in plan["rows"][1:]]
    assert needed == sorted(needed, reverse=True) and needed[-1] < needed[0]
    assert plan["questions_any_repeats"] == _t_questions(0.25, between)
    # Metamorphic: the records in another order, and the models named the other way round, change nothing.
    records = (run_dir / "records.jsonl").read_text().splitlines()
    (run_dir / "records.jsonl").write_text("\n".join(reversed(records)) + "\n")
    again = _plan(capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.25", "--from", str(run_dir), "--models", "b,a")
    assert again["variances"]["between"] == pytest.approx(between, abs=1e-12)
    assert again["variances"]["within"] == pytest.approx(within, abs=1e-12)
    assert again["rows"] == plan["rows"]


def test_one_model_is_doubled_for_an_independent_second(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run(pytester, ("a",), "--repeats", "3")
    s = np.array([_scores(run_dir)["a"][q] for q in P_A])
    within = float(np.mean(s.var(axis=1, ddof=1)))
    between = max(float(np.var(s.mean(axis=1), ddof=1)) - within / 3, 0.0)
    plan = _plan(capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.3", "--from", str(run_dir))
    assert plan["variances"]["within"] == pytest.approx(2 * within, abs=1e-12)
    assert plan["variances"]["between"] == pytest.approx(2 * between, abs=1e-12)
    assert "doubled for a second, independent model" in plan["variances"]["source"]
    # K = 1: exact McNemar, the discordance of the alternative Var(D) + mde^2.
    psi = max(2 * between + 2 * within + 0.09, 0.3)
    assert plan["discordance"] == pytest.approx(psi)
    _check_mcnemar_row(plan["rows"][0], psi, 0.3)
    assert plan["rows"][1]["questions"] == _t_questions(0.3, 2 * between + 2 * within / 2)


def test_a_run_asked_once_counts_everything_between_questions(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run(pytester, ("a", "b"))
    scores = _scores(run_dir)
    d = np.array([scores["a"][q][0] - scores["b"][q][0] for q in P_A])
    plan = _plan(capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.3", "--from", str(run_dir))
    assert not plan["variances"]["within_measured"] and plan["variances"]["within"] == 0
    assert plan["variances"]["between"] == pytest.approx(float(np.var(d, ddof=1)), abs=1e-12)
    assert len({r["questions"] for r in plan["rows"][1:]}) == 1  # repeats assumed to help nothing
    # Asked once, Var(D) + d_mean^2 is the discordant share (times n/(n-1)); the alternative moves the mean to 0.3.
    assert float(np.var(d, ddof=1)) * 11 / 12 + d.mean() ** 2 == pytest.approx(float(np.mean(d != 0)))
    _check_mcnemar_row(plan["rows"][0], max(float(np.var(d, ddof=1)) + 0.09, 0.3), 0.3)
    assert "cannot be told apart" in plan["variances"]["source"]


def test_several_models_take_the_pair_whose_difference_varies_most(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three models in hand-made runs (b in a second run): the plan rests on the pair with the largest
    Var(D) at K = 1, computed here; --models picks another pair."""
    _suite(pytester.path)
    qs = list(P_A)[:6]
    answers = {
        "a": [[1, 1], [1, 0], [0, 0], [1, 1], [0, 1], [1, 1]],
        "b": [[1, 1], [1, 1], [0, 0], [1, 0], [0, 0], [1, 1]],
        "c": [[0, 0], [0, 1], [1, 1], [0, 0], [1, 1], [0, 0]],
    }

    def records(model: str) -> list[dict[str, Any]]:
        return [
            {
                "benchmark": "pw",
                "task": "mcq",
                "question_id": q,
                "question_index": i,
                "model": model,
                "repeat": k,
                "score": float(v),
                "correct": bool(v),
                "metric": "exact_match",
            }
            for i, q in enumerate(qs)
            for k, v in enumerate(answers[model][i])
        ]

    one = write_run_dir(pytester.path / "runs", "one", records("a") + records("c"))
    two = write_run_dir(pytester.path / "runs", "two", records("b"))

    def total(x: str, y: str) -> float:
        s_x, s_y = np.array(answers[x], float), np.array(answers[y], float)
        within = np.mean(s_x.var(axis=1, ddof=1) + s_y.var(axis=1, ddof=1))
        between = max(np.var(s_x.mean(axis=1) - s_y.mean(axis=1), ddof=1) - within / 2, 0.0)
        return float(between + within)

    widest = max([("a", "b"), ("a", "c"), ("b", "c")], key=lambda p: total(*p))
    plan = _plan(capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.3", "--from", str(one), str(two))
    assert tuple(sorted(plan["models"])) == tuple(sorted(widest))
    assert plan["variances"]["between"] + plan["variances"]["within"] == pytest.approx(total(*widest))
    picked = _plan(
        capsys, pytester.path, "--task", "pw.mcq", "--mde", "0.3", "--from", str(one), str(two), "--models", "a,b"
    )
    assert picked["models"] == ["a", "b"]
    assert picked["variances"]["between"] + picked["variances"]["within"] == pytest.approx(total("a", "b"))


def test_bad_input_is_one_clear_error(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(pytester, ("a",))
    base = ["plan", "--suites-dir", str(pytester.path / "suites"), "--data-dir", str(pytester.path / "data")]
    cases = [
        (["--task", "pw.mcqq", "--mde", "0.1"], "--task 'pw.mcqq': pw has no task 'mcqq' (did you mean 'mcq'?)"),
        (["--task", "nope.mcq", "--mde", "0.1"], "no suite 'nope'"),
        (["--task", "pw.mcq", "--mde", "0"], "--mde 0.0: the difference to detect must be a number > 0"),
        (["--task", "pw.mcq", "--mde", "-0.1"], "must be a number > 0"),
        (["--task", "pw.mcq", "--mde", "nan"], "must be a number > 0"),
        (
            ["--task", "pw.mcq", "--mde", "3"],
            "is a share in [0, 1]; the difference is absolute in that unit (did you mean 0.03, 3 points?)",
        ),
        (["--task", "pw.mcq", "--mde", "0.1", "--alpha", "1.5"], "--alpha 1.5: must lie strictly between 0 and 1"),
        (["--task", "pw.mcq", "--mde", "0.1", "--power", "0"], "--power 0.0: must lie strictly between 0 and 1"),
        # past what floating point or the planner holds: named, never a traceback or a 292 GiB array
        (["--task", "pw.mcq", "--mde", "0.1", "--alpha", "1e-20"], "alpha 1e-20 is too small: its normal quantile"),
        (["--task", "pw.mcq", "--mde", "1e-5"], "the plan needs more than 100 million questions"),
        (["--task", "pw.mcq", "--mde", "1e-200"], "the difference to detect, 1e-200, is too small to plan for"),
        (["--task", "pw.mcq", "--mde", "0.1", "--repeats", "0,2"], "--repeats '0,2': a comma-separated list"),
        (
            ["--task", "pw.mcq", "--mde", "0.1", "--from", str(run_dir), "--models", "a,z"],
            "--models 'a,z': give two of the runs' models, A,B; models: a",
        ),
        (
            ["--task", "pw.mcq", "--mde", "0.1", "--from", str(pytester.path)],
            "neither a run directory (no run.json) nor a folder of run directories",
        ),
    ]
    capsys.readouterr()
    for extra, message in cases:
        code = main(base + extra)
        err = capsys.readouterr().err
        assert code == 2, (extra, err)
        assert message in err and "Traceback" not in err, (extra, err)
    # A run without the task: named, with the tasks it has.
    write_mcq_suite(
        pytester.path,
        "other",
        [
            {"id": "o1", "question": "Other?", "options": OPTIONS, "gold": "A"},
            {"id": "o2", "question": "Other 2?", "options": OPTIONS, "gold": "A"},
        ],
    )
    assert main(base + ["--task", "other.mcq", "--mde", "0.1", "--from", str(run_dir)]) == 2
    assert f"--from {run_dir}: no records of other.mcq; tasks in this run: pw.mcq" in capsys.readouterr().err
    # A line of records.jsonl that is no record: the store's one line naming file:line (exit 1).
    with (run_dir / "records.jsonl").open("a") as fh:
        fh.write('{"benchmark": "pw", "task": 3}\n{"benchmark": "pw"}\n')
    assert main(base + ["--task", "pw.mcq", "--mde", "0.1", "--from", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "records.jsonl:" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    # The data missing: the reader's message (how to get it), not a traceback.
    (pytester.path / "data" / "pw" / "pw.jsonl").unlink()
    assert main(base + ["--task", "pw.mcq", "--mde", "0.1"]) == 2
    assert "data file not found" in capsys.readouterr().err


def test_cybermetric_cm80_size_is_its_data_files(capsys: pytest.CaptureFixture[str]) -> None:
    """The real suite: cybermetric.cm80 holds 80 questions (counted here from the file)."""
    data = real_data_dir()
    path = data / "cybermetric" / "CyberMetric-80-v1.json"
    if not path.is_file():
        pytest.skip(f"real-data file missing: {path}")
    count = len(json.loads(path.read_text())["questions"])
    assert main(["plan", "--task", "cybermetric.cm80", "--mde", "0.5", "--data-dir", str(data), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["task_questions"] == count == 80

    # K = 1, exact McNemar; no runs: Var(D) = 0.5, so the discordance is 0.5 + 0.5^2 = 0.75 and a discordant
    # question favours the better model with chance (0.75 + 0.5) / 1.5 = 5/6.  Written out with scipy:
    # the exact test rejects m discordant questions when at most c_m favour the other (binomtest's p).
    def power(n: int) -> float:
        total = 0.0
        for m in range(1, n + 1):
            c = max((k for k in range(m // 2 + 1) if stats.binomtest(k, m).pvalue < 0.05), default=-1)
            if c >= 0:
                inside = stats.binom.cdf(c, m, 5 / 6) + stats.binom.sf(m - c - 1, m, 5 / 6)
                total += stats.binom.pmf(m, n, 0.75) * inside
        return total

    n = plan["best"]["questions"]
    assert power(n) >= 0.80 > power(n - 1)
    assert plan["best"] == {
        "repeats": 1,
        "questions": n,
        "generations": n,
        "fits": True,
        "test": "mcnemar_exact",
        "power": pytest.approx(power(n)),
    }


_matrix = st.integers(2, 12).flatmap(
    lambda n: st.integers(1, 4).flatmap(
        lambda k: st.tuples(
            st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=k, max_size=k), min_size=n, max_size=n),
            st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=k, max_size=k), min_size=n, max_size=n),
        )
    )
)


@settings(max_examples=60, deadline=None)
@given(_matrix, st.floats(-3, 3, allow_nan=False))
def test_estimates_are_symmetric_shift_free_and_numpy_s(
    ab: tuple[list[list[float]], list[list[float]]], shift: float
) -> None:
    """Properties whatever the answers: a vs b equals b vs a; adding a constant to every score of a
    moves neither variance; the within part is numpy's mean of the two per-question variances."""
    a, b = ({f"q{i}": row for i, row in enumerate(m)} for m in ab)
    est = paired_variances(a, b)
    swapped = paired_variances(b, a)
    shifted = paired_variances({q: [x + shift for x in v] for q, v in a.items()}, b)
    assert swapped.between == pytest.approx(est.between, abs=1e-12)
    assert swapped.within == pytest.approx(est.within, abs=1e-12)
    assert shifted.between == pytest.approx(est.between, abs=1e-9)
    assert shifted.within == pytest.approx(est.within, abs=1e-9)
    k = len(ab[0][0])
    if k > 1:
        expected = np.mean(np.var(ab[0], axis=1, ddof=1) + np.var(ab[1], axis=1, ddof=1))
        assert est.within == pytest.approx(float(expected))
    else:
        assert est.within == 0 and not est.within_measured
    assert est.between >= 0


@pytest.mark.parametrize(
    "mde,between,within,k", [(0.03, 0.5, 0.0, 1), (0.05, 0.02, 0.4, 3), (0.1, 0.0, 0.3, 10), (0.25, 0.1, 0.2, 2)]
)
def test_agrees_with_the_summary_modules_power_formula(mde: float, between: float, within: float, k: int) -> None:
    """aggregate/repeat_stats.py's questions_needed (z from statistics.NormalDist, 5% and 80% fixed) gives
    the same questions as the plan's (z from scipy) at those levels."""
    from pytest_benchaudit.aggregate.repeat_stats import questions_needed

    plan = questions_for(mde, Variances(between=between, within=within, source="given"), k)
    assert plan == questions_needed(mde, between, within, k) == _closed_form(mde, between + within / k)


def test_a_metric_that_is_not_0_1_has_no_assumption_without_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """CTI-Bench VSP scores a CVSS MAD (lower is better, not a share): no run, no plan; an --mde of 2.5
    (MAD points) is not refused as a share would be."""
    suites = Path(__file__).resolve().parents[2] / "suites"
    assert main(["plan", "--task", "cti_bench.vsp", "--mde", "2.5", "--suites-dir", str(suites)]) == 2
    err = capsys.readouterr().err
    assert "cti_bench.vsp scores with 'cvss_abs_diff', not a 0/1 score" in err and "--from RUN" in err


# A mixture of question kinds: (share of questions, P(a right), P(b right)).  Mean difference 0.04;
# between-question variance 0.0256 (a is better on one kind, worse on the other), within 0.4223.
KINDS = [(0.5, 0.85, 0.65), (0.5, 0.40, 0.52)]


def _true_variances() -> Variances:
    w = np.array([k[0] for k in KINDS])
    pa = np.array([k[1] for k in KINDS])
    pb = np.array([k[2] for k in KINDS])
    d = pa - pb
    between = float(np.sum(w * (d - np.sum(w * d)) ** 2))
    within = float(np.sum(w * (pa * (1 - pa) + pb * (1 - pb))))
    return Variances(between=between, within=within, source="true")


def _simulate(rng: np.random.Generator, trials: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): trials x n x k paired 0/1 answers of questions drawn from :data:`KINDS`."""
    kind = rng.choice(len(KINDS), size=(trials, n), p=[k_[0] for k_ in KINDS])
    pa = np.array([k_[1] for k_ in KINDS])[kind][..., None]
    pb = np.array([k_[2] for k_ in KINDS])[kind][..., None]
    return (rng.random((trials, n, k)) < pa).astype(float), (rng.random((trials, n, k)) < pb).astype(float)


@pytest.mark.parametrize("k", [1, 3])
def test_simulated_detection_rate_at_the_planned_size_is_the_power(k: int) -> None:
    """Paired 0/1 answers simulated at the planned n (true difference 0.04, the mde): the paired t test
    at 5% detects it in about 80% of trials (0.8 inside the 99% Clopper-Pearson interval of the rate)."""
    true = _true_variances()
    mde = sum(w * (pa - pb) for w, pa, pb in KINDS)
    n = questions_for(mde, true, k)
    assert n == _closed_form(mde, true.between + true.within / k)
    rng = np.random.default_rng(20261203 + k)
    trials = 3000
    a, b = _simulate(rng, trials, n, k)
    d = a.mean(axis=2) - b.mean(axis=2)
    p = stats.ttest_1samp(d, 0.0, axis=1).pvalue
    detected = int(np.sum(p < 0.05))
    ci = stats.binomtest(detected, trials).proportion_ci(0.99)
    assert ci.low <= 0.80 <= ci.high, (detected / trials, n)
    # Half the planned questions fall well short of the power (the plan is not merely generous).
    d_half = d[:, : n // 2]
    assert np.mean(stats.ttest_1samp(d_half, 0.0, axis=1).pvalue < 0.05) < 0.6


def test_the_estimator_recovers_the_true_variances() -> None:
    """On a large simulated pilot (4,000 questions x 3 repeats) the method-of-moments estimates land
    near the mixture's true between- and within-question variances."""
    true = _true_variances()
    a, b = _simulate(np.random.default_rng(5), 1, 4000, 3)
    est = paired_variances({str(i): list(a[0, i]) for i in range(4000)}, {str(i): list(b[0, i]) for i in range(4000)})
    assert est.within == pytest.approx(true.within, rel=0.05)
    assert est.between == pytest.approx(true.between, abs=0.012)
    assert est.within_measured and est.questions == 4000 and est.repeats == 3


def test_a_folder_of_runs_is_read_as_the_runs_in_it(tmp_path: Path) -> None:
    """`--from FOLDER` reads the run directories inside it, as compare does; a folder without runs is one line."""
    import subprocess
    import sys

    empty = tmp_path / "nothing"
    empty.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "plan",
            "--task",
            "cybermetric.cm80",
            "--mde",
            "0.1",
            "--from",
            str(empty),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "neither a run directory (no run.json) nor a folder of run directories" in done.stderr


def test_the_planned_rows_reach_their_power_with_the_test_compare_runs() -> None:
    """Simulated at each row's n, with the test compare runs on it: K = 1 (0/1 answers of the KINDS
    mixture) the exact McNemar test (scipy's binomtest on the discordant questions), K = 3 the paired t
    on per-question means.  Each detects the mde in at least 80% of the trials and about as often as the
    row's power says (3 Monte-Carlo SEs); the normal approximation's n falls short for McNemar."""
    from pytest_benchaudit.aggregate.power import mcnemar_power, plan_rows

    true = _true_variances()
    mde = sum(w * (pa - pb) for w, pa, pb in KINDS)
    psi = sum(w * (pa * (1 - pb) + (1 - pa) * pb) for w, pa, pb in KINDS)
    assert psi == pytest.approx(true.between + true.within + mde**2)  # Var(D) = psi - mde^2 on 0/1 answers
    variances = Variances(between=true.between, within=true.within, source="true", binary=True)
    once, thrice = plan_rows(mde, variances, None, (1, 3))
    assert (once.test, thrice.test) == ("mcnemar_exact", "paired_t")
    trials = 2000
    rng = np.random.default_rng(20261206)
    a, b = _simulate(rng, trials, once.questions, 1)
    only_a, only_b = ((a == 1) & (b == 0)).sum(axis=(1, 2)), ((a == 0) & (b == 1)).sum(axis=(1, 2))
    p_values = [stats.binomtest(int(x), int(x + y)).pvalue if x + y else 1.0 for x, y in zip(only_a, only_b)]
    rate = float(np.mean(np.array(p_values) < 0.05))
    mcse = math.sqrt(0.8 * 0.2 / trials)
    assert rate >= 0.80 - 3 * mcse and abs(rate - float(once.power or 0)) <= 3 * mcse, (rate, once)
    # The normal approximation of a paired t (what plan gave before) is short of 0.80 under McNemar.
    assert mcnemar_power(questions_for(mde, true, 1), psi, mde) < 0.80
    a, b = _simulate(rng, trials, thrice.questions, 3)
    d = a.mean(axis=2) - b.mean(axis=2)
    rate = float(np.mean(stats.ttest_1samp(d, 0.0, axis=1).pvalue < 0.05))
    assert rate >= 0.80 - 3 * mcse and abs(rate - float(thrice.power or 0)) <= 3 * mcse, (rate, thrice)
