"""Re-scoring stored records: new downstream results from stored raw outputs, no model, no pytest.

A record keeps everything the downstream stages read (raw output, reasoning field,
finish reason, error, first-token log-probabilities, option labels, gold, question
metadata), so extraction, scoring, denominator and aggregation can be changed after
the fact.  Upstream fields (dataset, prompt, inference) decide what the model was
asked: changing one of them needs new generations, and is refused with a message
naming the field ("inference.max_tokens: stored 5, asked 2048 — this needs new
generations").

Switching layers (``--pipeline standardized`` on a ``released`` run) applies the
*downstream* stages of that layer to the stored generations; its upstream fields
cannot be applied without asking the model again, so they stay as stored and the
new card lists them under ``notes`` (:func:`pytest_benchaudit.pipeline.layering.retarget`
makes that pipeline; this module rebuilds the stored one from its card and re-scores
each record under the new one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import cast

from pydantic import JsonValue

from pytest_benchaudit.pipeline.layering import UpstreamChange
from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError
from pytest_benchaudit.pipeline.types import ContinuationLogprobs, Extraction, Generation, Question, Score
from pytest_benchaudit.scoring.evaluate import evaluate
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.scoring.names import check_pipeline_names, rule_info
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = [
    "pipeline_from_card",
    "record_question",
    "record_generation",
    "rescore_records",
]


def _unflatten(fields: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for path, value in fields.items():
        node = out
        *heads, last = path.split(".")
        for head in heads:
            child = node.setdefault(head, {})
            if not isinstance(child, dict):
                raise TypeError(f"field {path!r} lies under {head!r}, which is a value, not a stage or group")
            node = child
        node[last] = value
    return out


def pipeline_from_card(card: PipelineCard) -> Pipeline:
    """Rebuild the pipeline a stored card describes (fields, name, reasons, notes)."""
    fields = _unflatten(card["fields"])
    return Pipeline.model_validate(
        {
            "name": card["pipeline"],
            "benchmark": card["benchmark"],
            "task": card["task"],
            **fields,
            "why": card.get("why", {}),
            "notes": list(card.get("notes", [])),
            "overrides": card.get("overrides", {}),
        }
    )


def record_question(rec: RecordRow) -> Question:
    """The parts of a question the downstream stages read, rebuilt from a record."""
    labels = rec.get("question_labels") or []
    return Question(
        benchmark=rec["benchmark"],
        task=rec["task"],
        id=str(rec["question_id"]),
        index=int(rec["question_index"]),
        gold=rec["gold"],
        choices={label: "" for label in labels},
        meta=rec.get("question_meta") or {},
    )


def record_generation(rec: RecordRow) -> Generation:
    """The stored generation, exactly as the endpoint returned it."""
    top = rec.get("top_logprobs")
    return Generation(
        text=rec.get("raw_output") or "",
        reasoning=rec.get("reasoning"),
        finish_reason=rec.get("finish_reason"),
        error=rec.get("error"),
        usage=rec.get("usage") or {},
        latency_s=rec.get("latency_s") or 0.0,
        attempts=rec.get("attempts") or 1,
        top_logprobs=tuple(top) if top else None,
        served_model=rec.get("served_model"),
        continuations=stored_continuations(rec),
    )


def stored_continuations(rec: RecordRow) -> tuple[ContinuationLogprobs, ...] | None:
    """A log-likelihood record's continuations (``inference.request = "loglikelihood"``), or ``None``."""
    stored = rec.get("continuations")
    return None if stored is None else tuple(ContinuationLogprobs.model_validate(c) for c in stored)


# Fields a re-scored record takes over from the stored one unchanged (what happened upstream).  The
# upstream hash too: re-scoring changes nothing that was asked, and the stored hash may cover what the
# fields do not hold (a template's text), which a pipeline rebuilt from the card cannot recompute.
_KEPT = (
    "item_id",
    "usage",
    "latency_s",
    "attempts",
    "served_model",
    "from_cache",
    "asks",
    "earlier_outputs",
    "timestamp",
    "upstream_hash",
)


def _check_names(pipeline: Pipeline, rec: RecordRow) -> None:
    try:
        check_pipeline_names(pipeline)
    except PipelineError as err:
        raise PipelineError(
            f"{rec['benchmark']}.{rec['task']}: {err} (a run made with a plugin's rule or metric "
            "is re-scored with that plugin installed and enabled: `benchaudit plugins` lists them)"
        ) from None


def rescore_records(
    records: Iterable[RecordRow],
    pipeline_for: Callable[[RecordRow], Pipeline],
    resources_for: Callable[[str, str], Resources] = lambda bench, task: {},
) -> list[RecordRow]:
    """Re-run extraction and scoring on each stored record under ``pipeline_for(record)``.

    Extra fields a source put on a record (e.g. ``released_score`` of imported runs)
    are kept; the fields the downstream stages produce are replaced.
    """
    out: list[RecordRow] = []
    checked: set[int] = set()
    for rec in records:
        pipeline = pipeline_for(rec)
        if id(pipeline) not in checked:  # a rule or metric no loaded code has: one error, not a KeyError
            _check_names(pipeline, rec)
            checked.add(id(pipeline))
        judged_extraction, judged_score = _stored_judgement(rec, pipeline)
        # The stored request (often most of a record's bytes) is only carried over: it is
        # kept out of validation and serialisation and put back as it was.
        new = evaluate(
            record_question(rec),
            pipeline,
            {},
            record_generation(rec),
            model=rec["model"],
            variant=rec.get("variant", ""),
            repeat=int(rec.get("repeat") or 0),
            resources=resources_for(rec["benchmark"], rec["task"]),
            extraction=judged_extraction,
            score=judged_score,
        ).model_dump(mode="json")
        new["request"] = rec["request"]
        stored: Mapping[str, object] = rec  # read by the names in _KEPT
        for key in _KEPT:
            if key in stored:
                new[key] = stored[key]
        extras = {k: v for k, v in rec.items() if k not in new}
        # Record's model_dump is a RecordRow (a test holds their keys and types equal); the extras are the
        # stored record's own keys: the row is built without a per-record validation (rescore's speed).
        out.append(cast(RecordRow, {**new, **extras}))
    return out


def _stored_judgement(rec: RecordRow, pipeline: Pipeline) -> tuple[Extraction | None, Score | None]:
    """A judge's stored reading / verdict, reused as it is: re-scoring offline cannot ask a judge.

    With ``extraction.rule = judge`` the stored prediction (or invalid reason) stands in for
    the rule; with a judge-graded metric the stored score stands in for the metric.  Other
    downstream changes (denominator, aggregation) apply on top.
    """
    info = METRIC_INFO.get(pipeline.scoring.metric)
    graded = bool(info and info.needs_judge)
    judged = rule_info(pipeline.extraction.rule).reads == "judge"  # as the rule declares (scoring.declarations)
    if not judged and not graded:
        return None, None
    if judged and not rec.get("judge") and rec.get("invalid_reason") is None and rec.get("prediction") is None:
        raise UpstreamChange(
            f"{rec['benchmark']}.{rec['task']} {rec['question_id']}: extraction.rule "
            f"{pipeline.extraction.rule!r} "
            "needs the judge's stored reading, and this record has none — run pytest with --judge"
        )
    extraction = Extraction(
        prediction=rec.get("prediction"),
        invalid_reason=rec.get("invalid_reason"),
        detail=rec.get("extraction_detail") or "",
        answer_text="",
    )
    score = Score(value=float(rec["score"]), correct=bool(rec["correct"])) if graded else None
    return extraction, score
