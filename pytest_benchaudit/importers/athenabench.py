"""AthenaBench's released ``runs-mini/``: raw responses, released extraction and per-item scores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NotRequired, TypeGuard

from pydantic import JsonValue
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.results import benchmark_scores, summarize
from pytest_benchaudit.common.progress import Progress
from pytest_benchaudit.dataset.readers import file_checksum, resolve_data_dir
from pytest_benchaudit.dataset.suites import Suite
from pytest_benchaudit.importers.common import (
    Difference,
    ImportedRun,
    ImportReport,
    ImportSourceError,
    RawRow,
    RecordExtras,
    TaskCounts,
    _load_suite,
    _read_rows,
    _record,
    _released_aggregate,
    _task_context,
    _task_summary,
    _TaskContext,
    _write_run,
    run_dir_name,
)
from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow
from pytest_benchaudit.pipeline.types import Question, Request
from pytest_benchaudit.prompt.templates import render_request
from pytest_benchaudit.runs.run_meta import RunSource
from pytest_benchaudit.runs.store import new_run_id

# --------------------------------------------------------------------------- AthenaBench runs-mini

# released file stem -> suite task
ATHENA_TASKS = {"MCQ3k": "mcq", "ATE": "ate", "RMS": "rms", "RCM": "rcm", "VSP": "vsp", "TAA": "taa"}
_ATHENA_SUFFIX = "-scored.jsonl"
ATHENA_NOTE = (
    "Imported from AthenaBench's released runs: raw_output is the released 'response' field as published "
    "(before any stripping); request is the released prompt as one user message with the released layer's "
    "parameters, which the scored files themselves do not record (see the cards' notes for the released "
    "code's per-path differences; gpt-5 models are marked with a request adjustment). Extraction and "
    "scores are recomputed with the released layer; released_prediction / released_score / released_success "
    "are the released file's own values."
)
TAA_GRAPH_REASON = (
    "alias graph: scored with CTI-Bench's published lookups (cti-bench/taa-lookups), because "
    "AthenaBench's own alias tables (data/processed/taa/*.csv) are not in its release"
)


class AthenaRow(TypedDict):
    """A row of a released ``<TASK>-scored.jsonl`` (the columns the import reads, as
    :func:`_check_athena_row` checks them)."""

    prompt: str
    response: str | None
    prediction: str | None
    answer: str | int
    success: bool
    score: JsonValue  # a number; TAA: an object with a numeric 'correct'
    id: NotRequired[int | str | None]


def _athena_models(source: Path) -> dict[str, Path]:
    folders = sorted({p.parent for p in source.rglob(f"*{_ATHENA_SUFFIX}")})
    if not folders:
        raise ImportSourceError(
            f"{source}: no '<model>/<TASK>{_ATHENA_SUFFIX}' files found (expected AthenaBench's runs-mini/ folder)"
        )
    models = {p.relative_to(source).as_posix(): p for p in folders}
    names: dict[str, str] = {}
    for model in models:
        slug = run_dir_name(model)
        if slug in names:
            raise ImportSourceError(f"{source}: models {names[slug]!r} and {model!r} map to the same run name {slug!r}")
        names[slug] = model
    return models


def _number(value: JsonValue) -> float:
    if isinstance(value, (int, float)):  # _check_athena_row made sure
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def _athena_released_value(task: str, score: JsonValue, success: bool) -> float | None:
    """The released per-item number on our metric scale; None where the released mean leaves it out."""
    if task == "vsp":
        return 1 - _number(score) / 7.7 if success else None
    if task == "taa":
        return _number(score["correct"]) if isinstance(score, dict) else _number(score)
    return _number(score)


def _check_athena_row(row: RawRow, path: Path, label: str, task: str) -> TypeGuard[AthenaRow]:
    """True, or an :class:`ImportSourceError` naming the file, the row and the field that is not as released."""
    for name, kinds in (
        ("prompt", (str,)),
        ("response", (str, type(None))),
        ("prediction", (str, type(None))),
        ("answer", (str, int)),
        ("success", (bool,)),
    ):
        if name not in row:
            raise ImportSourceError(f"{path}: {label}: missing field {name!r}")
        if not isinstance(row[name], kinds):
            raise ImportSourceError(
                f"{path}: {label}: field {name!r} should be "
                f"{' or '.join(k.__name__ for k in kinds)}, found {type(row[name]).__name__}"
            )
    if "score" not in row:
        raise ImportSourceError(f"{path}: {label}: missing field 'score'")
    score = row["score"]
    if task == "taa":
        if not (
            isinstance(score, dict)
            and isinstance(score.get("correct"), (int, float))
            and not isinstance(score.get("correct"), bool)
        ):
            raise ImportSourceError(
                f"{path}: {label}: TAA 'score' should be an object with a numeric 'correct', found {score!r}"
            )
    elif isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ImportSourceError(f"{path}: {label}: field 'score' should be a number, found {score!r}")
    return True


def _athena_row(path: Path, label: str, row: RawRow, task: str) -> AthenaRow:
    """The row as the released columns, once :func:`_check_athena_row` has checked them."""
    if _check_athena_row(row, path, label, task):
        return row
    raise AssertionError("unreachable: the check raises")


def _athena_request(ctx: _TaskContext, suite: Suite, question: Question, model: str) -> Request:
    req = render_request(ctx.pipeline, suite.templates[ctx.pipeline.prompt.template], question)
    if model.split("/")[-1].startswith("gpt-5") and "temperature" in req.params:
        params = {k: v for k, v in req.params.items() if k != "temperature"}
        note = (
            "gpt-5 goes through the OpenAI Responses API with no temperature (released models.py); temperature not sent"
        )
        req = req.model_copy(update={"params": params, "adjustments": (*req.adjustments, note)})
    return req


def _athena_difference(
    task: str,
    rec: RecordRow,
    ours: float | None,
    theirs: float | None,
    released_prediction: str | None,
    released_success: bool,
) -> str:
    pred_same = (rec["prediction"] or "") == (released_prediction or "") or (
        not rec["valid"] and (not released_success or (released_prediction or "") in ("", "X"))
    )
    if (ours is None) != (theirs is None):
        return (
            f"counted differently: ours {'invalid (' + str(rec['invalid_reason']) + ')' if not rec['valid'] else 'valid'}, "
            f"released success={released_success}"
        )
    if not pred_same:
        return f"extraction differs: ours {rec['prediction']!r}, released {released_prediction!r}"
    if task == "taa":
        return TAA_GRAPH_REASON
    return "metric differs on the same prediction"


def import_athenabench_runs(
    source: Path,
    report_dir: Path,
    suites_dir: Path,
    data_dir: str | None = None,
    log: Callable[[str], None] = lambda msg: None,
) -> list[ImportedRun]:
    """Turn AthenaBench's released ``runs-mini/`` into one run directory per model."""
    source = Path(source)
    if not source.is_dir():
        raise ImportSourceError(f"{source}: not a directory (expected AthenaBench's runs-mini/ folder)")
    suite = _load_suite(suites_dir, "athenabench")
    root, origin = resolve_data_dir(data_dir)
    contexts = {task: _task_context(suite, task, root, origin) for task in ATHENA_TASKS.values()}
    models = _athena_models(source)
    # Read and check everything before writing anything.
    prepared: list[
        tuple[
            str,
            list[RecordRow],
            list[Difference],
            dict[str, list[float | None]],
            dict[str, TaskCounts],
            dict[str, str],
            dict[str, str],
        ]
    ] = []
    bar = Progress(len(models) * sum(len(c.questions) for c in contexts.values()), "import", "rows")
    for model, folder in models.items():
        records: list[RecordRow] = []
        differences: list[Difference] = []
        released: dict[str, list[float | None]] = {}
        counts: dict[str, TaskCounts] = {}
        files: dict[str, str] = {}
        source_checksums: dict[str, str] = {}
        for stem, task in ATHENA_TASKS.items():
            path = folder / f"{stem}{_ATHENA_SUFFIX}"
            ctx = contexts[task]
            rows = _read_rows(path, "jsonl")
            rel = path.relative_to(source).as_posix()
            files[task] = rel
            source_checksums[rel] = file_checksum(path)
            if len(rows) != len(ctx.questions):
                raise ImportSourceError(
                    f"{path}: {len(rows)} rows, but {ctx.data_file} has {len(ctx.questions)} "
                    "questions; rows are matched to the benchmark file by order"
                )
            values: list[float | None] = []
            agree = 0
            for (label, raw_row), question in bar.count(zip(rows, ctx.questions)):
                row = _athena_row(path, label, raw_row, task)
                if row["prompt"] != question.prompt:
                    raise ImportSourceError(
                        f"{path}: {label}: prompt does not match row {question.index + 1} of {ctx.data_file} "
                        "(rows are matched by order; the released run and the benchmark file disagree)"
                    )
                if str(row["answer"]).strip() != question.gold.strip():
                    raise ImportSourceError(
                        f"{path}: {label}: gold {row['answer']!r} differs from {question.gold!r} in row "
                        f"{question.index + 1} of {ctx.data_file} (rows are matched by order)"
                    )
                raw = row["response"] or ""
                theirs = _athena_released_value(task, row["score"], row["success"])
                extra: RecordExtras = {
                    "released_prediction": row["prediction"],
                    "released_score": row["score"],
                    "released_success": row["success"],
                    "released_value": theirs,
                    "released_id": row.get("id"),
                    "source_row": label,
                }
                rec = _record(ctx, question, _athena_request(ctx, suite, question, model), raw, model, extra)
                counted = rec["valid"] or ctx.pipeline.scoring.denominator != "valid"
                ours = rec["score"] if counted else None
                values.append(theirs)
                same = (ours is None and theirs is None) or (
                    ours is not None and theirs is not None and abs(ours - theirs) < 1e-9
                )
                agree += same
                if not same:
                    differences.append(
                        {
                            "task": task,
                            "question_id": question.id,
                            "question_index": question.index,
                            "source_row": f"{rel}: {label}",
                            "score": ours,
                            "released_value": theirs,
                            "released_score": row["score"],
                            "prediction": rec["prediction"],
                            "released_prediction": row["prediction"],
                            "reason": _athena_difference(task, rec, ours, theirs, row["prediction"], row["success"]),
                        }
                    )
                records.append(rec)
            released[task] = values
            counts[task] = {"agree": agree, "differ": len(rows) - agree}
        prepared.append((model, records, differences, released, counts, files, source_checksums))
    bar.close()

    cards: Cards = {ctx.key: ctx.card for ctx in contexts.values()}
    checksums: dict[str, str] = {}
    for ctx in contexts.values():
        checksums.update(ctx.checksums)
    stamp = new_run_id()
    out = []
    for model, records, differences, released, counts, files, source_checksums in prepared:
        released_task = {task: _released_aggregate(v) for task, v in released.items()}
        results = summarize(records, cards)
        ours_by_task = {r["task"]: r["score"] for r in results}
        rel_vals = list(released_task.values())
        known = [v for v in rel_vals if v is not None]
        released_combined = sum(known) / len(known) if known and len(known) == len(rel_vals) else None
        bench = benchmark_scores(results, cards)
        report: ImportReport = {
            "source": {"kind": "athenabench-runs", "model": model},
            "tasks": _task_summary(results, released_task, counts),
            "benchmark": {
                "score": bench[0]["score"] if bench else None,
                "method": bench[0]["method"] if bench else None,
                "released_score": released_combined,
                "note": "released score = unweighted mean of the six released task numbers "
                "(evaluate.py Combined), recomputed from the released per-item scores",
            },
            "differences": differences,
        }
        src: RunSource = {
            "kind": "athenabench-runs",
            "path": str(source.resolve()),
            "model": model,
            "files": files,
            "file_checksums": source_checksums,
            "matched_by": "row order, checked against the benchmark file's prompt and gold for every row",
            "note": ATHENA_NOTE,
        }
        agreement = {task: f"{c['agree']}/{c['agree'] + c['differ']}" for task, c in counts.items()}
        run = _write_run(
            report_dir,
            "athenabench",
            model,
            records,
            cards,
            checksums,
            src,
            report,
            origin,
            {"agreement": agreement, "scores": ours_by_task, "released_scores": released_task},
            stamp,
        )
        log(f"{model}: {run.path} ({run.n_records} records, {run.n_differences} differ from the released scores)")
        out.append(run)
    return out
