"""compare.json against its declared shape: :data:`pytest_benchaudit.compare.document_builder.COMPARE`
(``extra="forbid"``) validates the documents ``benchaudit compare`` writes: one set, two sets (peer gaps),
--similarity, --sensitivity and --similar, on the published AthenaBench runs and on toy runs."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from fake_embedder import fake_embedder
from pydantic import ValidationError

from helpers import SUITES
from helpers.compare_runs import SHARED, sensitivity_sets, write_similarity_set
from pytest_benchaudit.cli.compare_cmd import add_parser, run
from pytest_benchaudit.compare.document_builder import COMPARE
from pytest_benchaudit.importers import import_athenabench_runs


def _compare(out: Path, *argv: str) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="benchaudit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    assert (
        run(parser.parse_args(["compare", *argv, "--resamples", "50", "--permutations", "50", "--out", str(out)])) == 0
    )
    doc: dict[str, Any] = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    return doc


@pytest.fixture(scope="module")
def released(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    root = tmp_path_factory.mktemp("athena-compare") / "released"
    import_athenabench_runs(source, root, SUITES, str(real_data))
    return root


def test_the_published_runs_one_set_and_against_themselves(released: Path, tmp_path: Path) -> None:
    one = _compare(tmp_path / "one", str(released))
    assert COMPARE.validate_python(one) == one
    assert one["comparison"] is None and "peer_gaps" not in one and one["paired"] and one["pca"]["eigenvalues"]
    two = _compare(tmp_path / "two", str(released), "--against", str(released))
    assert COMPARE.validate_python(two) == two
    assert set(two["by_set"]) == {"a", "b"} and two["rank_shift"] and two["spearman"] and two["peer_gaps"]
    assert two["bootstrap"]["questions"] and "min_shift_for_stability" in two


def test_sensitivity_and_two_toy_sets(tmp_path: Path) -> None:
    sets = sensitivity_sets(tmp_path)
    doc = _compare(
        tmp_path / "sens",
        str(sets["base"]),
        "--sensitivity",
        str(sets["rescored"]),
        str(sets["regenerated"]),
        str(sets["downstream"]),
    )
    assert COMPARE.validate_python(doc) == doc
    assert {r["kind"] for r in doc["sensitivity"]["runs"]} == {"upstream", "downstream"}
    only_rescored = _compare(tmp_path / "no-gen", str(sets["base"]), "--sensitivity", str(sets["rescored"]))
    assert COMPARE.validate_python(only_rescored) == only_rescored
    assert "why_no_gen" in only_rescored["sensitivity"]["benchmarks"][0]
    two = _compare(tmp_path / "two", str(sets["base"]), "--against", str(sets["regenerated"]))
    assert COMPARE.validate_python(two) == two
    assert two["peer_gaps"] and two["missing"] == []


def test_similarity_and_declared_similar_pairs(tmp_path: Path) -> None:
    a = write_similarity_set(tmp_path / "a", SHARED, seed=1)
    b = write_similarity_set(tmp_path / "b", SHARED, seed=2)
    with fake_embedder() as (spec, _seen):
        doc = _compare(
            tmp_path / "out",
            str(a),
            "--against",
            str(b),
            "--similarity",
            "--embedder",
            spec,
            "--similar",
            "alpha.t1~beta.t1",
        )
    assert COMPARE.validate_python(doc) == doc
    assert doc["similarity"]["layers"].keys() == {"a", "b"} and doc["by_set"]["b"]["similarity"]["pairs"]
    assert doc["similar_pairs"] == [["alpha.t1", "beta.t1"]] and any(r["similar"] for r in doc["tau_b"])


def test_a_key_nobody_declared_is_refused(released: Path, tmp_path: Path) -> None:
    doc = _compare(tmp_path / "one", str(released))
    for where in (
        lambda d: d,
        lambda d: d["paired"][0],
        lambda d: d["by_set"]["a"],
        lambda d: d["pca"],
        lambda d: d["tasks"]["athenabench.vsp"],
    ):
        bad = copy.deepcopy(doc)
        where(bad)["surprise"] = 1
        with pytest.raises(ValidationError, match="surprise"):
            COMPARE.validate_python(bad)
    missing = copy.deepcopy(doc)
    del missing["by_set"]["a"]["mde80"]
    with pytest.raises(ValidationError, match="mde80"):
        COMPARE.validate_python(missing)
