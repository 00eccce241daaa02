"""From a generation to a record: the extraction and scoring stages for one item.

Pure: no pytest, no I/O.  The raw output is stored as it came back; reasoning is
handled only inside the extraction stage, so re-scoring a stored record with a
different ``extraction.reasoning`` gives what a new run would give.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Mapping

from pydantic import JsonValue

from pytest_benchaudit.pipeline.record import RECORD_VERSION, Record, RecordCore
from pytest_benchaudit.pipeline.record_documents import ContinuationRow, RecordExtras, RecordRow
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import (
    INVALID_STAGE,
    ContinuationLogprobs,
    Extraction,
    Generation,
    Question,
    Request,
    Score,
)
from pytest_benchaudit.scoring import extract as _extract
from pytest_benchaudit.scoring import metrics as _scoring
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["RecordExtras", "evaluate", "failure_message"]


def evaluate(
    question: Question,
    pipeline: Pipeline,
    request: Request | Mapping[str, JsonValue],
    generation: Generation,
    *,
    model: str,
    variant: str = "",
    repeat: int = 0,
    item_id: str = "",
    resources: Resources | None = None,
    extraction: Extraction | None = None,
    score: Score | None = None,
    extra: RecordExtras | None = None,
) -> RecordCore:
    """Run extraction and scoring on ``generation`` and build the item's record (a :class:`Record`
    when ``extra`` sets optional fields, else a :class:`RecordCore`: the same line either way).

    ``resources`` are the task's data files its metric reads (e.g. alias graphs).
    ``request`` may be a stored record's request (a mapping), taken over as it is.
    ``extraction`` / ``score`` given by the caller (an LLM judge's reading or verdict) replace
    the rule / metric; an invalid item scores the pipeline's ``scoring.invalid_credit``.  ``extra``
    sets optional fields of the record (:data:`~pytest_benchaudit.pipeline.record.OPTIONAL_KEYS`: the
    judge's call and ``regex_prediction``); a key the record does not declare is a ``ValidationError``.
    """
    if extraction is None:
        extraction = _extract.extract(pipeline.extraction.rule, generation, question, pipeline.extraction.reasoning)
    if score is None:
        # A prediction the metric cannot read comes back as an invalid extraction (unparseable).
        extraction, score = _scoring.score_item(
            pipeline.scoring.metric, extraction, question, resources, pipeline.scoring.invalid_credit
        )
    reason = extraction.invalid_reason
    # Every field a record has, typed as the row it is written as (RecordRow: mypy checks each value,
    # tests/pipeline/test_record_documents.py holds its keys and types equal to Record's); only the
    # optional fields (the judge's and an import's: ``extra``) are left to their defaults.
    fields: RecordRow = {
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
        "continuations": [_continuation_row(c) for c in generation.continuations]
        if generation.continuations is not None
        else None,
        "usage": generation.usage,
        "asks": 1,
        "earlier_outputs": [],
        "latency_s": round(generation.latency_s, 4),
        "attempts": generation.attempts,
        "served_model": generation.served_model,
        "from_cache": generation.from_cache,
        "timestamp": _timestamp(),
    }
    # Through validation, the public path: on a record's plain values it is the fastest one too (~6 us;
    # model_construct ~20 us and a hand-written check of the values' types ~5 us more), and a value
    # validation would convert or refuse (a conftest's hand-made question) is converted or refused.
    # Without extra fields, the record is a RecordCore: no optional key to validate, dump and leave out.
    if extra:
        return Record.model_validate({**fields, **extra})
    return RecordCore.model_validate(fields)


def _continuation_row(continuation: ContinuationLogprobs) -> ContinuationRow:
    """One continuation of a log-likelihood answer as the record's row holds it (validated back into a
    :class:`ContinuationLogprobs` by the record)."""
    row: ContinuationRow = {
        "continuation": continuation.continuation,
        "tokens": list(continuation.tokens),
        "logprobs": list(continuation.logprobs),
        "missing": continuation.missing,
    }
    # Set only where they tell something (ContinuationLogprobs leaves them out of its dump otherwise).
    if continuation.context_tokens is not None:
        row["context_tokens"] = continuation.context_tokens
    if continuation.prompt is not None:
        row["prompt"] = continuation.prompt
    if continuation.note is not None:
        row["note"] = continuation.note
    return row


_stamp: list[int | str | None] = [None, ""]  # [whole second, its ISO text]


def _timestamp() -> str:
    """UTC now to the second, ISO 8601 (``datetime.now(utc).isoformat(timespec="seconds")``),
    formatted once per second rather than once per record."""
    second = int(time.time())
    if second != _stamp[0]:
        _stamp[:] = [second, _dt.datetime.fromtimestamp(second, _dt.UTC).isoformat(timespec="seconds")]
    return str(_stamp[1])


def _start(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def failure_message(record: RecordCore | RecordRow) -> str:
    """The short message a failed item shows: gold, prediction, start of the raw output."""
    r = record if isinstance(record, dict) else record.model_dump()
    raw = _start(r["raw_output"]) if r["raw_output"] else "(empty)"
    if not r["valid"]:
        why = r["invalid_reason"]
        if why == "judge_error":  # the judge's own failure (HTTP error, unreadable verdict) is the reason
            why_judge = _start(r.get("extraction_detail") or "the judge failed", 200)
            return f"INVALID (judge_error): {why_judge} | gold {r['gold']!r}"
        error = r.get("error")
        if error:
            return f"INVALID ({why}): {_start(error, 200)} | gold {r['gold']!r}"
        return f"INVALID ({why}) at the {r['invalid_stage']} stage: gold {r['gold']!r}; raw output: {raw}"
    return f"wrong: gold {r['gold']!r}, predicted {r['prediction']!r} (score {r['score']:g}); raw output: {raw}"
