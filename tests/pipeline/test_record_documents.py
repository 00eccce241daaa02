"""pipeline/record_documents.py: the record's schema is declared once (pipeline/record.py's Record); the
row types that travel (RecordRow, RecordExtras) are held to its keys and types here, what evaluate
builds is typed as the row, and a real run's cards and records validate against the TypedDicts (extra
keys forbidden)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter
from typing_extensions import TypedDict, get_type_hints

from pytest_benchaudit.pipeline.record import OPTIONAL_KEYS, Record
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordExtras, RecordRow
from pytest_benchaudit.pipeline.stages import build_pipeline
from pytest_benchaudit.pipeline.types import ContinuationLogprobs, Generation, Question
from pytest_benchaudit.scoring.evaluate import evaluate
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer

CARDS = TypeAdapter(Cards)
RECORD_ROW = TypeAdapter(RecordRow)


def test_record_row_has_the_record_models_keys_and_its_optional_ones_are_not_required() -> None:
    assert list(get_type_hints(RecordRow)) == list(Record.model_fields)
    assert RecordRow.__required_keys__ == set(Record.model_fields) - set(OPTIONAL_KEYS)
    assert RecordRow.__optional_keys__ == set(OPTIONAL_KEYS)


def _types(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A JSON Schema reduced to the types it allows: $refs inlined; titles, descriptions and defaults
    dropped; ``required`` dropped (what a row must hold is the key test above; a nested model's defaults
    let it read older rows); an open object's "any value" written one way (``Any`` and ``JsonValue``)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _types(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        out = {
            k: _types(v, defs)
            for k, v in schema.items()
            if k not in ("title", "description", "default", "required", "$defs")
        }
        if out.get("additionalProperties") == {}:
            out["additionalProperties"] = True
        return out
    if isinstance(schema, list):
        return [_types(v, defs) for v in schema]
    return schema


def _record_types() -> dict[str, Any]:
    fields = _types(Record.model_json_schema())["properties"]
    # The one refinement the model adds to a row's type: a repeat index is never negative.
    assert fields["repeat"].pop("minimum") == 0
    return dict(fields)


def test_record_row_has_the_record_models_types() -> None:
    """Declared once: the TypedDict a record travels as allows exactly the types the model validates."""
    assert _types(TypeAdapter(RecordRow).json_schema())["properties"] == _record_types()


def test_record_extras_are_the_record_models_optional_fields() -> None:
    record = _record_types()
    assert _types(TypeAdapter(RecordExtras).json_schema())["properties"] == {k: record[k] for k in OPTIONAL_KEYS}


def test_the_type_comparison_sees_a_field_that_drifts() -> None:
    """Not vacuous: a row type with one field's type changed, or one key missing, compares unequal."""

    class Drifted(TypedDict):
        score: str  # Record's is a float

    fields = _record_types()
    drifted = _types(TypeAdapter(Drifted).json_schema())["properties"]
    assert drifted["score"] != fields["score"]
    assert {**fields, **drifted} != fields and {k: v for k, v in fields.items() if k != "gold"} != fields


def test_evaluate_sets_every_field_of_the_row_and_leaves_only_the_optional_ones() -> None:
    """evaluate builds the whole row (typed as RecordRow, no third declaration of the schema): every
    field but the optional ones is set, and the dump is the row those fields make."""
    pipe = build_pipeline(
        "standardized",
        "b",
        "t",
        {
            "prompt": {"template": "t", "format": {"mode": "chat"}},
            "extraction": {"rule": "final_line", "reasoning": "strip"},
            "scoring": {"metric": "exact_match", "denominator": "total"},
            "aggregation": {"method": "micro"},
        },
    )
    question = Question(benchmark="b", task="t", id="q1", index=0, text="?", choices={"A": "a", "B": "b"}, gold="B")
    record = evaluate(question, pipe, {"messages": []}, Generation(text="B"), model="m")
    assert record.model_fields_set == set(Record.model_fields) - set(OPTIONAL_KEYS)
    RECORD_ROW.validate_python(record.model_dump(mode="json"))


def test_a_log_likelihood_answers_continuations_are_stored_as_they_came() -> None:
    pipe = build_pipeline(
        "lm_eval",
        "b",
        "t",
        {
            "prompt": {"template": "t", "format": {"mode": "completion"}},
            "inference": {"request": "loglikelihood"},
            "extraction": {"rule": "lm_eval_loglikelihood", "reasoning": "keep"},
            "scoring": {"metric": "exact_match", "denominator": "total"},
            "aggregation": {"method": "micro"},
        },
    )
    question = Question(benchmark="b", task="t", id="q1", index=0, text="?", choices={"A": "a", "B": "b"}, gold="B")
    read = (
        ContinuationLogprobs(continuation=" A", tokens=(" A",), logprobs=(-2.5,)),
        ContinuationLogprobs(continuation=" B", tokens=(" B",), logprobs=(-0.25,)),
    )
    unread = (read[0], ContinuationLogprobs(continuation=" B", missing="no log-probabilities"))
    for continuations, prediction in ((read, "B"), (unread, None)):
        record = evaluate(question, pipe, {"prompt": "?"}, Generation(text="", continuations=continuations), model="m")
        dumped = record.model_dump(mode="json")
        assert dumped["continuations"] == [c.model_dump(mode="json") for c in continuations]
        assert dumped["prediction"] == prediction


def test_a_card_key_nobody_declared_is_refused() -> None:
    card = {
        "card_version": "1",
        "benchmark": "b",
        "task": "t",
        "pipeline": "l",
        "hash": "h",
        "upstream_hash": "u",
        "fields": {},
        "overrides": {},
        "why": {},
        "notes": [],
        "unspecified": [],
        "surprise": 1,
    }
    with pytest.raises(ValueError, match="surprise"):
        TypeAdapter(PipelineCard).validate_python(card)


def test_a_real_runs_cards_and_records_validate(pytester: pytest.Pytester, scripted: ScriptedServer, toy) -> None:
    """A run with a --vary variant, a --set override and a fixture that changes one item's pipeline:
    every card (variant, override origins, item pipelines, suite files) and every record validates."""
    pytester.makeconftest("""
        import pytest
        from pytest_benchaudit.pipeline.layering import apply_overrides


        @pytest.fixture
        def pipeline(pipeline, question):
            return apply_overrides(pipeline, [("inference.max_tokens", 7)]) if question.id == "t06" else pipeline
        """)
    pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"toy-model@{scripted.url}",
        "--report-dir",
        "out",
        "--max-retries",
        "0",
        "-p",
        "no:randomly",
        "-k",
        "mcq",
        "--vary",
        "scoring.denominator=valid",
        "--set",
        "aggregation.method=macro",
    )
    out = read_run(only_run_dir(pytester.path / "out"))
    cards = CARDS.validate_python(out["run"]["pipeline_cards"])
    assert {"toy.mcq", "toy.mcq|denominator=valid"} <= set(cards)
    base = cards["toy.mcq"]
    assert base["item_pipelines"] and base["override_origins"]["aggregation.method"] == "--set"
    assert cards["toy.mcq|denominator=valid"]["variant"]["kind"] == "downstream"
    assert out["records"]
    for record in out["records"]:
        RECORD_ROW.validate_python(record)
