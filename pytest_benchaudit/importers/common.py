"""What both importers share: the imported-run type, task contexts, records and writing run directories."""

from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, NotRequired, Required, cast

from pydantic import JsonValue
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.results import benchmark_scores, summarize
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.common.errors import DataError
from pytest_benchaudit.dataset.readers import _rows, file_checksum, load_questions, load_resources
from pytest_benchaudit.dataset.suites import Suite, SuiteError, load_suite, suite_path
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordExtras, RecordRow
from pytest_benchaudit.pipeline.stages import (
    Pipeline,
    is_unspecified,
)
from pytest_benchaudit.pipeline.types import Generation, Question, Request
from pytest_benchaudit.runs.run_meta import RunSource, TaskOverride
from pytest_benchaudit.runs.store import RunDirectory
from pytest_benchaudit.scoring.evaluate import evaluate
from pytest_benchaudit.scoring.tasks.inputs import Resources

LAYER = "released"


class ImportSourceError(DataError):
    """The source folder or one of its files is missing or malformed; the message says where."""


# A row of a released file as it is read (a JSON object, or a CSV/TSV row's cells): the source's own columns.
RawRow = dict[str, JsonValue]


class TaskCounts(TypedDict, total=False):
    """Per task of an imported run: rows whose score (AthenaBench) or prediction (CTI-Bench) agrees with the release."""

    agree: int
    differ: int
    prediction_agree: int
    prediction_differ: int


class TaskImportSummary(TaskCounts):
    """``import_report.json`` ``tasks[TASK]``: our result beside the released number."""

    n: Required[int]
    n_valid: Required[int]
    metric: Required[str]
    denominator: Required[str]
    score: Required[float | None]
    released_score: Required[float | None]


class Difference(TypedDict):
    """An imported row that our scoring and the release read differently (``import_report.json`` ``differences``)."""

    task: str
    question_id: str
    question_index: int
    source_row: str
    score: float | None
    released_value: NotRequired[float | None]  # AthenaBench: the released per-item number on our scale
    released_score: NotRequired[JsonValue]  # AthenaBench: the released per-item score as published
    prediction: str | None
    released_prediction: str | None
    reason: str


class ReportSource(TypedDict):
    kind: str
    model: str


class ReleasedBenchmark(TypedDict):
    score: float | None
    method: str | None
    released_score: float | None
    note: str


class ImportReport(TypedDict):
    """``import_report.json``: per task our score beside the released one, and every row that differs."""

    source: ReportSource
    tasks: dict[str, TaskImportSummary]
    benchmark: NotRequired[ReleasedBenchmark]  # AthenaBench: the released Combined score
    note: NotRequired[str]
    differences: list[Difference]


class ImportMeta(TypedDict, total=False):
    """The run.json keys (:class:`~pytest_benchaudit.runs.run_meta.RunMeta`'s) an importer adds beside the store's."""

    agreement: dict[str, str]  # AthenaBench: task -> "agree/n"
    scores: dict[str, float | None]  # task -> our score
    released_scores: dict[str, float | None]  # AthenaBench: task -> released score
    task_overrides: dict[str, TaskOverride]  # CTI-Bench: fields the import sets, and why


@dataclass
class ImportedRun:
    model: str
    path: Path
    n_records: int
    n_differences: int
    results: list[TaskResult] = field(default_factory=list)


# --------------------------------------------------------------------------- helpers


def run_dir_name(model: str) -> str:
    """A file-name-safe form of a model name: '/' becomes '--', anything outside
    [A-Za-z0-9._-] becomes '_', no leading dot (so never '.', '..' or a hidden name)."""
    slug = model.replace("/", "--").replace("\\", "--")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", slug).strip("._-")
    return slug or "model"


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("pytest-benchaudit", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _load_suite(suites_dir: Path, bench: str) -> Suite:
    path = suite_path(suites_dir, bench)
    if not path.is_file():
        raise ImportSourceError(f"no suite {bench!r} in {suites_dir} ({path} not found); pass --suites-dir")
    return load_suite(path)


@dataclass
class _TaskContext:
    """What scoring one task of a suite under the released layer needs, loaded once."""

    key: str
    pipeline: Pipeline
    questions: list[Question]
    resources: Resources
    card: PipelineCard
    checksums: dict[str, str]
    data_file: Path


def _task_context(
    suite: Suite, task: str, data_dir: Path, origin: str, overrides: list[tuple[str, JsonValue]] | None = None
) -> _TaskContext:
    pipe = apply_overrides(suite.pipeline(task, LAYER), list(overrides or []))
    missing = [
        f
        for f in ("extraction.rule", "extraction.reasoning", "scoring.metric", "scoring.denominator")
        if is_unspecified(_field_value(pipe, f))
    ]
    if missing:
        raise ImportSourceError(
            f"{suite.name}.{task}: the {LAYER!r} layer leaves {', '.join(missing)} "
            "unspecified; it cannot score imported outputs"
        )
    questions, path = load_questions(suite, task, data_dir, origin)
    resources, res_paths = load_resources(suite, task, data_dir, origin)
    root = data_dir.resolve()
    checksums = {str(Path(suite.data_folder) / path.name): file_checksum(path)}
    for p in res_paths.values():
        checksums[str(p.relative_to(root))] = file_checksum(p)
    card = pipe.card()
    card["dataset_checksums"] = {path.name: file_checksum(path)}
    return _TaskContext(f"{suite.name}.{task}", pipe, questions, resources, card, checksums, path)


def _field_value(pipe: Pipeline, dotted: str) -> Any:
    obj: Any = pipe
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _read_rows(path: Path, fmt: str) -> list[tuple[str, RawRow]]:
    if not path.is_file():
        raise ImportSourceError(f"{path}: file not found")
    try:
        rows = list(_rows(path, {"format": fmt}))
    except SuiteError as err:
        raise ImportSourceError(str(err)) from None
    for label, row in rows:
        if not isinstance(row, dict):
            raise ImportSourceError(f"{path}: {label}: expected an object, found {type(row).__name__}")
    return rows


def _record(
    ctx: _TaskContext,
    question: Question,
    request: Request,
    text: str,
    model: str,
    extra: RecordExtras,
    error: str | None = None,
) -> RecordRow:
    """The record of one released answer; ``error``: the released file says the request failed
    (the answer is then an inference error, not an unreadable answer; the released text is kept)."""
    rec = evaluate(
        question,
        ctx.pipeline,
        request,
        Generation(text=text, error=error),
        model=model,
        item_id=f"{ctx.key}::q{question.index + 1:04d}[{model}]",
        resources=ctx.resources,
    )
    out = rec.model_dump(mode="json")
    out.update(extra)
    return cast(RecordRow, out)  # Record's dump is a RecordRow; the extras are RecordRow's released_* keys


def _released_aggregate(values: list[float | None]) -> float | None:
    counted = [v for v in values if v is not None]
    return sum(counted) / len(counted) if counted else None


def _write_run(
    report_dir: Path,
    bench: str,
    model: str,
    records: list[RecordRow],
    cards: Cards,
    checksums: dict[str, str],
    source: RunSource,
    report: ImportReport,
    origin: str,
    extra_meta: ImportMeta,
    stamp: str,
) -> ImportedRun:
    results = summarize(records, cards)
    benchmarks = benchmark_scores(results, cards)
    run = RunDirectory(report_dir, f"{stamp}-{bench}-{run_dir_name(model)}")
    run.write_run(
        source=source,
        pipeline=LAYER,
        overrides={},
        versions=_versions(),
        models=[{"spec": model, "kind": "imported", "served_model_ids": []}],
        data_dir_origin=origin,
        pipeline_cards=cards,
        dataset_checksums=checksums,
        platform={"system": platform.system(), "machine": platform.machine(), "python": sys.version.split()[0]},
        **extra_meta,
    )
    for rec in records:
        run.append(rec)
    run.write_json("summary.json", {"results": results, "benchmarks": benchmarks, "gates": []})
    run.write_json("import_report.json", report)
    run.finish()
    return ImportedRun(model, run.path, len(records), len(report["differences"]), results)


def _task_summary(
    results: list[TaskResult], released: dict[str, float | None], counts: dict[str, TaskCounts]
) -> dict[str, TaskImportSummary]:
    out: dict[str, TaskImportSummary] = {}
    for r in results:
        task = r["task"]
        out[task] = {
            "n": r["n"],
            "n_valid": r["n_valid"],
            "metric": r["metric"],
            "denominator": r["denominator"],
            "score": r["score"],
            "released_score": released.get(task),
            **counts.get(task, {}),
        }
    return out
