"""The repeat fields of the pipeline (``inference.repeats``, ``aggregation.reducer``/``pass_k``) and
of the record (``repeat``): their values are checked where they are set, and a pipeline that asks
once keeps the hash it had before the fields existed (its records, caches and resumes stay valid)."""

from __future__ import annotations

import pytest

from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.record import Record
from pytest_benchaudit.pipeline.stages import PipelineError, build_pipeline, parse_override

FIELDS = {"inference": {"max_tokens": 5}, "scoring": {"metric": "accuracy", "denominator": "total"}}


def _pipeline():
    return build_pipeline("standardized", "toy", "mcq", FIELDS)


def test_defaults_ask_once_and_take_the_mean() -> None:
    card = _pipeline().card()
    assert card["fields"]["inference.repeats"] == 1
    assert card["fields"]["aggregation.reducer"] == "mean" and card["fields"]["aggregation.pass_k"] is None


def test_set_reaches_the_fields_and_moves_the_right_hashes() -> None:
    base = _pipeline()
    repeated = apply_overrides(base, [parse_override("inference.repeats=5")])
    assert repeated.inference.repeats == 5
    # Upstream: five asks are other generations than one.
    assert repeated.upstream_hash != base.upstream_hash and repeated.hash != base.hash
    reduced = apply_overrides(repeated, [parse_override("aggregation.reducer=majority")])
    # Downstream: the same generations read another way.
    assert reduced.upstream_hash == repeated.upstream_hash and reduced.hash != repeated.hash
    assert reduced.card()["overrides"] == {"inference.repeats": 5, "aggregation.reducer": "majority"}


def test_a_default_written_out_moves_no_hash() -> None:
    # Metamorphic: stating the default value changes nothing (old runs keep their hashes).
    base = _pipeline()
    stated = build_pipeline(
        "standardized",
        "toy",
        "mcq",
        {**FIELDS, "inference": {"max_tokens": 5, "repeats": 1}, "aggregation": {"reducer": "mean"}},
    )
    assert (stated.hash, stated.upstream_hash) == (base.hash, base.upstream_hash)
    # ...and the hash still covers every other field (a default left out is only ours).
    assert build_pipeline("standardized", "toy", "mcq", {**FIELDS, "inference": {"max_tokens": 6}}).hash != base.hash


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("inference.repeats=0", "repeats must be >= 1, not 0; the nearest valid value is 1"),
        ("aggregation.reducer=median", "aggregation.reducer"),
        ("aggregation.pass_k=0", "pass_k must be >= 1, not 0"),
        ("aggregation.pass_k=3", "aggregation.pass_k = 3 needs at least 3 repeats, not inference.repeats = 1"),
        ("inference.repeats=true", "a boolean is not a valid value here"),
    ],
)
def test_bad_values_are_one_error_naming_the_field(override: str, message: str) -> None:
    with pytest.raises(PipelineError) as err:
        apply_overrides(_pipeline(), [parse_override(override)])
    assert message in str(err.value) and override.split("=")[0] in str(err.value)


def test_pass_k_within_the_repeats_is_accepted() -> None:
    p = apply_overrides(
        _pipeline(),
        [
            parse_override("inference.repeats=5"),
            parse_override("aggregation.reducer=any"),
            parse_override("aggregation.pass_k=2"),
        ],
    )
    assert (p.inference.repeats, p.aggregation.reducer, p.aggregation.pass_k) == (5, "any", 2)


def test_a_record_without_repeat_reads_as_repeat_0() -> None:
    data = {
        "benchmark": "toy",
        "task": "mcq",
        "question_id": "q1",
        "question_index": 0,
        "model": "m",
        "pipeline": "standardized",
        "pipeline_hash": "",
        "request": {},
        "raw_output": "",
        "valid": True,
        "gold": "A",
        "score": 1.0,
        "correct": True,
    }
    assert Record.model_validate(data).repeat == 0
    assert Record.model_validate({**data, "repeat": 3}).repeat == 3
    with pytest.raises(ValueError):
        Record.model_validate({**data, "repeat": -1})
