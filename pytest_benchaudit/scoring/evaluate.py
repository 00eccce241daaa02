"""From a generation to a record: the extraction and scoring stages for one item.

Pure: no pytest, no I/O.  The raw output is stored as it came back; reasoning is
handled only inside the extraction stage, so re-scoring a stored record with a
different ``extraction.reasoning`` gives what a new run would give.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Any, Mapping

from pytest_benchaudit.scoring import extract as _extract
from pytest_benchaudit.scoring import metrics as _scoring
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.record import RECORD_VERSION, Record
from pytest_benchaudit.pipeline.types import INVALID_STAGE, ContinuationLogprobs, Extraction, Generation, Question, Request, Score

__all__ = ["evaluate", "failure_message"]


def evaluate(
    question: Question,
    pipeline: Pipeline,
    request: Request | Mapping[str, Any],
    generation: Generation,
    *,
    model: str,
    variant: str = "",
    repeat: int = 0,
    item_id: str = "",
    resources: Mapping[str, Any] | None = None,
    extraction: Extraction | None = None,
    score: Score | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Record:
    """Run extraction and scoring on ``generation`` and build the item's record.

    ``resources`` are the task's data files its metric reads (e.g. alias graphs).
    ``request`` may be a stored record's request (a mapping), taken over as it is.
    ``extraction`` / ``score`` given by the caller (an LLM judge's reading or verdict) replace
    the rule / metric; an invalid item scores the pipeline's ``scoring.invalid_credit``; ``extra`` fields (the judge's own record) are added to the record.
    """
    if extraction is None:
        extraction = _extract.extract(pipeline.extraction.rule, generation, question, pipeline.extraction.reasoning)
    if score is None:
        # A prediction the metric cannot read comes back as an invalid extraction (unparseable).
        extraction, score = _scoring.score_item(pipeline.scoring.metric, extraction, question, resources,
                                                pipeline.scoring.invalid_credit)
    reason = extraction.invalid_reason
    # Every field of Record, in its declaration order (the order of model_dump's keys).
    data: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "item_id": item_id,
        "benchmark": question.benchmark,
        "task": question.task,
        "question_id": question.id,
        "question_index": question.index,
        "model": model,
        "variant": variant,
        "repeat": repeat,
        "pipeline": pipeline.name,
        "pipeline_hash": pipeline.hash,
        "upstream_hash": pipeline.upstream_hash,
        "request": request.model_dump(mode="json") if isinstance(request, Request) else dict(request),
        "raw_output": generation.text,
        "reasoning": generation.reasoning,
        "finish_reason": generation.finish_reason,
        "error": generation.error,
        "prediction": extraction.prediction,
        "valid": extraction.valid,
        "invalid_reason": reason,
        "invalid_stage": INVALID_STAGE.get(reason) if reason else None,
        "extraction_detail": extraction.detail,
        "gold": question.gold,
        "score": score.value,
        "correct": score.correct,
        "score_extras": score.extras,
        "metric": pipeline.scoring.metric,
        "question_meta": question.meta,
        "question_labels": list(question.choices),
        "top_logprobs": [dict(d) for d in generation.top_logprobs[:1]] if generation.top_logprobs else None,
        "continuations": list(generation.continuations) if generation.continuations is not None else None,
        "usage": generation.usage,
        "asks": 1,
        "earlier_outputs": [],
        "latency_s": round(generation.latency_s, 4),
        "attempts": generation.attempts,
        "served_model": generation.served_model,
        "from_cache": generation.from_cache,
        "timestamp": _timestamp(),
    }
    if extra or not _as_validated(data):
        given = {k: v for k, v in data.items() if k not in _DEFAULTED}
        return Record.model_validate({**given, **dict(extra or {})})
    # Already what validation would store: the record is built without validating it again
    # (Record(...) was ~15 us of an item's ~0.6 ms).  Validation copies dict fields, so do we.
    data["score_extras"] = dict(data["score_extras"])
    data["question_meta"] = dict(data["question_meta"])
    data["usage"] = dict(data["usage"])
    record = Record.__new__(Record)
    object.__setattr__(record, "__dict__", data)
    object.__setattr__(record, "__pydantic_fields_set__", set(_GIVEN))
    object.__setattr__(record, "__pydantic_extra__", {})
    object.__setattr__(record, "__pydantic_private__", None)
    return record


_DEFAULTED = ("record_version", "asks", "earlier_outputs")  # fields evaluate leaves to their defaults
_GIVEN = frozenset(name for name in Record.model_fields if name not in _DEFAULTED)  # model_fields_set
_STR_TYPE = {str}
_OPTIONAL_STR_TYPES = {str, type(None)}
_FLOAT_TYPE = {float}


def _str_keys(d: Any) -> bool:
    return type(d) is dict and set(map(type, d)) <= _STR_TYPE


def _as_validated(f: dict[str, Any]) -> bool:
    """True when every value is already what ``Record`` validation would store (exact types, str
    keys).  Anything else (a conftest's hand-made question, an odd caller value) goes through
    ``Record`` validation, with its coercions and errors."""
    optional = (f["reasoning"], f["finish_reason"], f["error"], f["prediction"], f["invalid_reason"],
                f["invalid_stage"], f["served_model"])
    extras, logprobs = f["score_extras"], f["top_logprobs"]
    return (type(f["item_id"]) is str and type(f["benchmark"]) is str and type(f["task"]) is str
            and type(f["question_id"]) is str and type(f["model"]) is str and type(f["variant"]) is str
            and type(f["pipeline"]) is str and type(f["pipeline_hash"]) is str and type(f["upstream_hash"]) is str
            and type(f["raw_output"]) is str and type(f["extraction_detail"]) is str and type(f["gold"]) is str
            and type(f["metric"]) is str and set(map(type, optional)) <= _OPTIONAL_STR_TYPES
            and type(f["question_index"]) is int and type(f["attempts"]) is int
            and type(f["repeat"]) is int and f["repeat"] >= 0
            and type(f["score"]) is float and type(f["latency_s"]) is float
            and type(f["valid"]) is bool and type(f["correct"]) is bool and type(f["from_cache"]) is bool
            and _str_keys(f["request"]) and _str_keys(f["question_meta"]) and _str_keys(f["usage"])
            and (not extras or (_str_keys(extras) and set(map(type, extras.values())) <= _FLOAT_TYPE))
            and set(map(type, f["question_labels"])) <= _STR_TYPE
            and (logprobs is None or all(_str_keys(d) and set(map(type, d.values())) <= _FLOAT_TYPE
                                         for d in logprobs))
            and (f["continuations"] is None or all(type(c) is ContinuationLogprobs for c in f["continuations"])))


_stamp: list[Any] = [None, ""]  # [whole second, its ISO text]


def _timestamp() -> str:
    """UTC now to the second, ISO 8601 (``datetime.now(utc).isoformat(timespec="seconds")``),
    formatted once per second rather than once per record."""
    second = int(time.time())
    if second != _stamp[0]:
        _stamp[:] = [second, _dt.datetime.fromtimestamp(second, _dt.timezone.utc).isoformat(timespec="seconds")]
    return str(_stamp[1])


def _start(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def failure_message(record: Record | dict[str, Any]) -> str:
    """The short message a failed item shows: gold, prediction, start of the raw output."""
    r = record if isinstance(record, dict) else record.model_dump()
    raw = _start(r["raw_output"]) if r["raw_output"] else "(empty)"
    if not r["valid"]:
        why = r["invalid_reason"]
        if why == "judge_error":  # the judge's own failure (HTTP error, unreadable verdict) is the reason
            why_judge = _start(r.get("extraction_detail") or "the judge failed", 200)
            return f"INVALID (judge_error): {why_judge} | gold {r['gold']!r}"
        if r.get("error"):
            return f"INVALID ({why}): {_start(r['error'], 200)} | gold {r['gold']!r}"
        return f"INVALID ({why}) at the {r['invalid_stage']} stage: gold {r['gold']!r}; raw output: {raw}"
    return f"wrong: gold {r['gold']!r}, predicted {r['prediction']!r} (score {r['score']:g}); raw output: {raw}"
