"""The shape of ``run.json``: how a run was made (the invocation, models, cards, checksums, its end).

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: run.json is the JSON
object it is written as, typed key by key for the checker, validated where it is read
(:data:`RUN_META` with ``extra="forbid"``) and published as a JSON Schema (``docs/schemas/``).

Four kinds of run write it, each with the keys it knows (so all but ``run_id`` are optional):

- a pytest run (:mod:`pytest_benchaudit.pytest_plugin.controller`): argv, pipeline, overrides, limit,
  vary, versions, models, cards, checksums, platform, warnings; ``resumed``/``resume_argv`` once
  resumed, ``generation_cache``, ``max_cost``, ``incomplete``, ``workers`` where they apply; ``ended``,
  ``n_records`` and ``exitstatus`` at its end;
- an imported run (``importers/``): ``source`` (``{kind, path, ...}``) instead of argv, and the
  released numbers it was checked against (``scores``, ``agreement``, ``released_scores``,
  ``task_overrides``); an imported log also writes ``import_report.json`` (the harness's metric beside ours);
- a re-scored run (``benchaudit rescore``): ``source`` (kind ``rescore``), ``skipped``, ``rescored_at``;
- one layer of a ``--pipelines`` run split by ``benchaudit audit`` (``source`` kind ``layer``).

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import Required

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

# RunModel is declared in pipeline/record_documents.py (inference's ModelSpec.public() makes it) and re-exported here.
from pytest_benchaudit.pipeline.record_documents import Cards, CardWarning, RunModel

__all__ = [
    "GenerationCache",
    "Incomplete",
    "MaxCost",
    "Platform",
    "RUN_META",
    "RescoreSkip",
    "RunMeta",
    "RunModel",
    "RunSource",
    "TaskOverride",
    "WorkerInfo",
    "run_layers",
    "not_recorded",
]

_FORBID = ConfigDict(extra="forbid")


@with_config(_FORBID)
class Platform(TypedDict):
    system: str
    machine: str
    python: str


@with_config(_FORBID)
class GenerationCache(TypedDict):
    """The generation caches of every process of the run, summed."""

    enabled: bool
    hits: int
    misses: int
    disabled: list[str]  # why a cache was turned off, each reason once


@with_config(_FORBID)
class MaxCost(TypedDict):
    """``--max-cost``: the budget and how many items it kept from being asked."""

    usd: float
    not_asked: int


@with_config(_FORBID)
class Incomplete(TypedDict):
    """Per model whose endpoint went down: how many questions were not asked, and why."""

    not_asked: int
    reason: str


@with_config(_FORBID)
class WorkerInfo(TypedDict, total=False):
    """An xdist worker as it said at its end (``workers``): its host, folders and gateway."""

    id: Required[str]
    tx: str  # the gateway spec, secrets masked (workers on other hosts)
    elsewhere: bool
    hostname: str
    cwd: str
    data_dir: str
    data_dir_origin: str
    cache_dir: str | None


@with_config(_FORBID)
class RunSource(TypedDict, total=False):
    """Where a run that no pytest invocation made came from (``source``): an import, a re-score, a layer."""

    kind: Required[
        str
    ]  # athenabench-runs, cti-bench-responses, inspect-log, lm-eval-log, every-eval-ever-log, rescore, layer
    # imports: the released files
    path: str
    model: str
    column: str
    files: dict[str, str]
    file_checksums: dict[str, str]
    matched_by: str
    raw_outputs_published: bool
    note: str
    # imported logs: a record field the harness does not log -> why, e.g. {"finish_reason": "not recorded by
    # lm-eval"}: its records hold null there, which no count may read as "none" (0 truncated)
    not_recorded: dict[str, str]
    # imported logs: the questions of the harness's whole dataset, where the log states it (Inspect)
    dataset_questions: int
    # rescore and layer: the run it was made from
    run_dir: str
    run_id: str | None
    pipeline: str | None
    overrides: dict[str, JsonValue]
    stages: list[str]
    layer: str


@with_config(_FORBID)
class RescoreSkip(TypedDict):
    """A task of the stored run that was not re-scored (``skipped``)."""

    task: str
    records: int
    reason: str


@with_config(_FORBID)
class TaskOverride(TypedDict):
    """An imported task's fields set apart from the standard layer, and why (``task_overrides``)."""

    fields: dict[str, JsonValue]
    why: str


@with_config(_FORBID)
class RunMeta(TypedDict, total=False):
    """``run.json``."""

    run_id: Required[str]
    started: str
    ended: str | None  # None while the run runs (or after it was killed)
    n_records: int
    exitstatus: int
    resumed: list[str]  # when each --resume began
    # the invocation (a pytest run)
    argv: list[str]  # secrets masked
    resume_argv: list[str]  # the command line of the last --resume (argv stays the run's own)
    pipeline: str
    pipelines: list[str]  # --pipelines: every layer
    overrides: dict[str, JsonValue]  # --set FIELD=VALUE, by flat field name
    limit: int | None
    vary: list[tuple[str, list[JsonValue]]]  # --vary FIELD=V1,V2: [field, values]
    versions: dict[str, str]
    models: list[RunModel]
    data_dir_origin: str
    pipeline_cards: Cards
    dataset_checksums: dict[str, str]
    suite_checksums: dict[str, str]
    platform: Platform
    warnings: list[CardWarning]  # {"kind", "message"}: the cards' and the answers' context
    generation_cache: GenerationCache
    max_cost: MaxCost
    incomplete: dict[str, Incomplete]  # model -> questions not asked
    workers: list[WorkerInfo]
    worker_data_conflicts: dict[str, dict[str, str]]  # data file -> {gateway id: checksum}
    # a run made offline
    source: RunSource
    skipped: list[RescoreSkip]
    rescored_at: str
    scores: dict[str, float | None]  # imports: our score per task
    released_scores: dict[str, float | None]  # athenabench: the released score per task
    agreement: dict[str, str]  # athenabench: "agree/n" per task
    task_overrides: dict[str, TaskOverride]  # cti_bench: per task key


RUN_META: TypeAdapter[RunMeta] = TypeAdapter(RunMeta)


def run_layers(meta: RunMeta) -> list[str]:
    """The layers of a ``--pipelines`` run, in the order given (the first is the base); [] for other runs."""
    layers = meta.get("pipelines")
    return [str(x) for x in layers] if isinstance(layers, list) and len(layers) > 1 else []


def not_recorded(meta: RunMeta, field: str) -> str | None:
    """Why the run's source does not record ``field`` (``finish_reason``: lm-eval logs none), or None where it does.

    A record's null there means "unknown", not "none": a truncation count of such a run is "not recorded", not 0.
    """
    source: RunSource = meta.get("source") or {"kind": ""}
    return (source.get("not_recorded") or {}).get(field)
