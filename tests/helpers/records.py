"""evaluate() written out by hand, field by field (the reference the record tests compare evaluate() with),
and the question and request they use."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from helpers import SUITES
from pytest_benchaudit.dataset.suites import load_suite
from pytest_benchaudit.pipeline.record import RECORD_VERSION, Record, RecordCore
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import INVALID_STAGE, Extraction, Generation, Message, Question, Request, Score
from pytest_benchaudit.scoring import extract as _extract
from pytest_benchaudit.scoring import metrics as _scoring

STAMP = "2026-12-01T13:00:00+00:00"


def reference(
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
) -> RecordCore:
    """evaluate() by hand: every field through Record(...) (RecordCore(...) without extra fields); evaluate
    sets every field of a record but the optional ones (those of ``extra``)."""
    if extraction is None:
        extraction = _extract.extract(pipeline.extraction.rule, generation, question, pipeline.extraction.reasoning)
    if score is None:
        score = _scoring.score(pipeline.scoring.metric, extraction, question, resources)
    reason = extraction.invalid_reason
    return (Record if extra else RecordCore)(
        record_version=RECORD_VERSION,
        item_id=item_id,
        benchmark=question.benchmark,
        task=question.task,
        question_id=question.id,
        question_index=question.index,
        model=model,
        variant=variant,
        repeat=repeat,
        pipeline=pipeline.name,
        pipeline_hash=pipeline.hash,
        upstream_hash=pipeline.upstream_hash,
        request=request.model_dump(mode="json") if isinstance(request, Request) else dict(request),
        raw_output=generation.text,
        reasoning=generation.reasoning,
        finish_reason=generation.finish_reason,
        error=generation.error,
        prediction=extraction.prediction,
        valid=extraction.valid,
        invalid_reason=reason,
        invalid_stage=INVALID_STAGE.get(reason) if reason else None,
        extraction_detail=extraction.detail,
        gold=question.gold,
        score=score.value,
        correct=score.correct,
        score_extras=score.extras,
        metric=pipeline.scoring.metric,
        question_meta=question.meta,
        question_labels=list(question.choices),
        top_logprobs=[dict(d) for d in generation.top_logprobs[:1]] if generation.top_logprobs else None,
        continuations=list(generation.continuations) if generation.continuations is not None else None,
        usage=generation.usage,
        asks=1,
        earlier_outputs=[],
        latency_s=round(generation.latency_s, 4),
        attempts=generation.attempts,
        served_model=generation.served_model,
        from_cache=generation.from_cache,
        timestamp=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        **dict(extra or {}),
    )


def pipe(bench: str = "seceval", task: str = "mcq", layer: str = "standardized") -> Pipeline:
    """A pipeline of one of the packaged suites."""
    return load_suite(SUITES / bench / "suite.toml").pipeline(task, layer)


QUESTION = Question(
    benchmark="seceval",
    task="mcq",
    id="q7",
    index=6,
    text="Which?",
    gold="B",
    choices={"A": "one", "B": "two", "C": "three", "D": "four"},
    meta={"topic": "crypto", "n": 3},
)
REQUEST = Request(
    mode="chat",
    messages=(Message(role="user", content="Which? A. one"),),
    params={"temperature": 0.0, "max_tokens": 64, "stop": ["\n\n"]},
    adjustments=("raised",),
)
