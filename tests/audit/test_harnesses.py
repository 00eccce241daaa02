"""The cross-harness table (``benchaudit audit RUN --pipelines A,B,C``; :mod:`pytest_benchaudit.audit.cross_harness`).

Pure tests on synthetic results where the split is known by construction; then a real three-layer
``pytest --pipelines`` run of a scripted loopback server, audited, its table recomputed here from
records.jsonl by hand counts; metamorphic checks (a layer identical to the base moves nothing and
names no field; reordering the layers after the base changes no row); the HTML section.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import SUITES
from pytest_benchaudit.audit.cross_harness import (
    LayerInput,
    downstream_defined,
    harness_rows,
    render_harnesses,
    request_kind,
)
from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import mcq_suite_toml, task_toml


# ----------------------------------------------------------------------------- pure
def _result(score: float, n: int = 10, n_valid: int = 10, metric: str = "exact_match") -> dict[str, Any]:
    return {
        "metric": metric,
        "lower_is_better": False,
        "denominator": "total",
        "n": n,
        "n_valid": n_valid,
        "score": score,
        "score_total": score,
        "score_valid": score * n / n_valid if n_valid else None,
        "invalid_rate": 1 - n_valid / n,
    }


def _card(layer: str, **fields: Any) -> dict[str, Any]:
    base = {
        "prompt.template": "plain",
        "inference.max_tokens": 16,
        "extraction.rule": "final_answer_letter",
        "scoring.denominator": "total",
        "aggregation.method": "micro",
    }
    return {"pipeline": layer, "fields": {**base, **fields}, "why": {"inference.max_tokens": f"{layer} says so"}}


BASE = LayerInput("released", cards={"b.t": _card("released")}, results={"b.t": {"m": _result(0.70)}})


def _layer(name: str, own: float, rescored: float | None, **fields: Any) -> LayerInput:
    return LayerInput(
        name,
        cards={"b.t": _card(name, **fields)},
        results={"b.t": {"m": _result(own)}},
        rescored={} if rescored is None else {"b.t": {"m": _result(rescored)}},
    )


def test_the_split_adds_up_to_the_move_by_construction() -> None:
    # base 0.70; the base's outputs read as the layer reads them 0.55 (-15 pp downstream); the layer's
    # own generations 0.40 (-15 pp upstream); total -30 pp.
    peer = _layer("inspect_evals", 0.40, 0.55, **{"inference.max_tokens": 64, "extraction.rule": "inspect_choice"})
    rows = {r.layer: r for r in harness_rows(BASE, [peer])}
    row = rows["inspect_evals"]
    assert rows["released"].is_base and rows["released"].total_delta is None
    assert row.total_pp == pytest.approx(-30.0)
    assert row.downstream_pp == pytest.approx(-15.0) and row.upstream_pp == pytest.approx(-15.0)
    assert row.downstream_delta + row.upstream_delta == pytest.approx(row.total_delta)  # type: ignore[operator]
    assert [(f.field, f.base, f.layer) for f in row.downstream_fields] == [
        ("extraction.rule", "final_answer_letter", "inspect_choice")
    ]
    (up,) = row.upstream_fields
    assert (up.field, up.base, up.layer, up.why) == ("inference.max_tokens", 16, 64, "inspect_evals says so")
    text = render_harnesses([r.model_dump() for r in rows.values()])
    assert "-30.0" in text and "-15.0" in text and "downstream fields extraction.rule" in text


def test_another_kind_of_request_has_no_downstream_part() -> None:
    peer = _layer("lm_eval", 0.80, None, **{"inference.request": "loglikelihood"})
    (_base, row) = harness_rows(BASE, [peer])
    assert request_kind(peer.cards["b.t"]) == "loglikelihood" and request_kind(BASE.cards["b.t"]) == "generate"
    assert downstream_defined(BASE.cards["b.t"], peer.cards["b.t"]) is not None
    assert row.total_pp == pytest.approx(10.0)
    assert row.downstream_delta is None and row.upstream_delta is None and row.rescored_score is None
    assert row.downstream_note.startswith("not defined") and "loglikelihood" in row.downstream_note
    assert [f.field for f in row.upstream_fields] == ["inference.request"]
    assert "n/d" in render_harnesses([_base.model_dump(), row.model_dump()])


def test_a_task_without_the_layer_is_a_row_saying_so() -> None:
    peer = LayerInput("lm_eval", cards={}, results={})
    (_base, row) = harness_rows(BASE, [peer])
    assert row.score is None and row.total_delta is None and "has no 'lm_eval' layer" in row.note


def test_a_task_without_the_base_layer_has_scores_but_no_move() -> None:
    base = LayerInput("released", cards={}, results={})
    peer = _layer("inspect_evals", 0.40, None)
    rows = {r.layer: r for r in harness_rows(base, [peer])}
    assert "has no 'released' layer" in rows["released"].note
    assert rows["inspect_evals"].score == pytest.approx(0.40) and rows["inspect_evals"].total_delta is None
    assert "no 'released' result" in rows["inspect_evals"].note
    text = render_harnesses([r.model_dump() for r in rows.values()])
    assert "inspect_evals on b.t: no 'released' result" in text and "no field differs" not in text


def test_identical_layer_moves_nothing_and_order_changes_no_row() -> None:
    same = _layer("documented", 0.70, 0.70)
    peers = [
        _layer("inspect_evals", 0.40, 0.55, **{"extraction.rule": "inspect_choice"}),
        same,
        _layer("lm_eval", 0.9, None, **{"inference.request": "loglikelihood"}),
    ]
    rows = harness_rows(BASE, peers)
    doc = {r.layer: r for r in rows}["documented"]
    assert doc.total_delta == doc.downstream_delta == doc.upstream_delta == 0.0
    assert doc.downstream_fields == [] and doc.upstream_fields == []
    reordered = harness_rows(BASE, peers[::-1])
    assert sorted(r.model_dump_json() for r in rows) == sorted(r.model_dump_json() for r in reordered)


def test_different_metrics_give_no_move() -> None:
    peer = LayerInput(
        "x", cards={"b.t": _card("x", **{"scoring.metric": "f1"})}, results={"b.t": {"m": _result(0.5, metric="f1")}}
    )
    (_base, row) = harness_rows(BASE, [peer])
    assert row.total_delta is None and "different metrics" in row.note


# ----------------------------------------------------------------------------- a real run
# Two tasks; three layers on "mcq" (documented = released exactly), two on "extra" (no documented layer).
# The full layers the builder writes (testing.toy.layer_toml), as keyword arguments.
LAYER: dict[str, dict[str, Any]] = {
    "released": {"max_tokens": 16, "reasoning": "keep", "denominator": "valid"},
    "standardized": {"why": {"inference.max_tokens": "room to answer"}},
}
LAYER["documented"] = LAYER["released"]
# lm-eval's way: one echoed completion per choice, the highest continuation log-likelihood wins
LM_EVAL_LAYER = """prompt.template = "ll"
prompt.format = { mode = "completion", system_role = "none", few_shot = 0 }
inference.request = "loglikelihood"
inference.decoding = { temperature = 0.0, top_logprobs = 1 }
inference.max_tokens = 1
extraction = { rule = "lm_eval_loglikelihood", reasoning = "keep" }
scoring = { metric = "exact_match", denominator = "total" }
aggregation = { method = "micro" }
"""
TASKS = {"mcq": ("released", "standardized", "documented", "lm_eval"), "extra": ("released", "standardized")}
LAYERS = "released,standardized,documented,lm_eval"
LL_RIGHT = {"a": 7, "b": 4}  # questions whose most likely continuation is the gold letter
N_QUESTIONS = {"mcq": 10, "extra": 4}


def _suite() -> str:
    tasks = [
        task_toml(task, f"{task}.jsonl", {layer: LAYER[layer] for layer in layers if layer in LAYER})
        + "".join(f"\n[tasks.{task}.{layer}]\n{LM_EVAL_LAYER}" for layer in layers if layer not in LAYER)
        for task, layers in TASKS.items()
    ]
    return mcq_suite_toml(
        "hx",
        title="Cross-harness test benchmark",
        tasks=tasks,
        extra='\n[templates.ll]\nuser = "{question}\\n{options}\\nAnswer:"\n',
    )


def _answer(model: str, index: int, budget: int) -> str:
    """Model a, 16 tokens: 6 right, 2 wrong, 2 unreadable; 64 tokens: 3 right, 6 wrong, 1 unreadable.
    Model b the other way round (the longer budget helps it)."""
    right, wrong = {("a", 16): (6, 8), ("a", 64): (3, 9), ("b", 16): (2, 7), ("b", 64): (8, 10)}[(model, budget)]
    return "Answer: B" if index < right else "Answer: C" if index < wrong else "I cannot tell."


def _script(call: Any) -> Reply:
    if call.path.endswith("/chat/completions"):
        index = int(call.last_user_text.split("#", 1)[1].split(" ", 1)[0])
        return Reply(content=_answer(call.body["model"], index, call.body.get("max_tokens")))
    prompt = str(call.body["prompt"])  # context + " A".." D", echoed with log-probabilities
    index = int(prompt.split("#", 1)[1].split(" ", 1)[0])
    best = "B" if index < LL_RIGHT[call.body["model"]] else "C"
    return Reply(content="\n", continuation_logprob=-0.1 if prompt.endswith(" " + best) else -3.0)


@pytest.fixture(scope="module")
def hx_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A pytest --pipelines released,standardized,documented,lm_eval run of two scripted models on hx."""
    root = tmp_path_factory.mktemp("hx")
    (root / "suites" / "hx").mkdir(parents=True)
    (root / "suites" / "hx" / "suite.toml").write_text(_suite())
    (root / "data" / "hx").mkdir(parents=True)
    for task, n in N_QUESTIONS.items():
        with (root / "data" / "hx" / f"{task}.jsonl").open("w") as fh:
            for i in range(n):
                fh.write(
                    json.dumps(
                        {
                            "id": f"{task}{i}",
                            "question": f"Question #{i} of {task}?",
                            "options": ["one", "two", "three", "four"],
                            "gold": "B",
                        }
                    )
                    + "\n"
                )
    with ScriptedServer(_script) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                "suites/hx",
                "--data-dir",
                "data",
                "--max-retries",
                "0",
                "--no-cache",
                "-rs",
                "--report-dir",
                "out",
                "--pipelines",
                LAYERS,
                "--model",
                f"a@{server.url}",
                "--model",
                f"b@{server.url}",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        # documented sends what released sends: asked once, so 2 models x (10 + 4) x 2 budgets; lm_eval
        # 4 completions per question of mcq
        chats = [c for c in server.calls if c.path.endswith("/chat/completions")]
        completions = [c for c in server.calls if c.path == "/v1/completions"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert len(chats) == 2 * 14 * 2 and len(completions) == 2 * 10 * 4
    return only_run_dir(root / "out"), proc.stdout + proc.stderr


def test_a_task_without_a_listed_layer_is_a_clear_skip(hx_run: tuple[Path, str]) -> None:
    run, out = hx_run
    assert "Traceback" not in out
    assert "hx.extra defines no 'documented' pipeline (available: released, standardized)" in out
    records = read_run(run)["records"]
    assert {(r["task"], r["pipeline"]) for r in records} == {
        ("mcq", "released"),
        ("mcq", "standardized"),
        ("mcq", "documented"),
        ("mcq", "lm_eval"),
        ("extra", "released"),
        ("extra", "standardized"),
    }
    assert "hx.extra defines no 'lm_eval' pipeline" in out


def _audit(run: Path, out: Path, layers: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    rc = main(
        [
            "audit",
            str(run),
            "--out",
            str(out),
            "--suites-dir",
            str(run.parent.parent / "suites"),
            "--pipelines",
            layers,
            "--resamples",
            "50",
        ]
    )
    text, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads((out / "audit.json").read_text()), text


def _hand_counts(records: list[dict[str, Any]], task: str, model: str, layer: str) -> tuple[int, int, int]:
    """(n, n_valid, n_correct) counted from records.jsonl."""
    mine = [r for r in records if r["task"] == task and r["model"] == model and r["pipeline"] == layer]
    return len(mine), sum(r["invalid_reason"] is None for r in mine), sum(bool(r["correct"]) for r in mine)


def test_the_table_recomputed_from_the_records(
    hx_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = hx_run
    doc, text = _audit(run, tmp_path / "aud", LAYERS, capsys)
    records = read_run(run)["records"]
    rows = {(r["task"], r["model"], r["layer"]): r for r in doc["harnesses"]}
    assert doc["layers"]["harnesses"] == LAYERS.split(",")
    assert len(rows) == 2 * 2 * 4  # every task x model under every listed layer, a missing layer included
    for task in N_QUESTIONS:
        for model in "ab":
            n, valid, right = _hand_counts(records, f"{task}", model, "released")
            base = rows[(f"hx.{task}", model, "released")]
            assert base["is_base"] and base["score"] == pytest.approx(right / valid)  # the valid denominator
            assert (base["n"], base["n_valid"]) == (n, valid)
            std = rows[(f"hx.{task}", model, "standardized")]
            n_s, valid_s, right_s = _hand_counts(records, task, model, "standardized")
            assert std["score_total"] == pytest.approx(right_s / n_s) == std["score"]
            assert std["score_valid"] == pytest.approx(right_s / valid_s)
            # downstream: released's outputs (its correct answers, read as standardized reads them: the same
            # letters, no reasoning to strip) over all questions (standardized's denominator)
            assert std["rescored_score"] == pytest.approx(right / n)
            assert std["downstream_pp"] == pytest.approx(100 * (right / n - right / valid))
            assert std["upstream_pp"] == pytest.approx(100 * (right_s / n_s - right / n))
            assert std["total_pp"] == pytest.approx(std["downstream_pp"] + std["upstream_pp"])
            assert [f["field"] for f in std["upstream_fields"]] == ["inference.max_tokens"]
            assert std["upstream_fields"][0]["why"] == "room to answer"
            assert {f["field"] for f in std["downstream_fields"]} == {"extraction.reasoning", "scoring.denominator"}
            assert std["requests_identical"] == 0 and std["requests_compared"] == n
    # a known number, not only a recomputed one: model a on mcq, 6/8 -> 6/10 (-15) -> 3/10 (-30)
    a = rows[("hx.mcq", "a", "standardized")]
    assert (a["downstream_pp"], a["upstream_pp"]) == (pytest.approx(-15.0), pytest.approx(-30.0))
    # the layer identical to the base: no move, no field, the same requests
    same = rows[("hx.mcq", "a", "documented")]
    assert same["total_delta"] == same["downstream_delta"] == same["upstream_delta"] == 0.0
    assert same["downstream_fields"] == [] and same["upstream_fields"] == []
    assert same["requests_identical"] == same["requests_compared"] == 10
    missing = rows[("hx.extra", "a", "documented")]
    assert missing["score"] is None and "has no 'documented' layer" in missing["note"]
    # the log-likelihood layer: only the total move, hand-counted; the split is not defined
    for model in "ab":
        n, valid, right = _hand_counts(records, "mcq", model, "released")
        n_l, _v, right_l = _hand_counts(records, "mcq", model, "lm_eval")
        ll = rows[("hx.mcq", model, "lm_eval")]
        assert right_l == LL_RIGHT[model] and ll["score"] == pytest.approx(right_l / n_l)
        assert ll["total_pp"] == pytest.approx(100 * (right_l / n_l - right / valid))
        assert ll["downstream_delta"] is ll["upstream_delta"] is ll["rescored_score"] is None
        assert ll["downstream_note"].startswith("not defined") and ll["request_kind"] == "loglikelihood"
        assert "inference.request" in {f["field"] for f in ll["upstream_fields"]}
    assert doc["layers"]["toward"] == "standardized"  # the pairwise part: the first layer that asks the same
    assert "Cross-harness table" in text and "-45.0" in text and "n/d" in text
    assert "documented on hx.extra: hx.extra has no 'documented' layer" in text
    # the HTML report: the section, with the same numbers
    page = (tmp_path / "aud" / "report.html").read_text()
    section = page.split('<section id="harnesses">', 1)[1].split("</section>", 1)[0]
    assert "inference.max_tokens" in section and "room to answer" in section
    cells = {}
    for tr in section.split("<tr>")[1:]:
        row = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        if len(row) == 12:  # the scores table (the fields table has 7 columns)
            cells[(row[0], row[1], row[2].replace(" (base)", ""))] = row
    assert set(cells) == set(rows)
    for key, r in rows.items():
        row = cells[key]
        if r["score"] is not None:
            assert row[4] == f"{100 * r['score_total']:.1f}%" and row[6] == f"{r['n_valid']}/{r['n']}"
        if not r["is_base"] and r["total_pp"] is not None:
            assert row[7] == f"{r['total_pp']:+.1f}"
            assert row[8] == ("not defined" if r["downstream_delta"] is None else f"{r['downstream_pp']:+.1f}")
            assert row[9] == ("not defined" if r["upstream_delta"] is None else f"{r['upstream_pp']:+.1f}")


def test_reordering_the_layers_after_the_base_changes_no_row(
    hx_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = hx_run
    one, _t = _audit(run, tmp_path / "one", "released,standardized,documented,lm_eval", capsys)
    two, _t = _audit(run, tmp_path / "two", "released,lm_eval,documented,standardized", capsys)

    def key(r: dict[str, Any]) -> str:
        return json.dumps(r, sort_keys=True)

    assert sorted(map(key, one["harnesses"])) == sorted(map(key, two["harnesses"]))
    # the pairwise part goes toward the first listed layer after the base in each
    # the pairwise part goes toward the first listed layer after the base that asks what the base asks
    assert (one["layers"]["toward"], two["layers"]["toward"]) == ("standardized", "documented")


def test_audit_pipelines_usage_errors(
    hx_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = hx_run
    suites = str(run.parent.parent / "suites")
    for layers, message in (
        ("released,inspect_evals", "'inspect_evals' is not a layer of"),
        ("released", "two or more distinct layers"),
        ("released,released", "two or more distinct layers"),
    ):
        assert (
            main(["audit", str(run), "--out", str(tmp_path / "x"), "--suites-dir", suites, "--pipelines", layers]) == 2
        )
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert (
        main(
            [
                "audit",
                str(run),
                "--out",
                str(tmp_path / "x"),
                "--suites-dir",
                suites,
                "--pipelines",
                "released,standardized",
                "--from",
                "standardized",
            ]
        )
        == 2
    )
    assert "the base is the first layer listed" in capsys.readouterr().err


def test_without_pipelines_the_audit_has_no_table(
    hx_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = hx_run
    assert (
        main(
            [
                "audit",
                str(run),
                "--out",
                str(tmp_path / "plain"),
                "--suites-dir",
                str(run.parent.parent / "suites"),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    doc = json.loads((tmp_path / "plain" / "audit.json").read_text())
    assert "harnesses" not in doc and "harnesses" not in doc["layers"]
    assert "Cross-harness" not in capsys.readouterr().out
    assert 'id="harnesses"' not in (tmp_path / "plain" / "report.html").read_text()


def test_the_demo_explains_the_table(
    hx_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """report/demo.py (what make demo prints last) on a three-layer run audited with --pipelines."""
    from pytest_benchaudit.report.demo import explain_layers
    from pytest_benchaudit.report.terminal import WIDTH

    run, _ = hx_run
    _audit(run, tmp_path / "aud", LAYERS, capsys)
    text = explain_layers(run, tmp_path / "aud")
    assert "same model (a), one run, four pipelines:" in text and "(hx.mcq)" in text.splitlines()[0]
    assert "  difference   : -45.0 percentage points (standardized - released)" in text
    assert "  difference   : +0.0 percentage points (documented - released)" in text
    assert "Every layer against released, the benchmark's own reading" in text
    table = text.split("Every layer against released", 1)[1]
    assert "-15.0" in table and "-30.0" in table and "downstream = the released answers read and counted" in table
    assert f"--pipelines {LAYERS}    # the cross-harness table again" in text
    assert max(len(line) for line in text.splitlines() if str(run) not in line and str(tmp_path) not in line) <= WIDTH
    # without the table (an audit without --pipelines) the explanation is the two-layer one
    assert (
        main(
            [
                "audit",
                str(run),
                "--out",
                str(tmp_path / "plain"),
                "--suites-dir",
                str(run.parent.parent / "suites"),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    assert "Every layer against" not in explain_layers(run, tmp_path / "plain")


# ----------------------------------------------------------------------------- the published runs
#: audit.json's sections before the cross-harness table existed: an audit without --pipelines writes these only.
AUDIT_KEYS = {
    "version",
    "created",
    "runs",
    "layers",
    "rescored_runs",
    "extraction_only_runs",
    "scores",
    "attribution",
    "upstream_differences",
    "upstream_same_requests",
    "ledger",
    "findings",
    "exports",
    "compare",
    "how",
}


@pytest.mark.parametrize(
    "kind, source", [("athenabench-runs", "athenabench/runs-mini"), ("cti-bench-responses", "cti-bench/responses")]
)
def test_the_published_runs_audit_as_before(
    kind: str,
    source: str,
    real_data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Imported CTI-Bench / AthenaBench runs hold one layer each: their audit never reaches the table, writes
    the sections it wrote before and nothing more (the ledger rows of their benchmarks gain no peers)."""
    import pytest_benchaudit.audit.whole as whole

    if not (real_data / source).is_dir():
        pytest.skip(f"real-data folder missing: {real_data / source}")
    assert (
        main(
            [
                "import",
                kind,
                str(real_data / source),
                "--report-dir",
                str(tmp_path / "runs"),
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(real_data),
            ]
        )
        == 0
    )

    def never(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the cross-harness table was computed for single-layer runs")

    monkeypatch.setattr(whole, "cross_harness", never)
    capsys.readouterr()
    assert (
        main(
            [
                "audit",
                str(tmp_path / "runs"),
                "--out",
                str(tmp_path / "aud"),
                "--suites-dir",
                str(SUITES),
                "--data-dir",
                str(real_data),
                "--resamples",
                "20",
            ]
        )
        == 0
    )
    doc = json.loads((tmp_path / "aud" / "audit.json").read_text())
    assert set(doc) == AUDIT_KEYS and doc["layers"] == {"from": ["released"], "toward": "standardized"}
    assert doc["ledger"] and all("peers" not in row for row in doc["ledger"])
    assert "Cross-harness" not in capsys.readouterr().out
    assert 'id="harnesses"' not in (tmp_path / "aud" / "report.html").read_text()
    # --pipelines is for a run made with pytest --pipelines: one clear error
    assert (
        main(
            [
                "audit",
                str(tmp_path / "runs"),
                "--out",
                str(tmp_path / "x"),
                "--suites-dir",
                str(SUITES),
                "--pipelines",
                "released,inspect_evals",
            ]
        )
        == 2
    )
    assert "only for a run made with pytest --pipelines" in capsys.readouterr().err


def test_upstream_rows_name_only_the_tasks_the_run_asked(pytester: pytest.Pytester) -> None:
    """A --pipelines run of cybermetric -k cm80 carries cards for cm500 and cm2000 too (collected, never
    asked): the audit's upstream rows name cm80 alone, not tasks "regenerated in this run" with no record."""
    import subprocess
    import sys

    from pytest_benchaudit.testing.mixed_server import realistic_mix
    from pytest_benchaudit.testing.scripted_server import ScriptedServer

    with ScriptedServer(realistic_mix()) as server:
        pytester.runpytest(
            str(SUITES / "cybermetric"),
            "-k",
            "cm80",
            "--limit",
            "4",
            "--pipelines",
            "released,inspect_evals",
            "--model",
            f"m@{server.url}",
            "--report-dir",
            "out",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        )
    (run,) = [p for p in (pytester.path / "out").iterdir() if (p / "run.json").is_file()]
    cards = json.loads((run / "run.json").read_text()).get("pipeline_cards") or {}
    assert any(k.startswith("cybermetric.cm2000") for k in cards)  # the premise: cards beyond what was asked
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.cli",
            "audit",
            str(run),
            "--out",
            "aud",
            "--pipelines",
            "released,inspect_evals",
            "--suites-dir",
            str(SUITES),
            "--resamples",
            "100",
        ],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((pytester.path / "aud" / "audit.json").read_text())
    assert [r["task"] for r in doc["upstream_differences"]] == ["cybermetric.cm80"]
