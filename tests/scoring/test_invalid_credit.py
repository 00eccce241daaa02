"""Issue 23 points 1-2: what an invalid answer scores (``scoring.invalid_credit``), and a CVSS vector
a metric cannot read is invalid, never a valid worst case.

Oracles: the released AthenaBench per-item scores (``VSP-scored.jsonl``: ``score``/``success``), the
CTI-Bench responses file read with the ``cvss`` library directly, and, for random vectors, the
``cvss`` library's own verdict on whether a vector parses.
"""

from __future__ import annotations

import csv
import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from cvss import CVSS3
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SUITES
from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import PipelineError, build_pipeline, parse_override
from pytest_benchaudit.pipeline.types import Extraction, Generation, Question
from pytest_benchaudit.report.terminal import render_summary
from pytest_benchaudit.scoring.evaluate import evaluate
from pytest_benchaudit.scoring.metrics import METRIC_INFO, invalid_score, score_item
from pytest_benchaudit.scoring.tasks.cvss import cvss_abs_diff_cti
from pytest_benchaudit.testing.runs import read_run

QWEN4B = "Qwen/Qwen3-4B-Instruct-2507"


def _import(kind: str, source: Path, report_dir: Path, data_dir: Path) -> dict[str, dict[str, Any]]:
    with redirect_stdout(io.StringIO()):
        assert (
            main(
                [
                    "import",
                    kind,
                    str(source),
                    "--report-dir",
                    str(report_dir),
                    "--suites-dir",
                    str(SUITES),
                    "--data-dir",
                    str(data_dir),
                ]
            )
            == 0
        )
    runs = {}
    for run_dir in sorted(p for p in report_dir.iterdir() if p.is_dir()):
        run = read_run(run_dir)
        run["path"] = run_dir
        runs[run["run"]["source"]["model"]] = run
    return runs


@pytest.fixture(scope="module")
def athena(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    return _import("athenabench-runs", source, tmp_path_factory.mktemp("athena"), real_data)


@pytest.fixture(scope="module")
def cti(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    source = real_data / "cti-bench" / "responses"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    return _import("cti-bench-responses", source, tmp_path_factory.mktemp("cti"), real_data)


def _row(run: dict[str, Any], task: str) -> dict[str, Any]:
    rows = [r for r in run["summary"]["results"] if r["task"] == task and not r["variant"]]
    assert len(rows) == 1
    return rows[0]


# ------------------------------------------------------------------ point 1: no share below zero


def test_athena_vsp_over_all_items_gives_an_invalid_vector_no_credit(athena, real_data):
    """Qwen3-4B VSP: 90 of 200 vectors unreadable.  Over all items each scores 0 (no credit), so
    score/all = (sum of 1 - |d|/7.7 over the released readable rows) / 200 = 43.0%, not 29.6%
    (1 - 10/7.7 = -0.30 each); over the valid rows it stays the released 78.2%."""
    released = [
        json.loads(line)
        for line in (real_data / "athenabench" / "runs-mini" / QWEN4B / "VSP-scored.jsonl").read_text().splitlines()
    ]
    # The released per-item "score" is |base(pred) - base(gold)|; its VSP "accuracy" is 1 - MAD/7.7.
    readable = [1 - r["score"] / 7.7 for r in released if r["success"]]
    assert len(released) == 200 and len(readable) == 110
    row = _row(athena[QWEN4B], "vsp")
    assert row["n"] == 200 and row["n_valid"] == 110 and row["invalid_reasons"] == {"unparseable": 90}
    assert row["score_total"] == pytest.approx(sum(readable) / 200)
    assert round(100 * row["score_total"], 1) == 43.0
    assert row["score_valid"] == pytest.approx(sum(readable) / 110)
    assert round(100 * row["score_valid"], 1) == 78.2
    assert row["invalid_credit"] == 0.0 and row["invalid_score"] == 0.0
    invalid = [r for r in athena[QWEN4B]["records"] if r["task"] == "vsp" and not r["valid"]]
    assert len(invalid) == 90 and {r["score"] for r in invalid} == {0.0}
    # The card states the credit.
    assert athena[QWEN4B]["run"]["pipeline_cards"]["athenabench.vsp"]["fields"]["scoring.invalid_credit"] == 0.0


def test_every_share_of_the_published_runs_lies_in_0_1(athena, cti):
    """Oracle-style: over all items and over valid ones, every share (higher is better) of every task
    of the 17 published runs is within [0, 1]; every error metric within [0, its worst case]."""
    assert len(athena) == 12 and len(cti) == 5
    checked = 0
    for run in [*athena.values(), *cti.values()]:
        for row in run["summary"]["results"]:
            info = METRIC_INFO[row["metric"]]
            high = info.invalid_value if info.lower_is_better else 1.0
            for key in ("score_total", "score_valid", "score"):
                if row[key] is not None:
                    assert 0.0 <= row[key] <= high, (run["path"].name, row["task"], key, row[key])
                    checked += 1
    assert checked >= 17 * 5 * 2


def test_every_item_of_the_published_runs_lies_in_its_metrics_range(athena, cti):
    """Per item: a valid score within the range the export states for its metric, an invalid one at
    the no-credit value (0 on a share, never 1 - 10/7.7)."""
    from pytest_benchaudit.report.export.fields import _metric_bounds

    n = 0
    for run in [*athena.values(), *cti.values()]:
        for rec in run["records"]:
            low, high = _metric_bounds(rec["metric"])
            assert low is not None and high is not None and low - 1e-9 <= rec["score"] <= high + 1e-9, rec["item_id"]
            if not rec["valid"]:
                assert rec["score"] == METRIC_INFO[rec["metric"]].invalid_value, rec["item_id"]
            n += 1
    assert n == 12 * 950 + 5 * 5550


def test_summary_names_what_an_invalid_answer_scores(athena, cti):
    athena_text = render_summary(athena[QWEN4B]["summary"]["results"], [], {}, [])
    assert "invalid answers, where counted (score/all; scoring.invalid_credit): 0 (no credit) on" in athena_text
    assert "cvss_closeness_athena" in athena_text
    cti_text = render_summary(cti["ChatGPT-4"]["summary"]["results"], [], {}, [])
    flat = " ".join(cti_text.split())
    assert (
        "10 (no credit: the worst case, the largest possible difference of two CVSS base scores) on "
        "cvss_abs_diff_cti" in flat
    )
    assert max(map(len, cti_text.splitlines())) <= 120


def test_an_old_summary_shows_the_value_its_invalid_items_scored():
    """A summary row written before the field (no invalid_score): the value is read back from its two means."""
    old = {
        "metric": "cvss_closeness_athena",
        "n": 200,
        "n_valid": 110,
        "score_valid": 0.782,
        "score_total": (0.782 * 110 + 90 * (1 - 10 / 7.7)) / 200,
    }
    from pytest_benchaudit.scoring.metrics import invalid_credit_line

    assert "-0.2987 (as stored" in invalid_credit_line([old])


def _vsp_question(gold: str = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H") -> Question:
    return Question(benchmark="athenabench", task="vsp", id="q1", index=0, prompt="p", gold=gold)


@pytest.mark.parametrize("metric", sorted(METRIC_INFO))
@given(credit=st.floats(min_value=0.0, max_value=1.0))
@settings(max_examples=25, deadline=None)
def test_invalid_credit_scores_between_the_worst_case_and_the_best(metric, credit):
    info = METRIC_INFO[metric]
    value = invalid_score(info, credit)
    low, high = sorted((info.invalid_value, info.best_value))
    assert low - 1e-12 <= value <= high + 1e-12
    if not info.lower_is_better:
        assert 0.0 <= value <= 1.0  # a share never goes below 0
    assert invalid_score(info, 0.0) == info.invalid_value and invalid_score(info, 1.0) == info.best_value


def test_invalid_credit_moves_score_total_only(tmp_path):
    """Metamorphic: raising scoring.invalid_credit from 0 to c moves score/all by c x invalid share
    (a share metric), leaves score/valid, n_valid and the invalid reasons as they were."""
    base = build_pipeline(
        "standardized",
        "b",
        "mcq",
        {
            "extraction": {"rule": "final_answer_letter", "reasoning": "strip"},
            "scoring": {"metric": "exact_match", "denominator": "total"},
        },
    )
    texts = ["Answer: A", "Answer: B", "no idea", "Answer: C", "", "Answer: A or B"]
    golds = ["A", "A", "B", "C", "D", "A"]

    def rows(credit: float) -> dict[str, Any]:
        pipe = apply_overrides(base, [("scoring.invalid_credit", credit)])
        card = {"b.mcq": pipe.card()}
        recs = [
            evaluate(
                Question(
                    benchmark="b", task="mcq", id=f"q{i}", index=i, prompt="p", gold=g, choices={k: k for k in "ABCD"}
                ),
                pipe,
                {},
                Generation(text=t),
                model="m",
            ).model_dump()
            for i, (t, g) in enumerate(zip(texts, golds))
        ]
        return summarize(recs, card)[0]

    none, some = rows(0.0), rows(0.25)
    share_invalid = 1 - none["n_valid"] / none["n"]
    assert share_invalid > 0
    assert some["score_total"] == pytest.approx(none["score_total"] + 0.25 * share_invalid)
    assert some["score_valid"] == none["score_valid"] and some["invalid_reasons"] == none["invalid_reasons"]
    assert (none["invalid_credit"], none["invalid_score"]) == (0.0, 0.0)
    assert (some["invalid_credit"], some["invalid_score"]) == (0.25, 0.25)


@pytest.mark.parametrize("value", ["-0.1", "1.5", "true", "\"worst\""])
def test_an_invalid_credit_outside_0_1_is_a_usage_error_naming_the_field(value):
    pipe = build_pipeline("standardized", "b", "t", {})
    with pytest.raises(PipelineError, match=r"scoring\.invalid_credit"):
        apply_overrides(pipe, [parse_override(f"scoring.invalid_credit={value}")])


def test_a_card_without_the_field_reads_as_no_credit():
    """Old run directories: a card or pipeline without scoring.invalid_credit takes the default."""
    pipe = build_pipeline("released", "b", "t", {"scoring": {"metric": "exact_match", "denominator": "total"}})
    assert pipe.scoring.invalid_credit == 0.0
    rec = {
        "benchmark": "b",
        "task": "t",
        "model": "m",
        "variant": "",
        "pipeline": "released",
        "pipeline_hash": "h",
        "metric": "exact_match",
        "valid": False,
        "score": 0.0,
        "correct": False,
        "invalid_reason": "empty",
        "invalid_stage": "inference",
    }
    old_card = {"fields": {"scoring.metric": "exact_match", "scoring.denominator": "total"}}
    row = summarize([rec], {"b.t": old_card})[0]
    assert row["invalid_credit"] == 0.0 and row["invalid_score"] == 0.0
    # A summary.json row written before the fields existed still validates (both keys are NotRequired;
    # its readers take the defaults: credit 0, the score read back from the two means).
    from pytest_benchaudit.aggregate.summary_documents import TASK_RESULT

    old_row = {k: v for k, v in row.items() if k not in ("invalid_credit", "invalid_score")}
    parsed = TASK_RESULT.validate_python(old_row)
    assert "invalid_credit" not in parsed and "invalid_score" not in parsed


# ------------------------------------------------------------------ point 2: the CVSS prefix


def test_cti_metric_keeps_a_predictions_own_prefix():
    """Regression: cvss_final_vector returns 'CVSS:3.1/…'; the CTI metric used to prepend 'CVSS:3.0/',
    the vector no longer parsed and every item scored a valid 10.0."""
    gold = "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:H"
    question = _vsp_question(gold)
    expected = abs(CVSS3("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H").scores()[0] - CVSS3(gold).scores()[0])
    assert cvss_abs_diff_cti("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", question, {}).value == pytest.approx(
        expected
    )
    # The released, prefix-less predictions are scored as before: as v3.0 vectors.
    released = cvss_abs_diff_cti("AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", question, {})
    assert released.value == pytest.approx(
        abs(CVSS3("CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H").scores()[0] - CVSS3(gold).scores()[0])
    )


def test_cti_vsp_cvss_final_vector_variant_is_no_constant_worst_case(cti, real_data):
    """`benchaudit sweep RUN --vary extraction.rule=cvss_final_vector` on the CTI-Bench responses: each
    model's MAD is the one the cvss library gives for the responses file read as 'CVSS:3.1/' + vector
    (never the constant 10.0 with 0% invalid that the doubled prefix produced)."""
    with (real_data / "cti-bench" / "responses" / "cti-vsp-responses.tsv").open(newline="") as fh:
        table = list(csv.DictReader(fh, delimiter="\t"))
    seen = set()
    for model, run in cti.items():
        out = io.StringIO()
        with redirect_stdout(out):
            assert (
                main(
                    [
                        "sweep",
                        str(run["path"]),
                        "--vary",
                        "extraction.rule=cvss_final_vector",
                        "--json",
                        "--suites-dir",
                        str(SUITES),
                        "--data-dir",
                        str(real_data),
                    ]
                )
                == 0
            )
        row = next(r for r in json.loads(out.getvalue()) if r["task"] == "vsp")
        diffs = [
            abs(CVSS3("CVSS:3.1/" + r[model].strip().upper()).scores()[0] - CVSS3(r["GT"].strip()).scores()[0])
            for r in table
        ]
        assert row["invalid_rate"] == 0.0 and row["n"] == len(table) == 1000
        assert row["score"] == pytest.approx(sum(diffs) / len(diffs))
        assert row["score"] < 3.0
        seen.add(round(row["score"], 6))
    assert len(seen) == 5  # one MAD per model, not one constant


_LETTERS = {"AV": "NALP", "AC": "LH", "PR": "NLH", "UI": "NR", "S": "UC", "C": "NLH", "I": "NLH", "A": "NLH"}
_vector = st.builds(
    lambda prefix, values, tail: prefix + "/".join(f"{k}:{v}" for k, v in values) + tail,
    st.sampled_from(["", "CVSS:3.0/", "CVSS:3.1/", "cvss:3.1/", "CVSS:3.1/CVSS:3.0/", "CVSS:2.0/", "CVSS:3.1"]),
    st.tuples(
        *[st.tuples(st.just(k), st.sampled_from(list(v) + ["X", "Z", v[0].lower(), ""])) for k, v in _LETTERS.items()]
    ),
    st.sampled_from(["", "**", "`", "/E:H", "/AV:N", " "]),
)


def _parses(vector: str) -> float | None:
    try:
        return float(CVSS3(vector).scores()[0])
    except Exception:
        return None


@given(prediction=st.one_of(_vector, st.text(max_size=40)))
@settings(max_examples=300, deadline=None)
def test_an_unparseable_prediction_is_never_valid(prediction):
    """For random CVSS-like strings, each CVSS metric: valid only when the cvss library parses the
    vector as the metric reads it (then the value is the library's |difference|); otherwise the item
    is invalid (unparseable) and scores the no-credit value."""
    gold = "CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:L/I:L/A:N"
    question = _vsp_question(gold)
    gold_base = CVSS3(gold).scores()[0]
    readings = {metric: _reading(metric, prediction) for metric in ("cvss_closeness_athena", "cvss_abs_diff_cti")}
    for metric, reading in readings.items():
        extraction, score = score_item(metric, Extraction(prediction=prediction), question, {})
        base = _parses(reading)
        assert extraction.valid == (base is not None), (metric, prediction)
        if base is not None:
            diff = abs(base - gold_base)
            assert score.value == pytest.approx(1 - diff / 7.7 if metric == "cvss_closeness_athena" else diff)
        else:
            assert extraction.invalid_reason == "unparseable"
            assert score.value == METRIC_INFO[metric].invalid_value and not score.correct
    extraction, score = score_item("cvss_abs_diff", Extraction(prediction=prediction), question, {})
    if not extraction.valid:
        assert extraction.invalid_reason == "unparseable" and score.value == 10.0


@given(vector=_vector)
@settings(max_examples=200, deadline=None)
def test_released_and_standardized_vsp_records_are_valid_only_when_the_vector_parses(vector):
    """Through extraction and scoring (evaluate): whatever rule and metric a layer pairs, a record is
    valid only with a vector the cvss library parses, and a valid record's score is finite and in range."""
    question = _vsp_question()
    for rule, metric in (
        ("athena_cvss31", "cvss_closeness_athena"),
        ("cvss_last_vector", "cvss_abs_diff_cti"),
        ("cvss_final_vector", "cvss_abs_diff_cti"),
        ("cvss_final_vector", "cvss_abs_diff"),
        ("cvss_last_vector", "cvss_abs_diff"),
        ("cvss_final_vector", "cvss_closeness_athena"),
    ):
        pipe = build_pipeline(
            "x",
            "athenabench",
            "vsp",
            {"extraction": {"rule": rule, "reasoning": "strip"}, "scoring": {"metric": metric, "denominator": "total"}},
        )
        rec = evaluate(question, pipe, {}, Generation(text=f"Summary.\nAnswer: {vector}"), model="m")
        if rec.valid:
            assert rec.prediction is not None
            base = _parses(_reading(metric, rec.prediction))
            assert base is not None, (rule, metric, rec.prediction)
            diff = abs(base - CVSS3(question.gold).scores()[0])
            assert rec.score == pytest.approx(1 - diff / 7.7 if metric == "cvss_closeness_athena" else diff)
        else:
            assert rec.invalid_reason == "unparseable" and rec.invalid_stage == "extraction"
            assert rec.score == METRIC_INFO[metric].invalid_value


def _reading(metric: str, prediction: str) -> str:
    """The vector string each metric's definition (its card description) gives the cvss library."""
    pred = prediction.strip()
    own_prefix = re.match(r"CVSS:\d+(?:\.\d+)?/", pred.upper())
    if metric == "cvss_closeness_athena":
        return pred
    if metric == "cvss_abs_diff_cti":
        return pred.upper() if own_prefix else "CVSS:3.0/" + pred.upper()
    return "CVSS:3.1/" + re.sub(r"^CVSS:3\.[01]/", "", pred.upper())


def test_a_variants_stage_split_uses_the_stated_credit_when_the_base_has_no_invalid_item():
    """Base: every answer readable, scoring.invalid_credit = 0.5; variant: a stricter rule leaves two
    unreadable.  The chain split (T = i x v + (1 - i x) w, docs: aggregate._contributions) must take
    w = 0.5, the credit the card states, though the base has no invalid item to read it back from:
    the extraction part is (x1 - x0)(v0 - w) = (-0.4)(0.4 - 0.5) = +0.04 (with w = 0 it was -0.16)."""
    from pytest_benchaudit.aggregate.results import variant_deltas

    base_pipe = build_pipeline(
        "standardized",
        "b",
        "mcq",
        {
            "extraction": {"rule": "all_capital_letters", "reasoning": "keep"},
            "scoring": {"metric": "exact_match", "denominator": "total", "invalid_credit": 0.5},
        },
    )
    strict = apply_overrides(base_pipe, [("extraction.rule", "final_answer_letter")])
    texts = ["Answer: A", "Answer: B", "I pick C here", "D, I think", "Answer: A"]
    recs = []
    for variant, pipe in (("", base_pipe), ("rule=final_answer_letter", strict)):
        for i, text in enumerate(texts):
            question = Question(
                benchmark="b", task="mcq", id=f"q{i}", index=i, prompt="p", gold="A", choices={k: k for k in "ABCD"}
            )
            recs.append(evaluate(question, pipe, {}, Generation(text=text), model="m", variant=variant).model_dump())
    cards = {"b.mcq": base_pipe.card(), "b.mcq|rule=final_answer_letter": strict.card()}
    results = summarize(recs, cards)
    assert (results[0]["n_valid"], results[0]["score"]) == (5, pytest.approx(0.4))
    assert (results[1]["n_valid"], results[1]["score"]) == (3, pytest.approx(0.6))  # (2 + 2 x 0.5) / 5
    (row,) = variant_deltas(results, cards)
    assert row["delta"] == pytest.approx(0.2)
    assert row["contributions"]["extraction"] == pytest.approx(0.04)
    assert sum(row["contributions"].values()) == pytest.approx(row["delta"])
