"""Oracle and metamorphic tests: the numbers the audit prints, recomputed from their definitions.

The oracle here is written from the definitions on the pipeline card and in docs/, not from the
package's code: per-item credit (a valid answer's metric value; an invalid one's
``scoring.invalid_credit``), the score over all items and over valid ones, CVSS base scores through
the ``cvss`` library, Kendall's tau-b through scipy.  Each test then checks the package against it
on the 17 published runs (AthenaBench 12 models, CTI-Bench 5) and on synthetic records, and the
metamorphic properties the issue names: re-scoring a run toward its own layer moves nothing, a
variant that sets a field to the value it already has moves nothing, reordering the records or the
runs changes no statistic, a share stays within [0, 1], an unparseable prediction is never valid.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cvss import CVSS3
from scipy import stats

from pytest_benchaudit.testing.data import real_data_dir

SUITES = Path(__file__).resolve().parents[2] / "suites"

# The metric values a correct/incorrect share can take: anything reported under these metrics is a
# share of the items and must stay within [0, 1].
ERROR_METRICS = {"cvss_abs_diff_cti", "cvss_abs_diff", "mae", "abs_error"}


# --------------------------------------------------------------------------- the oracle


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _cards(run_dir: Path) -> dict[str, dict[str, Any]]:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["pipeline_cards"]


def _card_of(cards: dict[str, dict[str, Any]], rec: dict[str, Any]) -> dict[str, Any]:
    key = f"{rec['benchmark']}.{rec['task']}"
    for candidate in (f"{key}|{rec.get('variant') or ''}", f"{key}|{rec.get('pipeline')}", key):
        if candidate in cards:
            return cards[candidate]
    raise AssertionError(f"no card for {key} in {sorted(cards)}")


# The worst case of an error metric, by definition: the largest possible |difference| of two CVSS base
# scores (0.0 .. 10.0).  An error metric the published runs do not use has no entry: the oracle then fails
# loudly rather than guess.
WORST_CASE = {"cvss_abs_diff_cti": 10.0, "cvss_abs_diff": 10.0}


def invalid_credit(card: dict[str, Any], metric: str, lower_is_better: bool) -> float:
    """What an invalid answer scores under the 'total' denominator, from the card's ``scoring.invalid_credit``.

    The credit is a share of full credit (docs/scoring.md): on a share (best 1, none 0) it is the value
    itself; on an error metric (best 0) no credit is the worst case, full credit 0.  The card must state
    it (issue 23: "invalid answers get the credit the card states"): a card that does not is an oracle
    failure, not a default to guess.
    """
    fields = card["fields"]
    assert "scoring.invalid_credit" in fields, f"{card['benchmark']}.{card['task']}: the card states no invalid credit"
    credit = float(fields["scoring.invalid_credit"])
    assert 0.0 <= credit <= 1.0
    if not lower_is_better:
        return credit
    return (1.0 - credit) * WORST_CASE[metric]


def oracle_rows(records: list[dict[str, Any]], cards: dict[str, dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Per (benchmark, task, model, variant, pipeline): n, n_valid, n_correct, score_total, score_valid."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        groups[(rec["benchmark"], rec["task"], rec["model"], rec.get("variant") or "", rec["pipeline"])].append(rec)
    rows = {}
    for key, recs in groups.items():
        card = _card_of(cards, recs[0])
        metric = card["fields"]["scoring.metric"]
        credit = invalid_credit(card, metric, metric in ERROR_METRICS)
        valid = [r for r in recs if r["valid"]]
        credits = [r["score"] if r["valid"] else credit for r in recs]
        rows[key] = {
            "n": len(recs),
            "n_valid": len(valid),
            "n_correct": sum(1 for r in recs if r["correct"]),
            "score_valid": (sum(r["score"] for r in valid) / len(valid)) if valid else None,
            "score_total": sum(credits) / len(recs),
            "denominator": card["fields"]["scoring.denominator"],
        }
    return rows


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# --------------------------------------------------------------------------- the published runs


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from pytest_benchaudit.importers import import_athenabench_runs, import_cti_bench_responses

    data = real_data_dir()
    root = tmp_path_factory.mktemp("oracle")
    import_athenabench_runs(data / "athenabench" / "runs-mini", root / "athena", SUITES, str(data))
    import_cti_bench_responses(data / "cti-bench" / "responses", root / "cti", SUITES, str(data))
    runs = sorted(p for d in ("athena", "cti") for p in (root / d).iterdir())
    assert len(runs) == 17
    return runs


def test_summary_equals_the_oracle_on_the_published_runs(published: list[Path]) -> None:
    checked = 0
    for run in published:
        rows = oracle_rows(_records(run), _cards(run))
        summary = json.loads((run / "summary.json").read_text())["results"]
        assert len(summary) == len(rows), run.name
        for got in summary:
            want = rows[(got["benchmark"], got["task"], got["model"], got.get("variant") or "", got["pipeline"])]
            where = f"{run.name} {got['task']}"
            assert (got["n"], got["n_valid"], got["n_correct"]) == (want["n"], want["n_valid"], want["n_correct"]), (
                where
            )
            assert _close(got["score_valid"], want["score_valid"]), where
            assert _close(got["score_total"], want["score_total"]), where
            headline = want["score_valid"] if want["denominator"] == "valid" else want["score_total"]
            assert _close(got["score"], headline), where
            checked += 1
    assert checked == 12 * 6 + 5 * 5


def test_no_share_below_zero_or_above_one(published: list[Path]) -> None:
    for run in published:
        for row in json.loads((run / "summary.json").read_text())["results"]:
            if row["lower_is_better"] or row["metric"] in ERROR_METRICS:
                continue
            for name in ("score", "score_total", "score_valid"):
                value = row[name]
                assert value is None or 0.0 <= value <= 1.0, f"{run.name} {row['task']} {name} = {value}"


def _parses(vector: str) -> bool:
    try:
        CVSS3(vector)
    except Exception:  # the library raises its own error classes
        return False
    return True


def test_vsp_scores_equal_the_cvss_library_and_no_unparseable_vector_is_valid(published: list[Path]) -> None:
    """CTI-Bench VSP: |base('CVSS:3.0/' + pred) - base(gold)|; AthenaBench VSP: 1 - |d| / 7.7 (vectors as they stand).

    The definitions are the released scorers' (docs and ../shared/reference/released-pipelines.md).
    """
    seen = 0
    for run in published:
        for rec in _records(run):
            if rec["task"] != "vsp":
                continue
            if not rec["valid"]:
                assert rec["prediction"] is None or not _parses(rec["prediction"]) or rec["invalid_reason"], rec[
                    "item_id"
                ]
                continue
            gold = CVSS3(rec["gold"].strip().upper()).scores()[0]
            if rec["benchmark"] == "cti_bench":
                vector = "CVSS:3.0/" + rec["prediction"].upper()
                assert _parses(vector), f"{rec['item_id']}: valid but {vector!r} does not parse"
                want = abs(CVSS3(vector).scores()[0] - gold)
            else:
                vector = rec["prediction"].strip()
                assert _parses(vector), f"{rec['item_id']}: valid but {vector!r} does not parse"
                want = 1 - abs(CVSS3(vector).scores()[0] - gold) / 7.7
            assert rec["score"] == pytest.approx(want, abs=1e-9), rec["item_id"]
            seen += 1
    assert seen > 1500


def test_tau_b_equals_scipy_and_the_order_of_the_runs_changes_nothing(published: list[Path], tmp_path: Path) -> None:
    from pytest_benchaudit.cli import main

    athena = [p for p in published if "athenabench" in p.name]
    shuffled = athena[:]
    random.Random(3).shuffle(shuffled)
    docs = []
    for i, runs in enumerate((athena, shuffled)):
        out = tmp_path / f"cmp{i}"
        assert main(["compare", *map(str, runs), "--out", str(out)]) == 0
        docs.append(json.loads((out / "compare.json").read_text()))
    a, b = docs
    for key in ("scores", "ranks", "tau_b", "mean_win_rate", "benchmark_ranks"):
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key
    scores = a["scores"]
    assert a["tau_b"]
    for row in a["tau_b"]:
        models = sorted(set(scores[row["task_a"]]) & set(scores[row["task_b"]]))
        want = stats.kendalltau(
            [scores[row["task_a"]][m] for m in models], [scores[row["task_b"]][m] for m in models], variant="b"
        )
        # both AthenaBench tasks here are higher-is-better, so orientation does not flip a sign
        assert row["tau"] == pytest.approx(want.statistic, abs=1e-12)
        assert row["p_value"] == pytest.approx(want.pvalue, abs=1e-12)
        assert row["n_models"] == len(models)


def _one_per_benchmark(published: list[Path]) -> list[Path]:
    return [
        next(p for p in published if "athenabench" in p.name and "Qwen3-4B" in p.name),
        next(p for p in published if "cti_bench" in p.name),
    ]


def test_rescoring_a_run_toward_its_own_layer_moves_nothing(published: list[Path], tmp_path: Path) -> None:
    from pytest_benchaudit.rescore.run_dirs import rescore_run

    for run in _one_per_benchmark(published):
        before = {(r["task"], r["model"]): r for r in json.loads((run / "summary.json").read_text())["results"]}
        _out, results, _new_cards = rescore_run(
            run,
            layer="released",
            report_dir=tmp_path,
            suites_dir=SUITES,
            data_dir=str(real_data_dir()),
            warn=lambda msg: None,
        )
        # A task whose stored card overrides a field the layer leaves unspecified (CTI-Bench TAA's manual
        # extraction, imported as `whole_answer`) is skipped toward the bare layer, with the field named.
        overridden = {c["task"] for c in _cards(run).values() if c.get("overrides")}
        assert {(r["task"], r["model"]) for r in results} == {k for k in before if k[0] not in overridden}
        for row in results:
            old = before[(row["task"], row["model"])]
            for name in ("n", "n_valid", "n_correct", "score", "score_total", "score_valid"):
                assert _close(row[name], old[name]), (run.name, row["task"], name)


@pytest.mark.parametrize("field", ["scoring.denominator", "extraction.rule", "scoring.metric"])
def test_a_variant_at_the_value_a_field_already_has_moves_nothing(published: list[Path], field: str) -> None:
    from pytest_benchaudit.rescore.run_dirs import sweep_run

    for run in _one_per_benchmark(published):
        cards = _cards(run)
        for key, card in cards.items():
            current = card["fields"][field]
            rows, _results, _ = sweep_run(
                run, [(field, [current])], suites_dir=SUITES, data_dir=str(real_data_dir()), warn=lambda msg: None
            )
            task = key.split(".", 1)[1].split("|", 1)[0]
            mine = [r for r in rows if r["task"] == task]
            assert mine, (run.name, key)
            for row in mine:
                assert row["delta_pp"] == pytest.approx(0.0, abs=1e-9), (run.name, key, field, row)
            break  # one task per run and field keeps this test fast; the property is per field


def test_reordering_records_changes_no_statistic(published: list[Path]) -> None:
    from pytest_benchaudit.aggregate.results import summarize

    for run in _one_per_benchmark(published):
        records, cards = _records(run), _cards(run)
        shuffled = records[:]
        random.Random(7).shuffle(shuffled)
        a = {(r["task"], r["model"]): r for r in summarize(records, cards)}
        b = {(r["task"], r["model"]): r for r in summarize(shuffled, cards)}
        assert a.keys() == b.keys()
        for key in a:
            for name in ("n", "n_valid", "n_correct", "score", "score_total", "score_valid", "ci95", "invalid_reasons"):
                left, right = a[key][name], b[key][name]
                if isinstance(left, float):
                    assert right == pytest.approx(left, rel=1e-12), (key, name)
                elif isinstance(left, list):
                    assert right == pytest.approx(left, rel=1e-9), (key, name)
                else:
                    assert left == right, (key, name)


# --------------------------------------------------------------------------- synthetic runs


def test_summary_equals_the_oracle_on_synthetic_records() -> None:
    """Random mixes of correct, wrong and invalid answers under both denominators: the summary is the oracle's."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pytest_benchaudit.aggregate.results import summarize

    outcome = st.sampled_from(["correct", "wrong", "invalid"])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(outcome, min_size=1, max_size=40), st.sampled_from(["total", "valid"]))
    def check(outcomes: list[str], denominator: str) -> None:
        card = {
            "benchmark": "b",
            "task": "t",
            "fields": {
                "scoring.denominator": denominator,
                "scoring.metric": "exact_match",
                "scoring.invalid_credit": 0.0,
            },
        }
        records = [
            {
                "benchmark": "b",
                "task": "t",
                "model": "m",
                "variant": "",
                "pipeline": "p",
                "pipeline_hash": "h",
                "question_id": str(i),
                "metric": "exact_match",
                "valid": o != "invalid",
                "correct": o == "correct",
                "score": (1.0 if o == "correct" else 0.0) if o != "invalid" else 0.0,
                "invalid_reason": "unparseable" if o == "invalid" else None,
                "invalid_stage": "extraction" if o == "invalid" else None,
            }
            for i, o in enumerate(outcomes)
        ]
        want = oracle_rows(records, {"b.t": card})[("b", "t", "m", "", "p")]
        got = summarize(records, {"b.t": card})
        assert len(got) == 1
        row = got[0]
        assert (row["n"], row["n_valid"], row["n_correct"]) == (want["n"], want["n_valid"], want["n_correct"])
        assert _close(row["score_total"], want["score_total"])
        assert _close(row["score_valid"], want["score_valid"])
        for name in ("score", "score_total", "score_valid"):
            assert row[name] is None or 0.0 <= row[name] <= 1.0

    check()
