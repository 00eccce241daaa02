"""The record schema: everything known about one item, the contract between the stages and the store.

One :class:`Record` per question x model x variant x repeat is written to
``records.jsonl``; offline re-scoring, aggregation, compare and export read it back.
Pure: the run-directory store (:mod:`pytest_benchaudit.runs.store`) does the I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_benchaudit.pipeline.types import ContinuationLogprobs

__all__ = ["RECORD_VERSION", "Record"]

RECORD_VERSION = "benchaudit.record/1"


class Record(BaseModel):
    """Everything known about one item: what was asked, what came back, how it was read and scored."""

    # Built at the first record, not while pytest starts up (the run's first answer comes later).
    model_config = ConfigDict(extra="allow", defer_build=True)

    record_version: str = RECORD_VERSION
    item_id: str = ""
    benchmark: str
    task: str
    question_id: str
    question_index: int
    model: str
    variant: str = ""
    # Which of the K asks of ``inference.repeats`` this is (0-based); the records of one question x
    # model x variant differ only here.  A record from before the field reads as repeat 0.
    repeat: int = Field(default=0, ge=0)
    pipeline: str
    pipeline_hash: str
    upstream_hash: str = ""
    request: dict[str, Any]
    raw_output: str
    reasoning: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    prediction: str | None = None
    valid: bool
    invalid_reason: str | None = None
    invalid_stage: str | None = None
    extraction_detail: str = ""
    gold: str
    score: float
    correct: bool
    score_extras: dict[str, float] = Field(default_factory=dict)
    metric: str = ""
    question_meta: dict[str, Any] = Field(default_factory=dict)
    # What the downstream stages read besides the raw output, so a record can be re-scored
    # offline: the option labels of the question and the first tokens' top log-probabilities.
    question_labels: list[str] = Field(default_factory=list)
    top_logprobs: list[dict[str, float]] | None = None
    # inference.request = "loglikelihood": each continuation's echoed tokens and log-probabilities
    # (what lm_eval_loglikelihood reads), None for a generated answer.
    continuations: list[ContinuationLogprobs] | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    asks: int = 1
    earlier_outputs: list[str] = Field(default_factory=list, description="raw outputs of earlier asks "
                                       "whose answer could not be read (inference.reask_on_invalid)")
    latency_s: float = 0.0
    attempts: int = 1
    served_model: str | None = None
    from_cache: bool = Field(default=False, description="the generation came from the generation cache, not "
                             "from a request sent in this run")
    timestamp: str = ""
