"""The multiverse's scores against ``benchaudit rescore --set`` (the oracle), and its metamorphic properties.

Every specification's score must be the score ``benchaudit rescore RUN --set FIELD=VALUE ...`` gives
for it: checked by hypothesis over random specifications of a toy run (four models, a real pytest run
against the scripted server) and of the published AthenaBench runs (one model's records of one task,
re-scored).  Metamorphic: a space of one specification reproduces the run's own scores; reordering the
runs, the models or a field's values changes no statistic; a field whose values all read the answers
alike explains nothing; the variance shares of a full factorial add up to 100%.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.multiverse.mv_documents import MultiverseDocument
from pytest_benchaudit.multiverse.universe import build_multiverse
from pytest_benchaudit.rescore.run_dirs import rescore_run

SLOW = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _without_time(doc: MultiverseDocument) -> dict[str, object]:
    return {k: v for k, v in doc.items() if k not in ("created", "runs")}


@pytest.fixture(scope="module")
def toy_doc(toy_root: tuple[Path, Path]) -> MultiverseDocument:
    root, run = toy_root
    return build_multiverse([run], suites_dir=root / "suites", resamples=200)


def _rescored(run: Path, fields: dict[str, object], out: Path, suites: Path) -> dict[str, float | None]:
    """Each model's score as ``benchaudit rescore RUN --set F=V ...`` writes it (the command's own summary)."""
    before = set(out.iterdir()) if out.is_dir() else set()
    args = ["rescore", str(run), "--report-dir", str(out), "--suites-dir", str(suites)]
    for field, value in fields.items():
        args += ["--set", f"{field}={json.dumps(value) if not isinstance(value, str) else value}"]
    assert main(args) == 0
    (new,) = [p for p in out.iterdir() if p not in before]
    summary = json.loads((new / "summary.json").read_text(encoding="utf-8"))
    return {r["model"]: r["score"] for r in summary["results"]}


def test_the_toy_space_is_the_defaults(toy_doc: MultiverseDocument) -> None:
    (space,) = toy_doc["spaces"]
    fields = {f["field"]: [v["value"] for v in f["values"]] for f in space["fields"]}
    assert fields["extraction.rule"] == ["final_answer_letter", "last_line_letter"]
    assert fields["extraction.reasoning"] == ["keep", "strip"]
    assert fields["scoring.denominator"] == ["total", "valid"]
    assert fields["scoring.invalid_credit"] == [0.0, 0.25]  # no credit, and a blind guess among 4 options
    assert space["size"] == 16 == space["enumerated"] and not space["sampled"]
    assert len(toy_doc["specifications"]) == 16


@SLOW
@given(data=st.data())
def test_each_toy_specification_is_what_rescore_set_gives(
    toy_root: tuple[Path, Path],
    toy_doc: MultiverseDocument,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:
    root, run = toy_root
    spec = data.draw(st.sampled_from(toy_doc["specifications"]))
    got = _rescored(run, spec["fields"], tmp_path_factory.mktemp("rescored"), root / "suites")
    assert got == spec["scores"]  # exactly: the same readings, the same sums in the same order


def test_the_hedger_flips_with_the_denominator(toy_doc: MultiverseDocument) -> None:
    """Hand count: the hedger's "Answer: X or Y" is no answer to final_answer_letter (hedged), so under
    "valid" it is scored on its two plain answers (both right: 1.0) and beats steady (7 of 8), under "total"
    it scores 2/8 and loses."""
    pair = next(p for p in toy_doc["pairs"] if {p["model_a"], p["model_b"]} == {"hedger", "steady"})
    flips = {f["field"] for f in pair["flip_fields"]}
    assert "scoring.denominator" in flips and pair["b_better"] > 0
    scores = {
        (s["fields"]["extraction.rule"], s["fields"]["scoring.denominator"]): s["scores"]
        for s in toy_doc["specifications"]
        if s["fields"]["scoring.invalid_credit"] == 0.0 and s["fields"]["extraction.reasoning"] == "strip"
    }
    assert scores[("final_answer_letter", "valid")]["hedger"] == 1.0
    assert scores[("final_answer_letter", "total")]["hedger"] == 2 / 8
    assert scores[("final_answer_letter", "total")]["steady"] == 7 / 8


def test_a_space_of_one_specification_reproduces_the_runs_own_scores(
    toy_root: tuple[Path, Path], tmp_path: Path, mvtoy: Callable[[Path, str], None]
) -> None:
    root, run = toy_root
    one = '''
[tasks.mcq.multiverse]
"extraction.rule" = [{ value = "last_line_letter", why = "as the run" }]
"extraction.reasoning" = [{ value = "keep", why = "as the run" }]
"scoring.denominator" = [{ value = "valid", why = "as the run" }]
'''
    mvtoy(tmp_path, one)
    doc = build_multiverse([run], suites_dir=tmp_path / "suites", resamples=0)
    (space,) = doc["spaces"]
    assert space["source"] == "suite" and space["size"] == 1
    (spec,) = doc["specifications"]
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert spec["scores"] == {r["model"]: r["score"] for r in summary["results"]}
    assert all(r["model"] is not None or r["total_ss"] == 0 for r in doc["variance"])


def test_reordering_runs_models_or_values_changes_no_statistic(
    toy_root: tuple[Path, Path], tmp_path: Path, toy_doc: MultiverseDocument, mvtoy: Callable[[Path, str], None]
) -> None:
    root, run = toy_root
    # The records of each model as a run of its own, named so that listing order reverses the models.
    names = {}
    records = (run / "records.jsonl").read_text(encoding="utf-8").splitlines()
    for i, model in enumerate(["steady", "thinker", "terse", "hedger"]):
        one = tmp_path / "split" / f"{9 - i}-{model}"
        one.mkdir(parents=True)
        shutil.copy(run / "run.json", one / "run.json")
        (one / "records.jsonl").write_text(
            "\n".join(r for r in records if json.loads(r)["model"] == model) + "\n", encoding="utf-8"
        )
        names[model] = one
    forward = build_multiverse(
        [names[m] for m in ("steady", "thinker", "terse", "hedger")], suites_dir=root / "suites", resamples=200
    )
    backward = build_multiverse(
        [names[m] for m in ("hedger", "terse", "thinker", "steady")], suites_dir=root / "suites", resamples=200
    )
    assert _without_time(forward) == _without_time(backward) == _without_time(toy_doc)
    # A declared space listing its values in two orders.
    table = (
        '[tasks.mcq.multiverse]\n"extraction.rule" = [{{ value = "{0}", why = "x" }}, {{ value = "{1}", why = "x" }}]\n'
        '"scoring.denominator" = [{{ value = "{2}", why = "x" }}, {{ value = "{3}", why = "x" }}]\n'
    )
    mvtoy(tmp_path / "a", table.format("last_line_letter", "final_answer_letter", "total", "valid"))
    mvtoy(tmp_path / "b", table.format("final_answer_letter", "last_line_letter", "valid", "total"))
    a = build_multiverse([run], suites_dir=tmp_path / "a" / "suites", resamples=200)
    b = build_multiverse([run], suites_dir=tmp_path / "b" / "suites", resamples=200)
    assert _without_time(a) == _without_time(b)


def test_a_field_whose_values_read_alike_explains_nothing(
    toy_root: tuple[Path, Path], tmp_path: Path, mvtoy: Callable[[Path, str], None]
) -> None:
    """Under the valid denominator no invalid answer is counted: the credit it would get changes nothing."""
    root, run = toy_root
    mvtoy(
        tmp_path,
        '''
[tasks.mcq.multiverse]
"extraction.rule" = [{ value = "last_line_letter", why = "x" }, { value = "final_answer_letter", why = "x" }]
"extraction.reasoning" = [{ value = "keep", why = "x" }, { value = "strip", why = "x" }]
"scoring.denominator" = [{ value = "valid", why = "x" }]
"scoring.invalid_credit" = [{ value = 0, why = "x" }, { value = 0.5, why = "x" }, { value = 1, why = "x" }]
''',
    )
    doc = build_multiverse([run], suites_dir=tmp_path / "suites", resamples=0)
    for row in doc["variance"]:
        shares = {f["field"]: f["share"] for f in row["fields"]}
        assert shares["scoring.invalid_credit"] == 0.0
        if row["total_ss"] > 0:
            assert shares["extraction.rule"] + shares["extraction.reasoning"] + row["higher_order"] == pytest.approx(
                1.0, abs=1e-12
            )


def test_variance_shares_add_to_100_percent_in_a_full_factorial(toy_doc: MultiverseDocument) -> None:
    rows = [r for r in toy_doc["variance"] if r["total_ss"] > 0]
    assert rows and all(r["exact"] for r in rows)
    for row in rows:
        assert sum(f["share"] for f in row["fields"]) + row["higher_order"] == pytest.approx(1.0, abs=1e-9)


def test_an_upstream_variant_is_one_more_value_of_the_generations_axis(
    toy_root: tuple[Path, Path], toy_vary_run: Path, tmp_path: Path
) -> None:
    """A run holding the base generations and those of ``--vary inference.max_tokens=32``: the space gains the
    ``generations`` axis, and each of its specifications is the re-scored run's row of that variant."""
    root, _run = toy_root
    doc = build_multiverse([toy_vary_run], suites_dir=root / "suites", resamples=0)
    (space,) = doc["spaces"]
    gens = next(f for f in space["fields"] if f["field"] == "generations")
    assert gens["upstream"] and [v["value"] for v in gens["values"]] == ["max_tokens=32", "released"]
    assert space["size"] == 32
    for spec in doc["specifications"][::7]:
        fields = {k: v for k, v in spec["fields"].items() if k != "generations"}
        out = tmp_path / f"r{spec['spec']}"
        args = ["rescore", str(toy_vary_run), "--report-dir", str(out), "--suites-dir", str(root / "suites")]
        for field, value in fields.items():
            args += ["--set", f"{field}={json.dumps(value) if not isinstance(value, str) else value}"]
        assert main(args) == 0
        (new,) = list(out.iterdir())
        variant = "" if spec["fields"]["generations"] == "released" else "max_tokens=32"
        results = json.loads((new / "summary.json").read_text(encoding="utf-8"))["results"]
        assert {r["model"]: r["score"] for r in results if r["variant"] == variant} == spec["scores"]


# ----------------------------------------------------------------------------- the published runs


@pytest.fixture(scope="module")
def athena_doc(athena_runs: Path, suites: Path) -> MultiverseDocument:
    return build_multiverse([athena_runs], suites_dir=suites, resamples=100)


def test_the_published_athenabench_spaces(athena_doc: MultiverseDocument) -> None:
    sizes = {s["task"]: s["size"] for s in athena_doc["spaces"]}
    assert sizes == {"ate": 8, "mcq": 24, "rcm": 8, "rms": 8, "taa": 8, "vsp": 8}
    vsp = next(s for s in athena_doc["spaces"] if s["task"] == "vsp")
    (left,) = vsp["left_out"]  # the standardized MAD is on another scale than the runs' 1 - MAD/7.7
    assert left["field"] == "scoring.metric" and left["value"] == "cvss_abs_diff" and "scale" in left["why"]
    models = {r["model"] for r in athena_doc["models"]}
    assert len(models) == 12 and len(athena_doc["pairs"]) == 6 * 66


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_each_published_specification_is_what_rescore_set_gives(
    athena_runs: Path,
    athena_doc: MultiverseDocument,
    suites: Path,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:
    """One model's records of one task as a run of their own, re-scored with the specification's fields."""
    spec = data.draw(st.sampled_from(athena_doc["specifications"]))
    run = data.draw(st.sampled_from(sorted(athena_runs.iterdir())))
    task = spec["task"].split(".", 1)[1]
    one = tmp_path_factory.mktemp("one") / run.name
    one.mkdir()
    shutil.copy(run / "run.json", one / "run.json")
    lines = [
        line
        for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["task"] == task
    ]
    (one / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _out, results, _cards = rescore_run(
        one,
        overrides=list(spec["fields"].items()),
        report_dir=tmp_path_factory.mktemp("rescored"),
        suites_dir=suites,
        warn=lambda _m: None,
    )
    (result,) = results
    assert spec["scores"][result["model"]] == result["score"]
