"""evaluate() builds the record through Record validation (the public API): the very record, field set,
dump and records.jsonl line that ``Record(...)`` gives, for every kind of outcome; every key is declared
(``extra="forbid"``) and the optional ones are written only when set."""

from __future__ import annotations

import datetime as _dt
from typing import Any, get_args

import orjson
import pytest
from pydantic import ValidationError

from helpers.records import QUESTION, REQUEST, STAMP, pipe, reference
from pytest_benchaudit.pipeline.record import OPTIONAL_KEYS, Record, RecordCore
from pytest_benchaudit.pipeline.types import (
    ENDPOINT_DOWN_PREFIX,
    INVALID_REASONS,
    INVALID_STAGE,
    ContinuationLogprobs,
    Extraction,
    Generation,
    InvalidReason,
    Score,
)
from pytest_benchaudit.runs.store import _record_line
from pytest_benchaudit.scoring import evaluate as evaluate_module
from pytest_benchaudit.scoring.evaluate import evaluate

JUDGE = {
    "judge": {
        "model": "judge:j",
        "purpose": "extraction",
        "prompt_version": "1",
        "raw_output": "B",
        "parse_status": "exact",
        "verdict": "B",
        "error": None,
    },
    "regex_prediction": None,
}

CASES: dict[str, dict[str, Any]] = {
    "correct": dict(
        generation=Generation(
            text="Answer: B",
            usage={"prompt_tokens": 9, "completion_tokens": 2},
            latency_s=0.123456,
            served_model="m-1",
            finish_reason="stop",
        )
    ),
    "wrong": dict(generation=Generation(text="Answer: D", latency_s=1.0, attempts=2)),
    "from_cache": dict(generation=Generation(text="Answer: A", from_cache=True)),
    "inference_error": dict(generation=Generation(error="HTTP 500: boom (gave up after 3 attempts)", attempts=3)),
    "endpoint_down": dict(generation=Generation(error=ENDPOINT_DOWN_PREFIX + "12 timeouts in a row; not asked")),
    "empty": dict(generation=Generation(text="", finish_reason="stop")),
    "truncated": dict(generation=Generation(text="Let me think", finish_reason="length")),
    "unclosed_reasoning": dict(generation=Generation(text="<think>hmm, A or B", finish_reason="stop")),
    "unparseable": dict(generation=Generation(text="I am not sure which option is meant here.")),
    "reasoning_field": dict(generation=Generation(text="Answer: B", reasoning="because B")),
    "logprobs": dict(generation=Generation(text="B", top_logprobs=({"B": -0.1, "A": -2.5}, {"x": -1.0}))),
    "judge_error_with_extras": dict(
        generation=Generation(text="Answer: B"),
        extra=JUDGE,
        extraction=Extraction(
            invalid_reason="judge_error", answer_text="Answer: B", detail="unreadable judge verdict: '??'"
        ),
    ),
    "judge_verdict": dict(
        generation=Generation(text="Answer: B"),
        extra=JUDGE,
        extraction=Extraction(prediction="B", answer_text="Answer: B", detail="judge (exact)"),
        score=Score(value=1.0, correct=True),
    ),
    "score_extras": dict(
        generation=Generation(text="Answer: C"), score=Score(value=0.5, correct=False, extras={"plausible": 1.0})
    ),
    "stored_request_mapping": dict(
        generation=Generation(text="Answer: B"),
        request={"mode": "chat", "messages": [{"role": "user", "content": "x"}]},
    ),
    "variant_and_item": dict(
        generation=Generation(text="Answer: B"),
        variant="max_tokens=5",
        item_id="suites/seceval/suite.toml::mcq::q0007[m|max_tokens=5]",
    ),
    # Values validation converts or refuses (a bool index, an int meta key): converted or refused, as Record(...) does.
    "hand_made_question": dict(
        generation=Generation(text="Answer: B"),
        question=QUESTION.model_copy(update={"index": True, "choices": {"A": "x"}}),
    ),
    "invalid_meta_key": dict(
        generation=Generation(text="Answer: B"), question=QUESTION.model_copy(update={"meta": {1: "an int key"}})
    ),
    # inference.request = "loglikelihood": the continuations' echoed log-probabilities are stored as read.
    "loglikelihood": dict(
        generation=Generation(
            continuations=(
                ContinuationLogprobs(continuation=" A", tokens=(" A",), logprobs=(-2.0,)),
                ContinuationLogprobs(continuation=" B", tokens=(" B",), logprobs=(-0.5,)),
                ContinuationLogprobs(continuation=" C", missing="a continuation token's log-probability is null"),
                ContinuationLogprobs(continuation=" D", tokens=(" D",), logprobs=(-3.0,)),
            )
        )
    ),
    "coerced_latency": dict(
        generation=Generation.model_construct(text="Answer: B", latency_s=2, attempts=1, usage={}, top_logprobs=None)
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_record_and_line_are_those_of_record_validation(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = dict(CASES[case])
    generation = kwargs.pop("generation")
    question = kwargs.pop("question", QUESTION)
    request = kwargs.pop("request", REQUEST)
    p = pipe()
    monkeypatch.setattr(evaluate_module, "_timestamp", lambda: STAMP)
    try:
        want = reference(question, p, request, generation, model="m", **kwargs)
    except ValidationError as err:
        with pytest.raises(ValidationError) as raised:
            evaluate(question, p, request, generation, model="m", **kwargs)
        assert raised.value.errors() == err.errors()
        return
    want = want.model_copy(update={"timestamp": STAMP})
    got = evaluate(question, p, request, generation, model="m", **kwargs)
    assert got == want and type(got) is type(want) is (Record if kwargs.get("extra") else RecordCore)
    for name in Record.model_fields:  # field by field: value and type (a RecordCore has no optional field)
        if name not in type(want).model_fields:
            assert not hasattr(got, name), name
            continue
        assert getattr(got, name) == getattr(want, name), name
        assert type(getattr(got, name)) is type(getattr(want, name)), name
    assert got.model_fields_set == want.model_fields_set
    assert got.__pydantic_extra__ is None and want.__pydantic_extra__ is None  # extra="forbid"
    assert repr(got) == repr(want)
    assert list(got.__dict__) == list(type(want).model_fields)
    assert got.model_dump() == want.model_dump()
    # What the runner writes: the JSON-mode dump with asks / earlier_outputs set, as one records.jsonl line.
    lines = []
    for record in (got, want):
        data = record.model_dump(mode="json")
        data["asks"], data["earlier_outputs"] = 2, ["[error] first try"]
        lines.append(_record_line(data))
    assert lines[0] == lines[1]
    assert orjson.dumps(got.model_dump(mode="json")) == orjson.dumps(want.model_dump(mode="json"))
    assert got.model_dump_json() == want.model_dump_json()
    # The optional keys are in the dump exactly when they were given.
    given = set(dict(kwargs.get("extra") or {}))
    assert set(got.model_dump(mode="json")) == set(Record.model_fields) - (set(OPTIONAL_KEYS) - given)
    assert set(RecordCore.model_fields) == set(Record.model_fields) - set(OPTIONAL_KEYS)


def test_a_plain_record_is_written_as_before_the_optional_keys_were_declared() -> None:
    """The line of a record without a judge or an import's values: the keys (and their order) it had
    when Record allowed extra keys and declared none of these."""
    record = evaluate(QUESTION, pipe(), REQUEST, Generation(text="Answer: B"), model="m")
    keys = list(record.model_dump(mode="json"))
    assert keys == [name for name in Record.model_fields if name not in OPTIONAL_KEYS]
    # The same record read back against the whole schema is written the same way.
    assert Record.model_validate(record.model_dump()).model_dump_json() == record.model_dump_json()
    assert keys[-1] == "timestamp"
    assert not set(OPTIONAL_KEYS) & set(orjson.loads(record.model_dump_json()))


def test_judge_keys_keep_the_order_the_runner_wrote() -> None:
    """regex_prediction then judge, after timestamp: where extra="allow" put them; a regex_prediction
    of None (the rule read nothing) is kept, it is not 'not asked'."""
    extra = {"regex_prediction": None, "judge": JUDGE["judge"]}
    record = evaluate(
        QUESTION,
        pipe(),
        REQUEST,
        Generation(text="Answer: B"),
        model="m",
        extra=extra,
        extraction=Extraction(prediction="B", answer_text="Answer: B", detail="judge (exact)"),
    )
    data = record.model_dump(mode="json")
    assert list(data)[-3:] == ["timestamp", "regex_prediction", "judge"]
    assert data["regex_prediction"] is None
    assert data["judge"] == {**JUDGE["judge"], "usage": {}, "from_cache": False}


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        evaluate(QUESTION, pipe(), REQUEST, Generation(text="Answer: B"), model="m", extra={"judgee": {}})
    assert [(e["type"], e["loc"]) for e in raised.value.errors()] == [("extra_forbidden", ("judgee",))]
    stored = evaluate(QUESTION, pipe(), REQUEST, Generation(text="Answer: B"), model="m").model_dump(mode="json")
    with pytest.raises(ValidationError, match="extra_forbidden|Extra inputs"):
        Record.model_validate({**stored, "released_predicton": "B"})


def test_invalid_reason_is_one_of_the_declared_reasons() -> None:
    """The Literal is the one list: every reason has a stage, a record takes no other string, and the
    JSON holds the reason's own string."""
    assert set(INVALID_STAGE) == INVALID_REASONS == set(get_args(InvalidReason))
    stored = evaluate(QUESTION, pipe(), REQUEST, Generation(text="no idea"), model="m").model_dump(mode="json")
    assert stored["invalid_reason"] == "unparseable" and stored["invalid_stage"] == "extraction"
    with pytest.raises(ValidationError, match="invalid_reason"):
        Record.model_validate({**stored, "invalid_reason": "unparsable"})
    with pytest.raises(ValidationError, match="invalid_stage"):
        Record.model_validate({**stored, "invalid_stage": "scoring"})


def test_the_record_owns_its_dicts() -> None:
    """As validation did, the record copies the question's meta, the generation's usage and the score's extras."""
    generation = Generation(text="Answer: B", usage={"prompt_tokens": 1})
    score = Score(value=0.0, correct=False, extras={"plausible": 0.0})
    record = evaluate(QUESTION, pipe(), REQUEST, generation, model="m", score=score)
    assert record.question_meta == QUESTION.meta and record.question_meta is not QUESTION.meta
    assert record.usage is not generation.usage and record.score_extras is not score.extras
    record.question_meta["topic"] = "changed"
    assert QUESTION.meta["topic"] == "crypto"


def test_timestamp_is_utc_now_to_the_second() -> None:
    before = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
    stamp = evaluate_module._timestamp()
    after = _dt.datetime.now(_dt.UTC)
    assert before <= _dt.datetime.fromisoformat(stamp) <= after
    assert stamp == _dt.datetime.fromisoformat(stamp).isoformat(timespec="seconds")


def test_bad_caller_values_still_fail_validation() -> None:
    with pytest.raises(ValidationError, match="model"):
        evaluate(QUESTION, pipe(), REQUEST, Generation(text="Answer: B"), model=None)  # type: ignore[arg-type]
