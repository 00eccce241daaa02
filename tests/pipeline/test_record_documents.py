"""pipeline/record_documents.py: the record row is the Record model's keys, and a real run's cards and
records validate against the TypedDicts (extra keys forbidden)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter
from typing_extensions import get_type_hints

from conftest import only_run_dir, read_run
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordRow
from pytest_benchaudit.pipeline.record import OPTIONAL_KEYS, Record
from pytest_benchaudit.testing.scripted_server import ScriptedServer

CARDS = TypeAdapter(Cards)
RECORD_ROW = TypeAdapter(RecordRow)


def test_record_row_has_the_record_models_keys_and_its_optional_ones_are_not_required() -> None:
    assert list(get_type_hints(RecordRow)) == list(Record.model_fields)
    assert RecordRow.__required_keys__ == set(Record.model_fields) - set(OPTIONAL_KEYS)
    assert RecordRow.__optional_keys__ == set(OPTIONAL_KEYS)


def test_a_card_key_nobody_declared_is_refused() -> None:
    card = {"card_version": "1", "benchmark": "b", "task": "t", "pipeline": "l", "hash": "h", "upstream_hash": "u",
            "fields": {}, "overrides": {}, "why": {}, "notes": [], "unspecified": [], "surprise": 1}
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
    pytester.runpytest("suites/toy", "--data-dir", "data", "--model", f"toy-model@{scripted.url}",
                       "--report-dir", "out", "--max-retries", "0", "-p", "no:randomly", "-k", "mcq",
                       "--vary", "scoring.denominator=valid", "--set", "aggregation.method=macro")
    out = read_run(only_run_dir(pytester.path / "out"))
    cards = CARDS.validate_python(out["run"]["pipeline_cards"])
    assert {"toy.mcq", "toy.mcq|denominator=valid"} <= set(cards)
    base = cards["toy.mcq"]
    assert base["item_pipelines"] and base["override_origins"]["aggregation.method"] == "--set"
    assert cards["toy.mcq|denominator=valid"]["variant"]["kind"] == "downstream"
    assert out["records"]
    for record in out["records"]:
        RECORD_ROW.validate_python(record)
