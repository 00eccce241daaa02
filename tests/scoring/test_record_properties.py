"""Properties of records over generated data (hypothesis): evaluate() gives what Record(...) gives, field
by field and in model_fields_set; a records.jsonl line read back and written again is the same line
(the optional keys kept exactly when present); a key the schema does not declare is refused naming
file:line and the key."""

from __future__ import annotations

import datetime as _dt
import functools
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.records import QUESTION, REQUEST, STAMP, reference
from helpers.records import pipe as _load_pipe
from pytest_benchaudit.pipeline.record import OPTIONAL_KEYS, JudgeCall, Record
from pytest_benchaudit.pipeline.types import INVALID_STAGE, Extraction, Generation, Question, Score
from pytest_benchaudit.runs.store import BadRecord, _record_line, read_records
from pytest_benchaudit.scoring import evaluate as evaluate_module
from pytest_benchaudit.scoring.evaluate import evaluate

pipe = functools.lru_cache(maxsize=None)(_load_pipe)  # the suite read once, not per example
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

texts = st.text(max_size=40)
optional_texts = st.none() | texts
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | floats | texts
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=8
)
answers = (
    st.sampled_from(
        [
            "Answer: B",
            "Answer: A",
            "B",
            "<think>A or B",
            "<think>no</think>\nAnswer: C",
            "Answer: A or B",
            "",
            "I am not sure.",
        ]
    )
    | texts
)

generations = st.builds(
    Generation,
    text=answers,
    reasoning=optional_texts,
    finish_reason=st.sampled_from([None, "stop", "length"]),
    error=st.none() | st.sampled_from(["HTTP 500: boom", "timeout: no answer within 5s"]),
    usage=st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), st.integers(0, 10**6)),
    latency_s=st.floats(0, 1000),
    attempts=st.integers(0, 5),
    served_model=optional_texts,
    from_cache=st.booleans(),
    top_logprobs=st.none()
    | st.lists(st.dictionaries(st.sampled_from(list("ABCD")), floats, max_size=4), max_size=2).map(tuple),
)
questions = st.builds(
    lambda meta, gold, index: QUESTION.model_copy(update={"meta": meta, "gold": gold, "index": index}),
    st.dictionaries(texts, json_values, max_size=3),
    st.sampled_from(list("ABCD") + ["b", ""]),
    st.integers(0, 10**6),
)
judges = st.fixed_dictionaries(
    {
        "model": texts,
        "purpose": st.sampled_from(["extraction", "grading"]),
        "prompt_version": st.just("1"),
        "raw_output": texts,
        "parse_status": st.sampled_from(["exact", "fallback", "failed"]),
        "verdict": optional_texts,
        "error": optional_texts,
        "usage": st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), st.integers(0, 99)),
        "from_cache": st.booleans(),
    }
).map(lambda d: {k: d[k] for k in JudgeCall.model_fields})  # the runner's order
imported = st.fixed_dictionaries(
    {},
    optional={
        "released_prediction": optional_texts,
        "released_score": json_values,
        "released_success": st.booleans(),
        "released_value": st.none() | floats,
        "released_id": st.none() | st.integers(0, 10**6) | texts,
        "source_row": texts,
    },
).map(lambda d: {k: d[k] for k in OPTIONAL_KEYS if k in d})  # the importers' order


@SETTINGS
@given(
    question=questions,
    generation=generations,
    variant=texts,
    repeat=st.integers(0, 9),
    judge=st.none() | judges,
    regex=st.none() | optional_texts.map(lambda t: {"regex_prediction": t}),
)
def test_evaluate_is_record_validation(
    question: Question,
    generation: Generation,
    variant: str,
    repeat: int,
    judge: dict[str, Any] | None,
    regex: dict[str, Any] | None,
) -> None:
    extra: dict[str, Any] = {**(regex or {}), **({"judge": judge} if judge else {})}
    with mock.patch.object(evaluate_module, "_timestamp", lambda: STAMP):
        got = evaluate(question, pipe(), REQUEST, generation, model="m", variant=variant, repeat=repeat, extra=extra)
    want = reference(
        question, pipe(), REQUEST, generation, model="m", variant=variant, repeat=repeat, extra=extra
    ).model_copy(update={"timestamp": STAMP})
    assert type(got) is type(want)
    for name in type(want).model_fields:
        assert getattr(got, name) == getattr(want, name), name
    assert got.model_fields_set == want.model_fields_set
    assert got.model_dump_json() == want.model_dump_json()
    data = got.model_dump(mode="json")
    # The optional keys written are exactly those given, after every other field.
    assert [k for k in data if k in OPTIONAL_KEYS] == [k for k in OPTIONAL_KEYS if k in extra]
    assert list(data)[: len(data) - len(extra)] == [k for k in Record.model_fields if k not in OPTIONAL_KEYS]
    if got.invalid_reason is not None:
        assert got.invalid_stage == INVALID_STAGE[got.invalid_reason] and not got.valid


def _stored(question: Question, generation: Generation, extra: dict[str, Any]) -> dict[str, Any]:
    record = evaluate(question, pipe(), REQUEST, generation, model="m")
    return {
        **record.model_dump(mode="json"),
        **{k: extra[k] for k in OPTIONAL_KEYS if k in extra},
        **{k: v for k, v in extra.items() if k not in OPTIONAL_KEYS},
    }


@SETTINGS
@given(question=questions, generation=generations, extra=imported, judge=st.none() | judges)
def test_a_line_read_back_and_written_again_is_the_same_line(
    question: Question, generation: Generation, extra: dict[str, Any], judge: dict[str, Any] | None
) -> None:
    stored = _stored(question, generation, {**extra, **({"judge": judge} if judge else {})})
    line = _record_line(stored)
    again = Record.model_validate(orjson.loads(line)).model_dump(mode="json")
    assert _record_line(again) == line


@SETTINGS
@given(
    key=st.text(min_size=1, max_size=20).filter(lambda k: k not in Record.model_fields),
    value=json_values,
    position=st.integers(0, 3),
)
def test_an_unknown_key_is_one_error_naming_file_line_and_key(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: Any, position: int
) -> None:
    path = tmp_path_factory.mktemp("run") / "records.jsonl"
    lines = []
    for i in range(4):
        data = _stored(QUESTION.model_copy(update={"id": f"q{i}", "index": i}), Generation(text="Answer: B"), {})
        if i == position:
            data[key] = value
        lines.append(_record_line(data) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(BadRecord) as raised:
        list(read_records(path))
    assert str(raised.value) == (
        f"{path}:{position + 1}: not a record: unknown key {key!r} (not a field of "
        "benchaudit.record/1; written by a newer benchaudit, or edited by hand?)"
    )
    kept = list(read_records(path, skip_bad=True, on_skipped=lambda message: None))
    assert [r["question_id"] for r in kept] == [f"q{i}" for i in range(4) if i != position]


def test_what_the_importers_and_the_judge_write_still_reads() -> None:
    """Every key the importers write (AthenaBench's and CTI-Bench's released values) is declared: a record
    of each kind, as the importers build it, validates and is written back unchanged."""
    base = _stored(QUESTION, Generation(text="Answer: B"), {})
    athena = {
        **base,
        "released_prediction": "B",
        "released_score": 1,
        "released_success": True,
        "released_value": 1.0,
        "released_id": 17,
        "source_row": "MCQ-scored.jsonl: row 17",
    }
    athena_multi = {**athena, "released_score": {"correct": 1, "plausible": 1}, "released_value": None}
    cti = {**base, "released_prediction": "B", "source_row": "cti-mcq-responses.tsv: row 3"}
    judged = {
        **base,
        "regex_prediction": None,
        "judge": {
            "model": "j",
            "purpose": "extraction",
            "prompt_version": "1",
            "raw_output": "B",
            "parse_status": "exact",
            "verdict": "B",
            "error": None,
        },
    }
    for stored in (athena, athena_multi, cti):
        assert Record.model_validate(stored).model_dump(mode="json") == stored
    # A judge record from before judge.usage / judge.from_cache were written reads with their defaults.
    assert Record.model_validate(judged).model_dump(mode="json")["judge"] == {
        **judged["judge"],
        "usage": {},
        "from_cache": False,
    }


def test_a_hand_made_extraction_and_score_reach_the_record_as_given() -> None:
    extraction = Extraction(prediction="B", answer_text="Answer: B", detail="judge (exact)")
    record = evaluate(
        QUESTION,
        pipe(),
        REQUEST,
        Generation(text="Answer: B"),
        model="m",
        extraction=extraction,
        score=Score(value=0.25, correct=False, extras={"plausible": 1.0}),
    )
    assert (record.prediction, record.score, record.score_extras) == ("B", 0.25, {"plausible": 1.0})
    assert _dt.datetime.fromisoformat(record.timestamp).tzinfo is not None
    assert Path(__file__).name not in record.model_dump_json()
