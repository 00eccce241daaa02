"""Offline re-scoring: stored raw outputs, new downstream fields, no model server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer


@pytest.fixture
def toy_run(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> Path:
    pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--max-retries",
        "0",
    )
    return only_run_dir(pytester.path / "out")


def rescore(pytester: pytest.Pytester, run: Path, *args: str) -> tuple[int, Path | None]:
    before = {p for p in run.parent.iterdir()}
    rc = main(
        ["rescore", str(run), "--report-dir", str(run.parent), "--suites-dir", str(pytester.path / "suites"), *args]
    )
    new = [p for p in run.parent.iterdir() if p not in before]
    return rc, (new[0] if new else None)


def comparable(recs: list[dict]) -> list[tuple]:
    keys = ("question_id", "prediction", "valid", "invalid_reason", "score", "correct", "raw_output", "request")
    return sorted(tuple(json.dumps(r[k], sort_keys=True) for k in keys) for r in recs)


def test_rescore_without_changes_reproduces_the_run(pytester: pytest.Pytester, toy_run: Path) -> None:
    rc, new = rescore(pytester, toy_run)
    assert rc == 0 and new is not None
    old, fresh = read_run(toy_run), read_run(new)
    assert comparable(fresh["records"]) == comparable(old["records"])
    strip = lambda rs: [{k: v for k, v in r.items() if k != "pipeline_hash"} for r in rs]  # noqa: E731
    assert strip(fresh["summary"]["results"]) == strip(old["summary"]["results"])
    assert fresh["run"]["source"]["kind"] == "rescore" and fresh["run"]["source"]["run_id"] == old["run"]["run_id"]


def test_downstream_overrides_change_only_downstream(pytester: pytest.Pytester, toy_run: Path) -> None:
    rc, new = rescore(pytester, toy_run, "--set", "extraction.reasoning=keep", "--set", "scoring.denominator=valid")
    assert rc == 0
    out = read_run(new)
    recs = {r["question_id"]: r for r in out["records"]}
    # the unclosed <think> draft is now read as the answer (C), as released code would read it
    assert recs["t05"]["valid"] and recs["t05"]["prediction"] == "C"
    (res,) = out["summary"]["results"]
    assert res["denominator"] == "valid" and res["score"] == res["score_valid"]
    card = out["run"]["pipeline_cards"]["toy.mcq"]
    assert card["overrides"] == {"extraction.reasoning": "keep", "scoring.denominator": "valid"}
    assert card["upstream_hash"] == read_run(toy_run)["run"]["pipeline_cards"]["toy.mcq"]["upstream_hash"]


def test_upstream_change_is_refused_naming_the_field(
    pytester: pytest.Pytester, toy_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, new = rescore(pytester, toy_run, "--set", "inference.max_tokens=5")
    assert rc == 2 and new is None
    err = capsys.readouterr().err
    assert "inference.max_tokens: stored 64, asked 5 — this needs new generations" in err


def test_switching_layer_applies_its_downstream_stages(pytester: pytest.Pytester, toy_run: Path) -> None:
    rc, new = rescore(pytester, toy_run, "--pipeline", "released")
    assert rc == 0
    card = read_run(new)["run"]["pipeline_cards"]["toy.mcq"]
    assert card["pipeline"] == "released"
    assert card["fields"]["extraction.reasoning"] == "keep" and card["fields"]["scoring.denominator"] == "valid"
    (res,) = read_run(new)["summary"]["results"]
    assert res["denominator"] == "valid"


def test_rescore_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rescore", str(tmp_path)]) == 2
    assert "not a benchaudit run directory" in capsys.readouterr().err


@pytest.fixture(scope="module")
def athena_released(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """AthenaBench's published runs imported (under their 'released' layer)."""
    from helpers import SUITES
    from pytest_benchaudit.importers import import_athenabench_runs

    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    root = tmp_path_factory.mktemp("athena-rescore") / "released"
    import_athenabench_runs(source, root, SUITES, str(real_data))
    return root


def test_rescoring_runs_toward_their_own_layer_moves_nothing(
    athena_released: Path, real_data: Path, tmp_path: Path
) -> None:
    """Metamorphic: every score, rank, tau-b and rho is what it was; the field sweep toward the own layer has
    no variant; the sensitivity table gives rho 1."""
    from helpers import SUITES
    from pytest_benchaudit.compare import compare_document, load_runs, make_sets
    from pytest_benchaudit.compare.sensitivity import sensitivity_table
    from pytest_benchaudit.rescore.run_dirs import rescore_run, sweep_run

    runs = sorted(p for p in athena_released.iterdir() if (p / "run.json").is_file())
    again = [
        rescore_run(p, layer="released", report_dir=tmp_path / "again", suites_dir=SUITES, data_dir=str(real_data))[
            0
        ].path
        for p in runs
    ]
    for old, new in zip(runs, again):
        a, b = read_run(old)["records"], read_run(new)["records"]
        assert [(r["question_id"], r["score"], r["valid"]) for r in a] == [
            (r["question_id"], r["score"], r["valid"]) for r in b
        ]
    assert sweep_run(runs[0], [], toward="released", suites_dir=SUITES, data_dir=str(real_data))[0] == []
    base, same = load_runs(runs), load_runs(again)
    set_a, set_b = make_sets(base, same)
    doc = compare_document(set_a, set_b, None, n_resamples=50, seed=0)
    assert all(r["shift"] == 0 for r in doc["rank_shift"]) and doc["spearman"][0]["rho"] == pytest.approx(1.0)
    assert doc["by_set"]["a"]["tau_b"] == doc["by_set"]["b"]["tau_b"]
    cards = {k: c for run in base for k, c in run.meta["pipeline_cards"].items()}
    sens = sensitivity_table(set_a, doc["by_set"]["a"], cards, same, n_resamples=50)
    (row,) = sens["benchmarks"]
    assert {r["kind"] for r in sens["runs"]} == {"downstream"}
    assert all(r["downstream_fields_differ"] == [] for r in sens["runs"])
    assert row["rho_downstream"] == pytest.approx(1.0)


def test_an_extraction_only_rescore_changes_the_extraction_fields_alone(
    athena_released: Path, real_data: Path, tmp_path: Path
) -> None:
    """``stages=("extraction",)``: the target layer's extraction.* fields, everything else as stored; the
    sensitivity table reads such runs as the paper's rho_ext."""
    from helpers import SUITES
    from pytest_benchaudit.compare import compare_document, load_runs, make_sets
    from pytest_benchaudit.compare.sensitivity import sensitivity_table
    from pytest_benchaudit.dataset.suites import load_suite
    from pytest_benchaudit.rescore.run_dirs import rescore_run

    runs = sorted(p for p in athena_released.iterdir() if (p / "run.json").is_file())
    suite = load_suite(SUITES / "athenabench" / "suite.toml")
    only = [
        rescore_run(
            p,
            layer="standardized",
            report_dir=tmp_path / "ext",
            suites_dir=SUITES,
            data_dir=str(real_data),
            stages=("extraction",),
        )[0].path
        for p in runs
    ]
    stored = read_run(runs[0])["run"]["pipeline_cards"]
    cards = read_run(only[0])["run"]["pipeline_cards"]
    for key, card in cards.items():
        target = suite.pipeline(key.split(".")[1], "standardized").card()["fields"]
        for name, value in card["fields"].items():
            expected = target[name] if name.startswith("extraction.") else stored[key]["fields"][name]
            assert value == expected, (key, name)
        assert card["upstream_hash"] == stored[key]["upstream_hash"]
    assert read_run(only[0])["run"]["source"]["stages"] == ["extraction"]
    base = load_runs(runs)
    set_a, _ = make_sets(base)
    doc = compare_document(set_a, None, None, n_resamples=50, seed=0)
    all_cards = {k: c for run in base for k, c in run.meta["pipeline_cards"].items()}
    sens = sensitivity_table(set_a, doc["by_set"]["a"], all_cards, load_runs(only), n_resamples=50)
    assert {r["scope"] for r in sens["runs"]} == {"extraction"}
    (row,) = sens["benchmarks"]
    assert row["rho_ext"] is not None and row["n_models_ext"] == 12 and row["rho_downstream"] is None
    # the same number compare --against computes for these two sets
    two = compare_document(*make_sets(base, load_runs(only)), None, n_resamples=50, seed=0)
    assert row["rho_ext"] == two["spearman"][0]["rho"]


def test_a_folder_of_runs_is_rescored_into_its_own_folder(
    athena_released: Path, real_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rescore FOLDER --report-dir NEW`: every run of the folder re-scored once into NEW (so compare can
    read the two folders as two sets); without --report-dir, one error and nothing written."""
    from helpers import SUITES

    originals = sorted(p for p in athena_released.iterdir() if (p / "run.json").is_file())
    common = ["--pipeline", "standardized", "--suites-dir", str(SUITES), "--data-dir", str(real_data)]
    assert main(["rescore", str(athena_released), *common]) == 2
    assert "give --report-dir" in capsys.readouterr().err
    assert sorted(p for p in athena_released.iterdir()) == originals
    new = tmp_path / "std"
    assert main(["rescore", str(athena_released), *common, "--report-dir", str(new)]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("run directory: ")]
    rescored = sorted(new.iterdir())
    assert len(rescored) == len(originals) == len(printed)
    # each new run holds the same questions as the run it came from, now under the standardized layer
    by_model = {read_run(p)["records"][0]["model"]: read_run(p) for p in rescored}
    for original in originals:
        before = read_run(original)
        after = by_model[before["records"][0]["model"]]
        assert sorted(r["question_id"] for r in after["records"]) == sorted(r["question_id"] for r in before["records"])
        assert {r["pipeline"] for r in after["records"]} == {"standardized"}
