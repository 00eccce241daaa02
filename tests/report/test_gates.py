"""Tests for pytest_benchaudit.report.gates: the ``--gate`` grammar and its verdicts
over real summaries (built with :mod:`pytest_benchaudit.aggregate.results`)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_benchaudit.aggregate.results import benchmark_scores, summarize
from pytest_benchaudit.report.gates import Gate, GateError, GateVerdict, evaluate_gates, gate_results, parse_gate

# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "text,expected",
    [
        ("seceval>=0.70", ("seceval", None, "score", ">=", 0.70)),
        ("seceval.mcq:invalid<=0.05", ("seceval", "mcq", "invalid", "<=", 0.05)),
        ("cti_bench.mcq:score_valid>0.5", ("cti_bench", "mcq", "score_valid", ">", 0.5)),
        ("cti_bench:score_total<0.9", ("cti_bench", None, "score_total", "<", 0.9)),
        ("  mmlu-cs.t1 == 1  ", ("mmlu-cs", "t1", "score", "==", 1.0)),
        ("seceval:score>=7e-1", ("seceval", None, "score", ">=", 0.7)),
    ],
)
def test_parse_valid_forms(text: str, expected: tuple[Any, ...]):
    gate = parse_gate(text)
    assert isinstance(gate, Gate)
    assert (gate.benchmark, gate.task, gate.quantity, gate.op, gate.threshold) == pytest.approx(expected)
    assert gate.text == text.strip()


@pytest.mark.parametrize(
    "text",
    [
        "seceval",  # no operator
        "seceval>=",  # no number
        ">=0.7",  # no target
        "seceval=>0.7",  # wrong operator
        "seceval!=0.7",  # unsupported operator
        "seceval>=high",  # not a number
        "seceval:Score>=0.7",  # quantity is lower case
        "sec eval>=0.7",  # space in the name
        "a.b.c>=0.7",  # too many parts
    ],
)
def test_malformed_gate_shows_the_grammar(text: str):
    with pytest.raises(GateError) as info:
        parse_gate(text)
    message = str(info.value)
    assert repr(text) in message
    assert "BENCHMARK[.TASK][:QUANTITY]OPNUMBER" in message
    assert "seceval>=0.70" in message  # an example
    for word in ("score_total", "score_valid", "invalid", ">=", "<="):
        assert word in message


def test_unknown_quantity_lists_the_allowed_ones():
    with pytest.raises(GateError, match=r"unknown quantity 'accuracy'.*score, score_total, score_valid, invalid"):
        parse_gate("seceval:accuracy>=0.7")


def test_number_that_regex_accepts_but_float_rejects():
    with pytest.raises(GateError, match="is not a number"):
        parse_gate("seceval>=1.2.3")


def test_gate_error_is_a_value_error():
    assert issubclass(GateError, ValueError)


# --------------------------------------------------------------------------- fixtures


def rec(
    model: str, task: str, *, correct: bool = False, valid: bool = True, benchmark: str = "seceval", variant: str = ""
) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "task": task,
        "model": model,
        "variant": variant,
        "pipeline": "p",
        "pipeline_hash": "h",
        "valid": valid,
        "invalid_reason": None if valid else "unparseable",
        "invalid_stage": None if valid else "extraction",
        "score": 1.0 if (correct and valid) else 0.0,
        "correct": correct and valid,
        "metric": "exact_match",
        "question_meta": {},
    }


def card(denominator: str = "total", method: str = "micro") -> dict[str, Any]:
    return {
        "fields": {"scoring.metric": "exact_match", "scoring.denominator": denominator, "aggregation.method": method}
    }


def items(model: str, task: str, right: int, wrong: int, invalid: int, **kw: Any) -> list[dict[str, Any]]:
    return (
        [rec(model, task, correct=True, **kw) for _ in range(right)]
        + [rec(model, task, **kw) for _ in range(wrong)]
        + [rec(model, task, valid=False, **kw) for _ in range(invalid)]
    )


def run(records: list[dict[str, Any]], cards: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    results = summarize(records, cards)
    return results, benchmark_scores(results, cards)


def verdict(text: str, results: list[dict], benchmarks: list[dict]) -> GateVerdict:
    (v,) = evaluate_gates([parse_gate(text)], results, benchmarks)
    return v


@pytest.fixture
def two_models() -> tuple[list[dict], list[dict]]:
    """seceval with tasks mcq and qa, models good and bad, headline over all items.

    good: mcq 9/10 (0 invalid), qa 8/10 (1 invalid)  -> micro 17/20 = 0.85
    bad:  mcq 5/10 (2 invalid), qa 4/10 (4 invalid) -> micro 9/20 = 0.45
    """
    records = (
        items("good", "mcq", 9, 1, 0)
        + items("good", "qa", 8, 1, 1)
        + items("bad", "mcq", 5, 3, 2)
        + items("bad", "qa", 4, 2, 4)
    )
    return run(records, {"seceval.mcq": card(), "seceval.qa": card()})


# --------------------------------------------------------------------------- evaluation


def test_benchmark_gate_passes_only_if_every_model_passes(two_models):
    results, benchmarks = two_models
    v = verdict("seceval>=0.40", results, benchmarks)
    assert v.passed is True
    assert "good: 0.8500" in v.detail and "bad: 0.4500" in v.detail

    v = verdict("seceval>=0.70", results, benchmarks)
    assert v.passed is False
    assert "good: 0.8500" in v.detail and "bad: 0.4500" in v.detail


def test_gate_per_model_single_model_passes():
    results, benchmarks = run(items("good", "mcq", 9, 1, 0), {"seceval.mcq": card()})
    assert verdict("seceval>=0.9", results, benchmarks).passed is True
    assert verdict("seceval>0.9", results, benchmarks).passed is False
    assert verdict("seceval==0.9", results, benchmarks).passed is True
    assert verdict("seceval<1", results, benchmarks).passed is True


def test_task_gate_uses_the_task_row(two_models):
    results, benchmarks = two_models
    assert verdict("seceval.mcq>=0.5", results, benchmarks).passed is True  # 0.9 and 0.5
    v = verdict("seceval.qa>=0.5", results, benchmarks)  # 0.8 and 0.4
    assert v.passed is False
    assert "bad: 0.4000" in v.detail


def test_task_invalid_rate_gate(two_models):
    results, benchmarks = two_models
    v = verdict("seceval.mcq:invalid<=0.05", results, benchmarks)  # good 0.0, bad 0.2
    assert v.passed is False
    assert "good: 0.0000" in v.detail and "bad: 0.2000" in v.detail
    assert verdict("seceval.mcq:invalid<=0.2", results, benchmarks).passed is True


def test_task_score_valid_gate(two_models):
    results, benchmarks = two_models
    # mcq score_valid: good 9/10, bad 5/8
    v = verdict("seceval.mcq:score_valid>0.6", results, benchmarks)
    assert v.passed is True
    assert "bad: 0.6250" in v.detail
    assert verdict("seceval.mcq:score_valid>0.7", results, benchmarks).passed is False


def test_benchmark_level_invalid_rate_pools_tasks(two_models):
    results, benchmarks = two_models
    # good: 1 of 20 invalid = 0.05; bad: 6 of 20 = 0.30
    v = verdict("seceval:invalid<=0.30", results, benchmarks)
    assert v.passed is True
    assert "good: 0.0500" in v.detail and "bad: 0.3000" in v.detail
    v = verdict("seceval:invalid<0.30", results, benchmarks)
    assert v.passed is False


def test_benchmark_level_score_total_of_single_task():
    results, benchmarks = run(items("m", "mcq", 3, 0, 1), {"seceval.mcq": card("valid")})
    assert verdict("seceval:score_total>=0.75", results, benchmarks).passed is True
    assert verdict("seceval:score_valid>=1.0", results, benchmarks).passed is True
    assert verdict("seceval>=1.0", results, benchmarks).passed is True  # headline = valid


def test_missing_target_fails_with_reason(two_models):
    results, benchmarks = two_models
    for text in ("cti_bench>=0.5", "seceval.nosuchtask>=0.5"):
        v = verdict(text, results, benchmarks)
        assert v.passed is False
        assert v.detail == "no results for this target in the run"


def test_unspecified_score_fails_with_reason():
    # denominator unspecified -> no headline score for the task
    results, benchmarks = run(items("m", "mcq", 10, 0, 0), {"seceval.mcq": card("unspecified")})
    v = verdict("seceval.mcq>=0.0", results, benchmarks)
    assert v.passed is False
    assert "m: no score (unspecified by the pipeline)" in v.detail
    # the single-task benchmark inherits the missing score
    v = verdict("seceval>=0.0", results, benchmarks)
    assert v.passed is False
    assert "unspecified" in v.detail


def test_unspecified_aggregation_fails_benchmark_gate_but_not_task_gate(two_models):
    records = items("m", "mcq", 9, 1, 0) + items("m", "qa", 9, 1, 0)
    cards = {"seceval.mcq": card(method="unspecified"), "seceval.qa": card(method="unspecified")}
    results, benchmarks = run(records, cards)
    v = verdict("seceval>=0.1", results, benchmarks)
    assert v.passed is False and "no score" in v.detail
    assert verdict("seceval.mcq>=0.1", results, benchmarks).passed is True


def test_variants_are_judged_separately():
    records = items("m", "mcq", 9, 1, 0) + items("m", "mcq", 1, 9, 0, variant="cot")
    results, benchmarks = run(records, {"seceval.mcq": card()})
    v = verdict("seceval.mcq>=0.5", results, benchmarks)
    assert v.passed is False
    assert "m: 0.9000" in v.detail and "m|cot: 0.1000" in v.detail


def test_one_verdict_per_gate_in_order(two_models):
    results, benchmarks = two_models
    gates = [parse_gate("seceval>=0.4"), parse_gate("seceval>=0.9"), parse_gate("nope>=0")]
    verdicts = evaluate_gates(gates, results, benchmarks)
    assert [v.gate for v in verdicts] == gates
    assert [v.passed for v in verdicts] == [True, False, False]


# --------------------------------------------------------------------------- interval gates (issue 26)


def test_ci_low_gate_reads_the_wilson_interval_of_the_headline():
    from scipy import stats

    # 80 of 100 right: the score clears 0.70, and so does the low end of its 95% interval (0.711).
    results, benchmarks = run(items("good", "mcq", 80, 20, 0), {"seceval.mcq": card()})
    ci = stats.binomtest(80, 100).proportion_ci(method="wilson")
    v = verdict("seceval.mcq:ci_low>=0.70", results, benchmarks)
    assert v.passed is True and ci.low >= 0.70 and f"good: {ci.low:.4f}" in v.detail
    assert verdict("seceval:ci_low>=0.72", results, benchmarks).passed is bool(ci.low >= 0.72)
    # 8 of 10: the same score, an interval far wider: its low end (0.49) is below 0.70.
    small, small_b = run(items("good", "mcq", 8, 2, 0), {"seceval.mcq": card()})
    low = stats.binomtest(8, 10).proportion_ci(method="wilson").low
    v = verdict("seceval:ci_low>=0.70", small, small_b)
    assert v.passed is False and f"good: {low:.4f}" in v.detail
    assert verdict("seceval.mcq:ci_high>=0.90", small, small_b).passed is True


def test_ci_gate_on_a_benchmark_of_several_tasks_names_why(two_models):
    results, benchmarks = two_models
    v = verdict("seceval:ci_low>=0.1", results, benchmarks)
    assert v.passed is False and "no ci_low (not defined across several tasks; gate a task instead)" in v.detail


def test_ci_gates_parse_and_are_range_checked():
    from pytest_benchaudit.report.gates import check_gate_targets

    gate = parse_gate("seceval:ci_low>=0.70")
    assert (gate.quantity, gate.op, gate.threshold) == ("ci_low", ">=", 0.70)
    (problem,) = check_gate_targets([parse_gate("seceval:ci_high<=70")], {("seceval", "mcq"): "exact_match"})
    assert "outside the range of ci_high (0 to 1)" in problem and "0.7" in problem


def test_gate_results_are_the_summary_rows(two_models):
    """gate_results: one summary.json ``gates`` row per verdict, in order, that summary.json's type accepts."""
    from pydantic import TypeAdapter

    from pytest_benchaudit.aggregate.summary_documents import GateResult

    results, benchmarks = two_models
    verdicts = evaluate_gates([parse_gate("seceval>=0.5"), parse_gate("nope>=0.1")], results, benchmarks)
    rows = gate_results(verdicts)
    assert rows == [{"gate": v.gate.text, "passed": v.passed, "detail": v.detail} for v in verdicts]
    assert [list(r) for r in rows] == [["gate", "passed", "detail"]] * 2
    assert TypeAdapter(list[GateResult]).validate_python(rows) == rows


# --------------------------------------------------------------------------- intervals that do not exist (issue 33)


def grouped(model: str, task: str, outcomes: list[bool], topics: list[str]) -> list[dict[str, Any]]:
    return [{**rec(model, task, correct=ok), "question_meta": {"topic": t}} for ok, t in zip(outcomes, topics)]


def grouped_card() -> dict[str, Any]:
    return {"fields": {**card()["fields"], "aggregation.by": "topic"}}


def test_a_ci_gate_reads_the_clustered_interval_and_says_so():
    """20/20 right in 5 topics: the clustered interval was [1, 1] and 'ci_low>=0.95' passed; it reads the
    clustered Wilson interval (low end 1 / (1 + t(4)^2 / 20) = 0.72), fails, and names what it read."""
    from scipy import stats

    results, benchmarks = run(
        grouped("m", "mcq", [True] * 20, [f"t{i % 5}" for i in range(20)]), {"seceval.mcq": grouped_card()}
    )
    (v,) = evaluate_gates([parse_gate("seceval.mcq:ci_low>=0.95")], results, benchmarks)
    low = 1 / (1 + stats.t.ppf(0.975, 4) ** 2 / 20)
    assert v.passed is False and f"m: {low:.4f}" in v.detail
    assert "ci95_clustered (Wilson on the design-effect n, t quantile, 5 groups of topic)" in v.detail
    (row,) = gate_results([v])
    assert row["interval"] == v.interval and row["interval"].startswith("ci95_clustered")
    # A gate never reads an interval narrower than the table shows: the row's plain one is inside it.
    assert results[0]["ci95"][0] > low


def test_a_ci_gate_fails_where_there_is_no_interval():
    # One topic: no clustered error bar can be measured; the plain interval is not read in its place.
    results, benchmarks = run(grouped("m", "mcq", [True] * 9 + [False], ["only"] * 10), {"seceval.mcq": grouped_card()})
    v = verdict("seceval.mcq:ci_low>=0.1", results, benchmarks)
    assert v.passed is False and "no clustered interval: 1 group(s) of topic" in v.detail
    # An error metric whose questions all scored the same: no spread, no interval (it was zero-width).
    mad = [{**rec("m", "vsp"), "metric": "cvss_abs_diff", "score": 0.5, "correct": False} for _ in range(8)]
    results, benchmarks = run(
        mad, {"seceval.vsp": {"fields": {"scoring.metric": "cvss_abs_diff", "scoring.denominator": "total"}}}
    )
    v = verdict("seceval.vsp:ci_high<=1", results, benchmarks)
    assert v.passed is False and "no ci_high (no interval" in v.detail


def test_a_zero_width_interval_never_passes():
    """A row handed over with a degenerate interval (an old summary's) fails the gate with the reason."""
    results, benchmarks = run(items("m", "mcq", 8, 2, 0), {"seceval.mcq": card()})
    results[0]["ci95"] = [0.8, 0.8]
    v = verdict("seceval.mcq:ci_low>=0.5", results, benchmarks)
    assert v.passed is False and "zero width" in v.detail


@pytest.mark.parametrize("seed", range(12))
def test_the_interval_a_gate_reads_holds_the_one_the_terminal_shows(seed: int):
    """Random grouped runs: the gate's ci_low / ci_high are never inside the interval the summary table prints."""
    import random

    from pytest_benchaudit.report.terminal import shown_interval

    rng = random.Random(seed)
    n = rng.randint(2, 30)
    outcomes = [rng.random() < rng.random() for _ in range(n)]
    topics = [f"t{rng.randint(0, rng.randint(0, 6))}" for _ in range(n)]
    results, benchmarks = run(grouped("m", "mcq", outcomes, topics), {"seceval.mcq": grouped_card()})
    shown, _ = shown_interval(results[0])
    if shown is None:
        assert not verdict("seceval.mcq:ci_low>=0", results, benchmarks).passed
        assert not verdict("seceval.mcq:ci_high<=1", results, benchmarks).passed
        return
    # A threshold just inside the printed interval's ends: the gate reads an end at least as far out, so it fails.
    assert not verdict(f"seceval.mcq:ci_low>={shown[0] + 1e-7!r}", results, benchmarks).passed
    assert not verdict(f"seceval.mcq:ci_high<={shown[1] - 1e-7!r}", results, benchmarks).passed
    assert verdict(f"seceval.mcq:ci_low>={max(shown[0] - 0.5, 0.0)!r}", results, benchmarks).passed


def test_a_perfect_seceval_run_does_not_pass_a_gate_on_a_clustered_interval_of_zero_width(
    pytester: pytest.Pytester, real_data: Any
) -> None:
    """Issue 33's case end to end: 20 SecEval questions (real data, grouped by their topics) all answered
    right by the scripted server on 127.0.0.1; 'ci_low>=0.95' used to pass on ci95_clustered = [1, 1]
    (exit 0).  It fails now, the terminal and summary.json saying which interval it read."""
    import json

    from helpers import SUITES
    from pytest_benchaudit.testing.runs import only_run_dir
    from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer

    path = real_data / "seceval" / "questions-data.json"
    if not path.is_file():
        pytest.skip(f"real-data file missing: {path}")
    golds = {" ".join(q["question"].split()): q["answer"] for q in json.loads(path.read_text())}

    def answer(call: Call) -> Reply:
        text = " ".join(call.last_user_text.split())
        question = max((q for q in golds if q and q in text), key=len)
        return Reply(content=f"Answer: {golds[question]}")

    with ScriptedServer(answer) as server:
        result = pytester.runpytest(
            str(SUITES / "seceval"),
            "--limit",
            "20",
            "--data-dir",
            str(real_data),
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "--gate",
            "seceval.mcq:ci_low>=0.95",
        )
    summary = json.loads((only_run_dir(pytester.path / "out") / "summary.json").read_text())
    (row,) = summary["results"]
    assert row["score"] == 1.0 and row["clustered_by"] == "topics" and row["n_groups"] >= 2
    low, high = row["ci95_clustered"]
    assert 0.0 < low < 0.95 and high == 1.0 and low < row["ci95"][0]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (gate,) = summary["gates"]
    assert gate["passed"] is False and gate["interval"].startswith("ci95_clustered (")
    result.stdout.fnmatch_lines(["*FAIL  seceval.mcq:ci_low>=0.95*m: *from ci95_clustered*"])
