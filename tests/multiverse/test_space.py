"""A task's space: the defaults from the suites, a declared ``[tasks.T.multiverse]`` table, its errors,
and the enumeration (full factorial, or a seeded sample whose size and seed are kept)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.cli.app import main
from pytest_benchaudit.dataset.suites import SuiteError, load_suite
from pytest_benchaudit.multiverse.enumerate_specs import decode, enumerate_specs
from pytest_benchaudit.multiverse.space import Axis, AxisValue, TaskSpace
from pytest_benchaudit.multiverse.universe import suite_spaces


def _fields(row: dict) -> dict[str, list[object]]:
    return {f["field"]: [v["value"] for v in f["values"]] for f in row["fields"]}


def test_the_default_spaces_of_athenabench_from_its_suite(suites: Path) -> None:
    rows = {r["task"]: r for r in suite_spaces("athenabench", suites)}
    mcq = _fields(rows["mcq"])
    # the layers' rules, and the registry's readers of an option label (the standardized rule declares the type)
    assert mcq["extraction.rule"] == ["athena_mcq_letter", "final_answer_letter", "last_line_letter"]
    assert mcq["extraction.reasoning"] == ["keep", "strip"] and mcq["scoring.denominator"] == ["total", "valid"]
    assert mcq["scoring.invalid_credit"] == [0.0, 0.2]  # no credit; a blind guess among the 5 options A-E
    assert rows["mcq"]["size"] == 24
    # ATT&CK ids are no option labels: only the layers' rules
    assert _fields(rows["ate"])["extraction.rule"] == ["athena_technique", "technique_final_answer"]
    vsp = rows["vsp"]
    assert _fields(vsp)["scoring.metric"] == ["cvss_closeness_athena"]
    assert [(x["field"], x["value"]) for x in vsp["left_out"]] == [("scoring.metric", "cvss_abs_diff")]
    sources = {
        v["value"]: v["why"] for f in rows["mcq"]["fields"] if f["field"] == "extraction.rule" for v in f["values"]
    }
    assert sources["athena_mcq_letter"] == "released layer"
    assert "registry" in sources["last_line_letter"]


def test_list_prints_every_task_space_and_its_size(capsys: pytest.CaptureFixture[str], suites: Path) -> None:
    assert main(["multiverse", "--list", "cti_bench", "--suites-dir", str(suites)]) == 0
    out = capsys.readouterr().out
    for task in ("cti_bench.mcq", "cti_bench.rcm", "cti_bench.vsp", "cti_bench.ate", "cti_bench.taa"):
        assert f"{task} (default space):" in out
    assert "(the full factorial)" in out and "extraction.rule:" in out and "why" not in out.split("\n")[0]


def test_list_of_an_unknown_benchmark_is_one_clear_error(capsys: pytest.CaptureFixture[str], suites: Path) -> None:
    assert main(["multiverse", "--list", "athenabnch", "--suites-dir", str(suites)]) == 2
    err = capsys.readouterr().err
    assert "athenabench" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


DECLARED = '''
[tasks.mcq.multiverse]
"extraction.rule" = [{ value = "final_answer_letter", why = "states its answer" },
                     { value = "last_line_letter", why = "the released heuristic" }]
"scoring.invalid_credit" = [{ value = 0, why = "no credit" }, { value = 0.25, why = "a guess" }]
'''


def test_a_declared_table_is_the_whole_downstream_space(tmp_path: Path, mvtoy: Callable[[Path, str], None]) -> None:
    mvtoy(tmp_path, DECLARED)
    suite = load_suite(tmp_path / "suites" / "mvtoy" / "suite.toml")
    assert list(suite.tasks["mcq"].multiverse) == ["extraction.rule", "scoring.invalid_credit"]
    assert "multiverse" not in suite.layer_names("mcq")  # not a layer
    (row,) = suite_spaces("mvtoy", tmp_path / "suites")
    assert row["source"] == "suite" and row["size"] == 4
    assert _fields(row) == {
        "extraction.rule": ["final_answer_letter", "last_line_letter"],
        "scoring.invalid_credit": [0.0, 0.25],
    }
    assert main(["validate", str(tmp_path / "suites")]) == 0


@pytest.mark.parametrize(
    "table, words",
    [
        ('"inference.max_tokens" = [{ value = 5, why = "x" }]', ["upstream", "generations"]),
        ('"extraction.rul" = [{ value = "x", why = "x" }]', ["did you mean 'extraction.rule'"]),
        ('"extraction.rule" = [{ value = "final_answer_letter", why = "" }]', ["'why' is empty"]),
        ('"extraction.rule" = [{ value = "final_answer_letter" }]', ["missing key 'why'"]),
        ('"extraction.rule" = [{ value = "x", why = "a" }, { value = "x", why = "b" }]', ["twice"]),
    ],
)
def test_a_malformed_table_is_one_error_naming_the_file(
    tmp_path: Path, mvtoy: Callable[[Path, str], None], table: str, words: list[str]
) -> None:
    mvtoy(tmp_path, "\n[tasks.mcq.multiverse]\n" + table + "\n")
    with pytest.raises(SuiteError) as err:
        load_suite(tmp_path / "suites" / "mvtoy" / "suite.toml")
    assert "suite.toml" in str(err.value) and "[tasks.mcq" in str(err.value)
    for word in words:
        assert word in str(err.value)


@pytest.mark.parametrize(
    "table, words",
    [
        ('"aggregation.method" = [{ value = "macro", why = "x" }]', ["does not change a task's score"]),
        (
            '"extraction.rule" = [{ value = "final_answer_leter", why = "x" }]',
            ["not a known rule", "final_answer_letter"],
        ),
        ('"scoring.denominator" = [{ value = "some", why = "x" }]', ["scoring.denominator"]),
        (
            '"scoring.metric" = [{ value = "exact_match", why = "x" }, { value = "cvss_abs_diff", why = "x" }]',
            ["share a scale", "lower is better"],
        ),
        # a metric reading alias graphs the toy task does not declare (was: a KeyError when the run was scored)
        (
            '"scoring.metric" = [{ value = "exact_match", why = "x" }, { value = "actor_graph", why = "x" }]',
            ["actor_graph reads the task resource(s) aliases, related", "[tasks.mcq.resources] does not declare"],
        ),
    ],
)
def test_a_table_the_multiverse_cannot_use_is_one_error(
    tmp_path: Path, mvtoy: Callable[[Path, str], None], capsys: pytest.CaptureFixture[str], table: str, words: list[str]
) -> None:
    mvtoy(tmp_path, "\n[tasks.mcq.multiverse]\n" + table + "\n")
    assert main(["multiverse", "--list", "mvtoy", "--suites-dir", str(tmp_path / "suites")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "[tasks.mcq.multiverse]" in err
    for word in words:
        assert word in err


def _space(sizes: list[int]) -> TaskSpace:
    return TaskSpace(
        "b", "t", tuple(Axis(f"f{i}", tuple(AxisValue(v, "x") for v in range(n))) for i, n in enumerate(sizes)), "suite"
    )


def test_the_full_factorial_is_every_combination_once() -> None:
    space = _space([2, 3, 2])
    enum = enumerate_specs(space)
    assert not enum.sampled and enum.seed is None and enum.size == 12
    assert sorted(s.levels for s in enum.specs) == sorted(itertools.product(range(2), range(3), range(2)))


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6), seed=st.integers(0, 10**6), cap=st.integers(1, 50))
def test_a_large_space_is_a_seeded_sample_of_distinct_specifications(sizes: list[int], seed: int, cap: int) -> None:
    space = _space(sizes)
    enum = enumerate_specs(space, seed, cap)
    assert enum.size == space.size
    if space.size <= cap:
        assert not enum.sampled and len(enum.specs) == space.size
        return
    again = enumerate_specs(space, seed, cap)
    assert enum.sampled and enum.seed == seed and len(enum.specs) == cap and enum.specs == again.specs
    numbers = [s.number for s in enum.specs]
    assert numbers == sorted(set(numbers)) and all(0 <= n < space.size for n in numbers)
    assert all(decode(space, s.number) == s for s in enum.specs)


def test_a_sample_is_recorded_in_the_document(toy_root: tuple[Path, Path]) -> None:
    from pytest_benchaudit.multiverse.universe import build_multiverse

    root, run = toy_root
    doc = build_multiverse([run], suites_dir=root / "suites", resamples=0, max_specs=5, seed=7)
    (space,) = doc["spaces"]
    assert space["sampled"] and space["sample_seed"] == 7 and space["enumerated"] == 5 and space["size"] == 16
    assert len(doc["specifications"]) == 5 and not any(r["exact"] for r in doc["variance"])
