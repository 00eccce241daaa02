"""scoring/metrics.py: invalid credit, the summary's credit sentence and score_item, by hand (issue 33,
item 15: the mutation check).

The expected numbers are the closed forms of the contract (an invalid item scores ``invalid_value +
credit * (best - invalid_value)``; an old summary's invalid items scored ``(total * n - valid * n_valid) /
(n - n_valid)``) worked out by hand for concrete metrics; the strings are the sentences the summary prints.
Each test kills mutants of ``metrics.py`` that the older scoring tests let through.
"""

from __future__ import annotations

import pytest

from pytest_benchaudit.pipeline.types import Extraction, MetricInfo, Question
from pytest_benchaudit.scoring import metrics

WORST = "the largest possible difference of two CVSS base scores"


def q(gold: str) -> Question:
    return Question(benchmark="b", task="t", id="q-3", index=0, gold=gold)


def row(
    metric: str, n: int = 10, n_valid: int = 8, total: float | None = 0.6, valid: float | None = 0.75, **extra: object
) -> metrics.CreditRow:
    r: metrics.CreditRow = {"metric": metric, "n": n, "n_valid": n_valid, "score_total": total, "score_valid": valid}
    r.update(extra)  # type: ignore[typeddict-item]
    return r


@pytest.mark.parametrize(
    "metric,credit,expected",
    [
        ("exact_match", 0.0, 0.0),
        ("exact_match", 0.25, 0.25),
        ("exact_match", 1.0, 1.0),
        ("cvss_abs_diff", 0.0, 10.0),
        ("cvss_abs_diff", 0.25, 7.5),
        ("cvss_abs_diff", 1.0, 0.0),
        ("cvss_closeness_athena", 0.5, 0.5),
    ],
)
def test_invalid_score_moves_credit_of_the_way_to_the_best_value(metric: str, credit: float, expected: float) -> None:
    assert metrics.invalid_score(metrics.METRIC_INFO[metric], credit) == pytest.approx(expected)
    assert metrics.invalid_score(metrics.METRIC_INFO[metric]) == metrics.METRIC_INFO[metric].invalid_value


def test_invalid_credit_note_says_what_an_invalid_answer_scores() -> None:
    assert metrics.invalid_credit_note("exact_match") == "0 (no credit)"
    assert metrics.invalid_credit_note("cvss_abs_diff") == f"10 (no credit: the worst case, {WORST})"
    assert metrics.invalid_credit_note("cvss_abs_diff", 0.25) == "7.5 (credit 0.25)"
    assert metrics.invalid_credit_note("exact_match", 0.5) == "0.5 (credit 0.5)"
    assert metrics.invalid_credit_note("no_such_metric", 0.5) == "credit 0.5"


def test_invalid_credit_line_groups_metrics_by_what_they_score() -> None:
    rows = [
        row("exact_match", total=0.6, valid=0.75),
        row("cvss_abs_diff", total=2.8, valid=1.0),
        row("exact_match", total=0.6, valid=0.75),
        row("letter_set_exact", n=4, n_valid=4, total=0.5, valid=0.5),
    ]
    line = metrics.invalid_credit_line(rows)
    assert line == (
        "invalid answers, where counted (score/all; scoring.invalid_credit): "
        f"0 (no credit) on exact_match, letter_set_exact; 10 (no credit: the worst case, {WORST}) "
        "on cvss_abs_diff"
    )
    assert metrics.invalid_credit_line([]) == ""


def test_an_old_summary_row_is_read_back_from_its_two_means() -> None:
    # 10 items, 8 valid at mean 0.75 (6 points), all 10 at 0.7 (7 points): the 2 invalid ones scored 0.5 each
    line = metrics.invalid_credit_line([row("exact_match", total=0.7, valid=0.75)])
    assert line.endswith("0.5 (as stored: a run scored before scoring.invalid_credit) on exact_match")
    # 0.6 over all = 6 points, as the valid ones: the invalid items scored 0, what no credit gives
    assert "0 (no credit) on exact_match" in metrics.invalid_credit_line([row("exact_match", total=0.6, valid=0.75)])
    # a stored invalid_score wins over the read-back; a credit is read from the row
    stored = row("cvss_abs_diff", total=9.9, valid=1.0, invalid_credit=0.25, invalid_score=7.5)
    assert metrics.invalid_credit_line([stored]).endswith("7.5 (credit 0.25) on cvss_abs_diff")
    # every item valid, or no total: nothing to read back
    assert metrics._read_back(row("exact_match", n=5, n_valid=5)) is None
    assert metrics._read_back(row("exact_match", total=None)) is None
    assert metrics._read_back(row("exact_match", n=4, n_valid=0, total=0.25, valid=None)) == pytest.approx(0.25)
    assert metrics._read_back(row("cvss_abs_diff", n=3, n_valid=1, total=7.0, valid=1.0)) == pytest.approx(10.0)


def test_score_item_turns_an_unreadable_prediction_invalid_and_keeps_the_answer_text() -> None:
    gold = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"
    bad = Extraction(prediction="CVSS:3.1/AV:X", answer_text="raw answer", detail="line 2")
    ex, s = metrics.score_item("cvss_closeness_athena", bad, q(gold), invalid_credit=0.25)
    assert not ex.valid and ex.invalid_reason == "unparseable" and ex.answer_text == "raw answer"
    assert ex.detail.startswith("line 2; the metric cannot read it: ") and "does not parse" in ex.detail
    assert s.value == pytest.approx(0.25) and not s.correct
    ex, _ = metrics.score_item("cvss_closeness_athena", Extraction(prediction="CVSS:3.1/AV:X"), q(gold))
    assert ex.detail and not ex.detail.startswith(";") and "does not parse" in ex.detail
    good = Extraction(prediction=gold, answer_text="raw")
    ex, s = metrics.score_item("cvss_closeness_athena", good, q(gold))
    assert ex is good and s.value == 1.0 and s.correct
    assert metrics.score("cvss_abs_diff", good, q(gold)).value == 0.0


def test_invalid_items_get_their_extras_credited_too() -> None:
    info = MetricInfo(
        lower_is_better=False, kind="binary", description="toy", invalid_extras=(("plausible", 0.0), ("half", 0.5))
    )
    s = metrics._invalid(info, 0.5)
    assert s.value == 0.5 and not s.correct and s.extras == pytest.approx({"plausible": 0.5, "half": 0.75})
    ex = Extraction(invalid_reason="empty")
    out, s = metrics.score_item("actor_graph", ex, q("apt28"), {"aliases": {}, "related": {}}, invalid_credit=0.0)
    assert out is ex and s.value == 0.0 and s.extras == {"plausible": 0.0, "combined": 0.0}


def test_unknown_metric_and_missing_resource_are_key_errors() -> None:
    ex = Extraction(prediction="A")
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        metrics.score_item("nope", ex, q("A"))
    with pytest.raises(KeyError, match="needs the task resource"):
        metrics.score_item("actor_graph", ex, q("apt28"), {"aliases": {}})
    assert metrics.score("exact_match", Extraction(prediction=" b "), q("B")).correct
    assert not metrics.score("letter_set_exact", Extraction(prediction="AB"), q("ab ")).correct
    assert metrics.score("letter_set_exact", Extraction(prediction="ab"), q("AB")).correct


# An alias graph in the shape of the task resource (group -> aliases): apt28 is also called fancy bear.
GRAPH = {"aliases": {"apt28": ["fancy bear"]}, "related": {"apt28": ["apt29"]}}


def test_score_passes_the_resources_and_the_credit_on() -> None:
    # resources reach the metric: the alias counts as correct
    assert metrics.score("actor_graph", Extraction(prediction="Fancy Bear"), q("APT28"), GRAPH).correct
    related = metrics.score("actor_graph", Extraction(prediction="apt29"), q("apt28"), GRAPH)
    assert related.value == 0.0 and related.extras == {"plausible": 1.0, "combined": 0.5}
    # invalid_credit reaches the invalid score: 0.25 of the way from 10 to 0 on a CVSS difference
    invalid = Extraction(invalid_reason="unparseable")
    assert metrics.score("cvss_abs_diff", invalid, q("x"), None, 0.25).value == pytest.approx(7.5)
    assert metrics.score("cvss_abs_diff", invalid, q("x")).value == 10.0  # no credit by default
    ex, s = metrics.score_item("exact_match", invalid, q("A"))
    assert ex is invalid and s.value == 0.0 and not s.correct
    ex, s = metrics.score_item("actor_graph", Extraction(prediction="fancy bear"), q("apt28"), GRAPH)
    assert s.value == 1.0 and s.extras == {"plausible": 1.0, "combined": 1.0}


def test_an_invalid_extraction_is_never_scored_even_with_a_prediction() -> None:
    # A truncated answer may still carry what a rule read; invalid is invalid: it scores the invalid value.
    cut = Extraction(prediction="A", invalid_reason="truncated")
    ex, s = metrics.score_item("exact_match", cut, q("A"))
    assert ex is cut and s.value == 0.0 and not s.correct
    assert metrics.score("exact_match", cut, q("A"), invalid_credit=0.5).value == 0.5


def test_an_error_metric_without_a_worst_case_text_says_only_the_worst_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's error metric need not name its worst case (MetricInfo.worst_case defaults to "")."""
    info = MetricInfo(lower_is_better=True, kind="continuous", description="toy MAD", invalid_value=5.0)
    monkeypatch.setitem(metrics.METRIC_INFO, "toy_mad", info)
    assert metrics.invalid_credit_note("toy_mad") == "5 (no credit: the worst case)"
    assert metrics.invalid_credit_note("toy_mad", 0.5) == "2.5 (credit 0.5)"


def test_a_stored_invalid_score_within_float_noise_is_the_credit_s_value() -> None:
    # |stored - invalid_score| <= 1e-9 is the same value; beyond it the stored value is said
    same = row("exact_match", invalid_score=1e-9)
    assert metrics.invalid_credit_line([same]).endswith("0 (no credit) on exact_match")
    moved = row("exact_match", invalid_score=3e-9)
    assert "3e-09 (as stored" in metrics.invalid_credit_line([moved])


def test_a_row_without_its_counts_reads_back_nothing() -> None:
    # n missing (null): nothing to read back from, rather than a count of one made up
    assert metrics._read_back(row("exact_match", n=None, n_valid=0, total=0.5, valid=None)) is None  # type: ignore[arg-type]
    assert metrics._read_back(row("exact_match", n=2, n_valid=None, total=0.5, valid=None)) == 0.5  # type: ignore[arg-type]
