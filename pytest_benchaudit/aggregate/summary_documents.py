"""The shape of ``summary.json``: task results, benchmark scores, variant deltas, gates, ranks, usage.

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: the summary is the JSON
object it is written as, typed key by key for the checker, validated where it is read
(:data:`SUMMARY` with ``extra="forbid"``) and published as a JSON Schema (``docs/schemas/``).

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import NotRequired

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

# Declared in pipeline/record_documents.py (inference/usage.py makes the rows); re-exported here, where summary.json is.
from pytest_benchaudit.pipeline.record_documents import UsageRow, UsageSummary

__all__ = [
    "BenchmarkScore",
    "BreakdownCell",
    "GateResult",
    "ModelRankings",
    "SUMMARY",
    "SkippedTask",
    "StageRates",
    "SummaryDocument",
    "TASK_RESULT",
    "TaskResult",
    "TauRow",
    "UsageRow",
    "UsageSummary",
    "VariantDelta",
]

_FORBID = ConfigDict(extra="forbid")


@with_config(_FORBID)
class StageRates(TypedDict):
    """Cumulative pass rates: through inference, through extraction (valid), correct."""

    inference_ok: float
    extraction_ok: float
    correct: float


@with_config(_FORBID)
class BreakdownCell(TypedDict):
    """One value of an ``aggregation.by`` field: how many items, and their score."""

    n: int
    score: float | None


@with_config(_FORBID)
class TaskResult(TypedDict):
    """One benchmark x task x model x variant (a ``summary.json`` ``results`` row): both
    denominators, the stage rates, the headline and its error bars."""

    benchmark: str
    task: str
    model: str
    variant: str
    pipeline: str
    pipeline_hash: str
    metric: str
    lower_is_better: bool
    denominator: str
    n: int
    n_valid: int
    n_correct: int
    score: float | None  # under the pipeline's denominator; None while it is unspecified
    score_total: float | None
    score_valid: float | None
    invalid_rate: float
    invalid_reasons: dict[str, int]
    stage_rates: StageRates
    ci95: list[float] | None  # over the questions, treated as independent (docs/statistics.md)
    # How ci95 was made: "wilson", "wilson_effective_n", "student_t" (aggregate/intervals.py); old summaries lack it.
    ci95_method: NotRequired[str | None]
    # What an invalid answer scores where it is counted (score_total); old summaries lack both.
    invalid_credit: NotRequired[float]
    invalid_score: NotRequired[float | None]
    # Repeated generations (docs/statistics.md); old summaries lack them.
    repeats: NotRequired[int]
    reducer: NotRequired[str]
    n_questions: NotRequired[int | None]
    se: NotRequired[float | None]
    se_clustered: NotRequired[float | None]
    ci95_clustered: NotRequired[list[float] | None]
    ci95_clustered_method: NotRequired[str | None]  # "wilson_effective_n" or "cluster_t"
    clustered_by: NotRequired[str | None]  # the aggregation.by field the clustered numbers group by
    n_groups: NotRequired[int | None]  # G: the groups among the headline's questions (t has G - 1 df)
    sampling_sd: NotRequired[float | None]
    retest_agreement: NotRequired[float | None]
    extras: NotRequired[dict[str, float]]  # per-item numbers beside the headline (e.g. TAA plausible)
    breakdown: NotRequired[dict[str, dict[str, BreakdownCell]]]  # aggregation.by field -> value -> cell


@with_config(_FORBID)
class BenchmarkScore(TypedDict):
    """Per benchmark x model x variant: the tasks' headlines combined by ``aggregation.method``
    (``score`` None, with the reason in ``note``, when the tasks do not say how)."""

    benchmark: str
    model: str
    variant: str
    tasks: list[str]
    pipeline: str
    n: int
    score: float | None
    method: str | None
    note: str


@with_config(_FORBID)
class VariantDelta(TypedDict):
    """How one ``--vary`` variant moved a task's score against the base, and which stage moved it."""

    benchmark: str
    task: str
    model: str
    variant: str
    field: str | None
    value: JsonValue
    base_value: JsonValue
    kind: str | None
    same_as_base: bool
    metric: str
    lower_is_better: bool
    unit: str
    denominator: str
    base_denominator: str | None
    n: int
    base_n: int | None
    score: float | None
    base_score: float | None
    delta: float | None
    delta_pp: float | None
    better: bool | None
    invalid_rate: float
    base_invalid_rate: float | None
    stage_rates: StageRates
    base_stage_rates: StageRates | None
    stage_deltas: dict[str, float] | None
    contributions: dict[str, float] | None
    moved_by: str | None
    moved_by_detail: str
    invalid_reason_changes: dict[str, int] | None


@with_config(_FORBID)
class GateResult(TypedDict):
    """One ``--gate``: its text, whether it held, and the value it read (``interval``: for a ``ci_low``
    / ``ci_high`` gate, which interval it read, e.g. ``ci95_clustered (wilson_effective_n, 10 groups of
    topic)``; old summaries lack it)."""

    gate: str
    passed: bool
    detail: str
    interval: NotRequired[str | None]


@with_config(_FORBID)
class TauRow(TypedDict):
    """Kendall tau-b between two tasks' model rankings (at least 3 common models)."""

    task_a: str
    task_b: str
    tau: float | None
    p_value: float | None
    inversions: int
    n_models: int


@with_config(_FORBID)
class ModelRankings(TypedDict, total=False):
    """What a run with two or more models adds to ``summary.json`` (``{}`` with one model):
    ``ranks`` (task -> model -> rank, 1 = best) and ``tau_b`` between tasks."""

    ranks: dict[str, dict[str, float]]
    tau_b: list[TauRow]


@with_config(_FORBID)
class SkippedTask(TypedDict):
    """A task of a stored run that ``benchaudit rescore`` did not re-score, its records and why
    (the same row as run.json's ``skipped``, ``runs.run_meta.RescoreSkip``)."""

    task: str
    records: int
    reason: str


@with_config(_FORBID)
class SummaryDocument(TypedDict):
    """What ``summary.json`` holds.  ``variants`` is empty without ``--vary`` (an imported run's
    summary has none: ``benchaudit import`` writes results, benchmarks and gates only); ``ranks``
    (task -> model -> rank, 1 = best) and ``tau_b`` only when the run has two or more models;
    ``skipped`` only in a re-scored run's."""

    results: list[TaskResult]
    benchmarks: list[BenchmarkScore]
    gates: list[GateResult]
    variants: NotRequired[list[VariantDelta]]
    ranks: NotRequired[dict[str, dict[str, float]]]
    tau_b: NotRequired[list[TauRow]]
    usage: NotRequired[UsageSummary]
    skipped: NotRequired[list[SkippedTask]]


# Validators: built once (a TypeAdapter compiles its schema), used where a summary is read or written.
TASK_RESULT: TypeAdapter[TaskResult] = TypeAdapter(TaskResult)
SUMMARY: TypeAdapter[SummaryDocument] = TypeAdapter(SummaryDocument)
