"""The record schema: everything known about one item, the contract between the stages and the store.

One :class:`Record` per question x model x variant x repeat is written to
``records.jsonl``; offline re-scoring, aggregation, compare and export read it back.
Pure: the run-directory store (:mod:`pytest_benchaudit.runs.store`) does the I/O.

Every key a record may carry is a declared field of :class:`Record` (``extra="forbid"``): a line
with a key the schema does not know is refused when read, naming ``file:line`` and the key, so a
typo or a field from a newer version is never carried along silently.  :class:`RecordCore` holds
the fields every record has; :class:`Record` adds two groups that exist only on some records and
are left out of the dump when they were never set (:data:`OPTIONAL_KEYS`), so that a record without
them is written exactly as before they were declared:

- ``regex_prediction`` / ``judge``: an LLM judge's call (``--judge``) and, for judge extraction,
  what the pipeline's own rule read (in that order, the order the runner has always written);
- ``released_*`` / ``source_row``: what a published run said about the item (``benchaudit import``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from pytest_benchaudit.pipeline.types import ContinuationLogprobs, InvalidReason, InvalidStage

__all__ = ["JudgeCall", "OPTIONAL_KEYS", "RECORD_VERSION", "Record", "RecordCore"]

RECORD_VERSION = "benchaudit.record/1"


class JudgeCall(BaseModel):
    """What a record keeps of one LLM-judge call (``record["judge"]``), as the runner writes it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    model: str
    purpose: Literal["extraction", "grading"]
    prompt_version: str
    raw_output: str
    parse_status: str
    verdict: str | None
    error: str | None = None
    # Recorded since the usage table counts judge tokens; older judge records read as none.
    usage: dict[str, Any] = Field(default_factory=dict)
    from_cache: bool = False


class RecordCore(BaseModel):
    """The fields every record has: what was asked, what came back, how it was read and scored.

    What :func:`~pytest_benchaudit.scoring.evaluate.evaluate` builds for an item without a judge (the
    run's and rescore's hot path: no optional field to validate, dump and leave out)."""

    # Built at the first record, not while pytest starts up (the run's first answer comes later).
    model_config = ConfigDict(extra="forbid", defer_build=True)

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
    invalid_reason: InvalidReason | None = None
    invalid_stage: InvalidStage | None = None
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
    earlier_outputs: list[str] = Field(
        default_factory=list,
        description="raw outputs of earlier asks whose answer could not be read (inference.reask_on_invalid)",
    )
    latency_s: float = 0.0
    attempts: int = 1
    served_model: str | None = None
    from_cache: bool = Field(
        default=False, description="the generation came from the generation cache, not from a request sent in this run"
    )
    timestamp: str = ""


class Record(RecordCore):
    """Everything a record may carry (the schema every ``records.jsonl`` line is read against):
    :class:`RecordCore` and the keys only some records have (:data:`OPTIONAL_KEYS`), which are left
    out of the dump when they were never set."""

    regex_prediction: str | None = Field(
        default=None,
        description="judge extraction: what the pipeline's regex rule read (None: nothing), for judge agreement",
    )
    judge: JudgeCall | None = Field(default=None, description="the LLM judge's call (--judge)")
    released_prediction: str | None = Field(
        default=None, description="an imported run: the released extracted answer, as published"
    )
    released_score: JsonValue = Field(
        default=None,
        description="an imported run: the released per-item score "
        "as published (a number, or an object for a multi-part score)",
    )
    released_success: bool | None = Field(default=None, description="an imported run: the released 'success' flag")
    released_value: float | None = Field(
        default=None,
        description="an imported run: the released score on "
        "this record's metric scale (None: the released aggregation leaves "
        "the row out)",
    )
    released_id: int | str | None = Field(default=None, description="an imported run: the released row id")
    source_row: str | None = Field(
        default=None, description="an imported run: which row of which published file the record was read from"
    )

    # The optional keys never set are left out of every dump (model_dump, model_dump_json): a record
    # without a judge or an import's values is written exactly as before those fields were declared
    # (``regex_prediction`` set to None is kept: "the rule read nothing" is not "not asked").  Passed
    # to pydantic as an ``exclude`` set: a wrap model_serializer did the same at ~2x the cost of a dump
    # (~5 us more per record).  A Record is never a field of
    # another model; one that became one would be dumped with these keys as null.
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """:meth:`pydantic.BaseModel.model_dump`, the optional keys never set left out."""
        return super().model_dump(**self._excluding_unset_optional(kwargs))

    def model_dump_json(self, **kwargs: Any) -> str:
        """:meth:`pydantic.BaseModel.model_dump_json`, the optional keys never set left out."""
        return super().model_dump_json(**self._excluding_unset_optional(kwargs))

    def _excluding_unset_optional(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        given = self.model_fields_set
        # A plain set: pydantic-core takes a frozenset ~7 us slower.
        unset = set(OPTIONAL_KEYS) if given.isdisjoint(_OPTIONAL_SET) else set(_OPTIONAL_SET - given)
        if unset:
            exclude = kwargs.get("exclude")
            if exclude is None:
                kwargs["exclude"] = unset
            elif isinstance(exclude, dict):
                kwargs["exclude"] = {**dict.fromkeys(unset, True), **exclude}
            else:
                kwargs["exclude"] = unset | set(exclude)
        return kwargs


# The fields only some records carry, in declaration order.
OPTIONAL_KEYS: tuple[str, ...] = (
    "regex_prediction",
    "judge",
    "released_prediction",
    "released_score",
    "released_success",
    "released_value",
    "released_id",
    "source_row",
)
_OPTIONAL_SET = frozenset(OPTIONAL_KEYS)
