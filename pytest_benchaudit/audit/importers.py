"""``benchaudit import``: published model outputs -> run directories, one per model.

    benchaudit import athenabench-runs DIR [--report-dir D] [--suites-dir S] [--data-dir X]
        DIR: AthenaBench's released ``runs-mini/`` (``<model path>/<TASK>-scored.jsonl``: the
        prompt, the model's raw response, the released extraction and per-item score).
    benchaudit import cti-bench-responses DIR [--report-dir D] [--suites-dir S] [--data-dir X]
        DIR: CTI-Bench's released ``responses/`` (``cti-<task>-responses.tsv``: gold and one
        already-extracted answer per model and row; no raw outputs).

Each model becomes a run directory under ``--report-dir`` with the same contract as a
pytest run (``run.json``, ``records.jsonl``, ``summary.json``), scored here with the
suite's ``released`` layer, so an imported run can be shown, compared and re-scored like
any other.  ``run.json`` has ``source`` ({kind, path, ...}) where a pytest run has argv.

Every record keeps what the source published next to our reading of it:
``released_prediction`` (the released extracted answer) and, for AthenaBench,
``released_score`` (the released per-item score as published), ``released_success`` and
``released_value`` (that score on the record's metric scale; ``null`` where the released
aggregation leaves the row out).  ``import_report.json`` lists every item where our
released-layer score differs from the released one, with the reason when it is known,
and the released per-task aggregates beside ours.

Rows are matched to the benchmark files (read from the data directory, as a pytest run
reads them) by order, and the match is checked (AthenaBench: the prompt and the gold of
each row; CTI-Bench: the gold).  A missing file, a malformed row or a failed match stops
the import with one message naming the file and the row; nothing is written then.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_benchaudit.common.errors import DataError
from pytest_benchaudit.aggregate.results import benchmark_scores, summarize
from pytest_benchaudit.scoring.evaluate import evaluate
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, apply_overrides, is_unspecified
from pytest_benchaudit.common.progress import Progress
from pytest_benchaudit.prompt.templates import TemplateError, render_request
from pytest_benchaudit.runs.store import RunDirectory, new_run_id
from pytest_benchaudit.dataset.suites import (
    SUITE_FILENAME,
    Suite,
    SuiteError,
    _rows,
    file_checksum,
    load_questions,
    load_resources,
    load_suite,
    resolve_data_dir,
)
from pytest_benchaudit.pipeline.types import Generation, Message, Question, Request

__all__ = [
    "SOURCES",
    "ImportSourceError",
    "ImportedRun",
    "add_import_parser",
    "import_athenabench_runs",
    "import_cti_bench_responses",
    "run_dir_name",
    "run_import",
]

LAYER = "released"


class ImportSourceError(DataError):
    """The source folder or one of its files is missing or malformed; the message says where."""


@dataclass
class ImportedRun:
    model: str
    path: Path
    n_records: int
    n_differences: int
    results: list[dict[str, Any]] = field(default_factory=list)


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
    path = Path(suites_dir) / bench / SUITE_FILENAME
    if not path.is_file():
        raise ImportSourceError(f"no suite {bench!r} in {suites_dir} ({path} not found); pass --suites-dir")
    return load_suite(path)


@dataclass
class _TaskContext:
    """What scoring one task of a suite under the released layer needs, loaded once."""

    key: str
    pipeline: Pipeline
    questions: list[Question]
    resources: dict[str, Any]
    card: dict[str, Any]
    checksums: dict[str, str]
    data_file: Path


def _task_context(suite: Suite, task: str, data_dir: Path, origin: str,
                  overrides: list[tuple[str, Any]] | None = None) -> _TaskContext:
    pipe = apply_overrides(suite.pipeline(task, LAYER), list(overrides or []))
    missing = [f for f in ("extraction.rule", "extraction.reasoning", "scoring.metric", "scoring.denominator")
               if is_unspecified(_field_value(pipe, f))]
    if missing:
        raise ImportSourceError(f"{suite.name}.{task}: the {LAYER!r} layer leaves {', '.join(missing)} "
                                "unspecified; it cannot score imported outputs")
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


def _read_rows(path: Path, fmt: str) -> list[tuple[str, dict[str, Any]]]:
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


def _record(ctx: _TaskContext, question: Question, request: Request, text: str, model: str,
            extra: dict[str, Any]) -> dict[str, Any]:
    rec = evaluate(question, ctx.pipeline, request, Generation(text=text), model=model,
                   item_id=f"{ctx.key}::q{question.index + 1:04d}[{model}]", resources=ctx.resources)
    out = rec.model_dump(mode="json")
    out.update(extra)
    return out


def _released_aggregate(values: list[float | None]) -> float | None:
    counted = [v for v in values if v is not None]
    return sum(counted) / len(counted) if counted else None


def _write_run(report_dir: Path, bench: str, model: str, records: list[dict[str, Any]],
               cards: dict[str, dict[str, Any]], checksums: dict[str, str], source: dict[str, Any],
               report: dict[str, Any], origin: str, extra_meta: dict[str, Any], stamp: str) -> ImportedRun:
    results = summarize(records, cards)
    benchmarks = benchmark_scores(results, cards)
    run = RunDirectory(report_dir, f"{stamp}-{bench}-{run_dir_name(model)}")
    run.write_run(source=source, pipeline=LAYER, overrides={}, versions=_versions(),
                  models=[{"spec": model, "kind": "imported", "served_model_ids": []}],
                  data_dir_origin=origin, pipeline_cards=cards, dataset_checksums=checksums,
                  platform={"system": platform.system(), "machine": platform.machine(),
                            "python": sys.version.split()[0]}, **extra_meta)
    for rec in records:
        run.append(rec)
    run.write_json("summary.json", {"results": results, "benchmarks": benchmarks, "gates": []})
    run.write_json("import_report.json", report)
    run.finish()
    return ImportedRun(model, run.path, len(records), len(report["differences"]), results)


def _task_summary(results: list[dict[str, Any]], released: dict[str, float | None],
                  counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    out = {}
    for r in results:
        task = r["task"]
        out[task] = {"n": r["n"], "n_valid": r["n_valid"], "metric": r["metric"], "denominator": r["denominator"],
                     "score": r["score"], "released_score": released.get(task), **counts.get(task, {})}
    return out


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
TAA_GRAPH_REASON = ("alias graph: scored with CTI-Bench's published lookups (cti-bench/taa-lookups), because "
                    "AthenaBench's own alias tables (data/processed/taa/*.csv) are not in its release")


def _athena_models(source: Path) -> dict[str, Path]:
    folders = sorted({p.parent for p in source.rglob(f"*{_ATHENA_SUFFIX}")})
    if not folders:
        raise ImportSourceError(f"{source}: no '<model>/<TASK>{_ATHENA_SUFFIX}' files found "
                                f"(expected AthenaBench's runs-mini/ folder)")
    models = {p.relative_to(source).as_posix(): p for p in folders}
    names: dict[str, str] = {}
    for model in models:
        slug = run_dir_name(model)
        if slug in names:
            raise ImportSourceError(f"{source}: models {names[slug]!r} and {model!r} map to the same run name {slug!r}")
        names[slug] = model
    return models


def _athena_released_value(task: str, score: Any, success: bool) -> float | None:
    """The released per-item number on our metric scale; None where the released mean leaves it out."""
    if task == "vsp":
        return 1 - float(score) / 7.7 if success else None
    if task == "taa":
        return float(score["correct"])
    return float(score)


def _check_athena_row(path: Path, label: str, row: dict[str, Any], task: str) -> None:
    for name, kinds in (("prompt", (str,)), ("response", (str, type(None))), ("prediction", (str, type(None))),
                        ("answer", (str, int)), ("success", (bool,))):
        if name not in row:
            raise ImportSourceError(f"{path}: {label}: missing field {name!r}")
        if not isinstance(row[name], kinds):
            raise ImportSourceError(f"{path}: {label}: field {name!r} should be "
                                    f"{' or '.join(k.__name__ for k in kinds)}, found {type(row[name]).__name__}")
    if "score" not in row:
        raise ImportSourceError(f"{path}: {label}: missing field 'score'")
    score = row["score"]
    if task == "taa":
        if not (isinstance(score, dict) and isinstance(score.get("correct"), (int, float))
                and not isinstance(score.get("correct"), bool)):
            raise ImportSourceError(f"{path}: {label}: TAA 'score' should be an object with a numeric 'correct', "
                                    f"found {score!r}")
    elif isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ImportSourceError(f"{path}: {label}: field 'score' should be a number, found {score!r}")


def _athena_request(ctx: _TaskContext, suite: Suite, question: Question, model: str) -> Request:
    req = render_request(ctx.pipeline, suite.templates[ctx.pipeline.prompt.template], question)
    if model.split("/")[-1].startswith("gpt-5") and "temperature" in req.params:
        params = {k: v for k, v in req.params.items() if k != "temperature"}
        note = ("gpt-5 goes through the OpenAI Responses API with no temperature (released models.py); "
                "temperature not sent")
        req = req.model_copy(update={"params": params, "adjustments": (*req.adjustments, note)})
    return req


def _athena_difference(task: str, rec: dict[str, Any], ours: float | None, theirs: float | None,
                       released_prediction: str, released_success: bool) -> str:
    pred_same = (rec["prediction"] or "") == (released_prediction or "") or (
        not rec["valid"] and (not released_success or (released_prediction or "") in ("", "X")))
    if (ours is None) != (theirs is None):
        return (f"counted differently: ours {'invalid (' + str(rec['invalid_reason']) + ')' if not rec['valid'] else 'valid'}, "
                f"released success={released_success}")
    if not pred_same:
        return f"extraction differs: ours {rec['prediction']!r}, released {released_prediction!r}"
    if task == "taa":
        return TAA_GRAPH_REASON
    return "metric differs on the same prediction"


def import_athenabench_runs(source: Path, report_dir: Path, suites_dir: Path, data_dir: str | None = None,
                            log: Callable[[str], None] = lambda msg: None) -> list[ImportedRun]:
    """Turn AthenaBench's released ``runs-mini/`` into one run directory per model."""
    source = Path(source)
    if not source.is_dir():
        raise ImportSourceError(f"{source}: not a directory (expected AthenaBench's runs-mini/ folder)")
    suite = _load_suite(suites_dir, "athenabench")
    root, origin = resolve_data_dir(data_dir)
    contexts = {task: _task_context(suite, task, root, origin) for task in ATHENA_TASKS.values()}
    models = _athena_models(source)
    # Read and check everything before writing anything.
    prepared = []
    bar = Progress(len(models) * sum(len(c.questions) for c in contexts.values()), "import", "rows")
    for model, folder in models.items():
        records: list[dict[str, Any]] = []
        differences: list[dict[str, Any]] = []
        released: dict[str, list[float | None]] = {}
        counts: dict[str, dict[str, int]] = {}
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
                raise ImportSourceError(f"{path}: {len(rows)} rows, but {ctx.data_file} has {len(ctx.questions)} "
                                        "questions; rows are matched to the benchmark file by order")
            values: list[float | None] = []
            agree = 0
            for (label, row), question in bar.count(zip(rows, ctx.questions)):
                _check_athena_row(path, label, row, task)
                if row["prompt"] != question.prompt:
                    raise ImportSourceError(
                        f"{path}: {label}: prompt does not match row {question.index + 1} of {ctx.data_file} "
                        "(rows are matched by order; the released run and the benchmark file disagree)")
                if str(row["answer"]).strip() != question.gold.strip():
                    raise ImportSourceError(
                        f"{path}: {label}: gold {row['answer']!r} differs from {question.gold!r} in row "
                        f"{question.index + 1} of {ctx.data_file} (rows are matched by order)")
                raw = row["response"] or ""
                theirs = _athena_released_value(task, row["score"], row["success"])
                extra = {"released_prediction": row["prediction"], "released_score": row["score"],
                         "released_success": row["success"], "released_value": theirs,
                         "released_id": row.get("id"), "source_row": label}
                rec = _record(ctx, question, _athena_request(ctx, suite, question, model), raw, model, extra)
                counted = rec["valid"] or ctx.pipeline.scoring.denominator != "valid"
                ours = rec["score"] if counted else None
                values.append(theirs)
                same = (ours is None and theirs is None) or (
                    ours is not None and theirs is not None and abs(ours - theirs) < 1e-9)
                agree += same
                if not same:
                    differences.append({
                        "task": task, "question_id": question.id, "question_index": question.index,
                        "source_row": f"{rel}: {label}", "score": ours, "released_value": theirs,
                        "released_score": row["score"], "prediction": rec["prediction"],
                        "released_prediction": row["prediction"],
                        "reason": _athena_difference(task, rec, ours, theirs, row["prediction"], row["success"]),
                    })
                records.append(rec)
            released[task] = values
            counts[task] = {"agree": agree, "differ": len(rows) - agree}
        prepared.append((model, records, differences, released, counts, files, source_checksums))
    bar.close()

    cards = {ctx.key: ctx.card for ctx in contexts.values()}
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
        released_combined = sum(rel_vals) / len(rel_vals) if all(v is not None for v in rel_vals) else None
        bench = benchmark_scores(results, cards)
        report = {
            "source": {"kind": "athenabench-runs", "model": model},
            "tasks": _task_summary(results, released_task, counts),
            "benchmark": {"score": bench[0]["score"] if bench else None, "method": bench[0]["method"] if bench else None,
                          "released_score": released_combined,
                          "note": "released score = unweighted mean of the six released task numbers "
                                  "(evaluate.py Combined), recomputed from the released per-item scores"},
            "differences": differences,
        }
        src = {"kind": "athenabench-runs", "path": str(source.resolve()), "model": model, "files": files,
               "file_checksums": source_checksums, "matched_by": "row order, checked against the benchmark "
               "file's prompt and gold for every row", "note": ATHENA_NOTE}
        agreement = {task: f"{c['agree']}/{c['agree'] + c['differ']}" for task, c in counts.items()}
        run = _write_run(report_dir, "athenabench", model, records, cards, checksums, src, report, origin,
                         {"agreement": agreement, "scores": ours_by_task, "released_scores": released_task},
                         stamp)
        log(f"{model}: {run.path} ({run.n_records} records, {run.n_differences} differ from the released scores)")
        out.append(run)
    return out


# --------------------------------------------------------------------------- CTI-Bench responses

# suite task -> released responses file
CTI_FILES = {"mcq": "cti-mcq-responses.tsv", "rcm": "cti-rcm-responses.tsv",
             "rcm_2021": "cti-rcm-2021-responses.tsv", "vsp": "cti-vsp-responses.tsv",
             "taa": "cti-taa-responses.tsv"}
CTI_NOTE = (
    "Raw outputs were not published with these files: the released responses TSVs hold only the already-"
    "extracted answers ('X' = refusal or error), and the notebook admits some responses had to be collected "
    "manually. raw_output is the extracted answer as published (released_prediction), re-read with the "
    "released layer's rule; request is what the released notebook sends (system message for GPT models, "
    "system text glued to the prompt for Gemini / Llama-3), with the released parameters. No ATE responses "
    "were released."
)
# CTI-TAA's released extraction was by hand: the published names are its output, read whole.
CTI_TASK_OVERRIDES: dict[str, list[tuple[str, Any]]] = {"taa": [("extraction.rule", "whole_answer")]}
CTI_OVERRIDE_REASON = {"taa": "the released extraction was manual (format_taa only flattens the response); "
                              "the published names are its result, read whole ('whole_answer')"}


def _cti_request(ctx: _TaskContext, suite: Suite, question: Question, model: str) -> Request:
    req = render_request(ctx.pipeline, suite.templates[ctx.pipeline.prompt.template], question)
    if not model.lower().startswith("chatgpt") and req.messages and req.messages[0].role == "system":
        # The notebook's Gemini and Replicate paths glue the system text to the prompt with a space.
        system, first, *rest = req.messages
        glued = Message(role="user", content=f"{system.content} {first.content}")
        note = ("Gemini / Replicate path of the released notebook: system text prepended to the prompt "
                "with a space (prompt.format.system_role=prepend_user)")
        req = req.model_copy(update={"messages": (glued, *rest), "adjustments": (*req.adjustments, note)})
    return req


def import_cti_bench_responses(source: Path, report_dir: Path, suites_dir: Path, data_dir: str | None = None,
                               log: Callable[[str], None] = lambda msg: None) -> list[ImportedRun]:
    """Turn CTI-Bench's released ``responses/*.tsv`` into one run directory per model."""
    source = Path(source)
    if not source.is_dir():
        raise ImportSourceError(f"{source}: not a directory (expected CTI-Bench's evaluation/responses/ folder)")
    suite = _load_suite(suites_dir, "cti_bench")
    root, origin = resolve_data_dir(data_dir)
    contexts = {task: _task_context(suite, task, root, origin, CTI_TASK_OVERRIDES.get(task, []))
                for task in CTI_FILES}
    tables: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    models: list[str] | None = None
    source_checksums: dict[str, str] = {}
    for task, name in CTI_FILES.items():
        path = source / name
        rows = _read_rows(path, "tsv")
        ctx = contexts[task]
        if not rows:
            raise ImportSourceError(f"{path}: no rows")
        columns = list(rows[0][1])
        if "GT" not in columns:
            raise ImportSourceError(f"{path}: no 'GT' column (columns: {', '.join(columns)})")
        cols = [c for c in columns if c != "GT"]
        if not cols:
            raise ImportSourceError(f"{path}: no model columns besides 'GT'")
        if models is None:
            models = cols
        elif set(cols) != set(models):
            raise ImportSourceError(f"{path}: model columns {', '.join(cols)} differ from "
                                    f"{', '.join(models)} in {source / CTI_FILES['mcq']}")
        if len(rows) != len(ctx.questions):
            raise ImportSourceError(f"{path}: {len(rows)} rows, but {ctx.data_file} has {len(ctx.questions)} "
                                    "questions; rows are matched to the benchmark file by order")
        for (label, row), question in zip(rows, ctx.questions):
            if row["GT"].strip() != question.gold.strip():
                raise ImportSourceError(f"{path}: {label}: GT {row['GT']!r} differs from {question.gold!r} in row "
                                        f"{question.index + 1} of {ctx.data_file} (rows are matched by order)")
        tables[task] = rows
        source_checksums[name] = file_checksum(path)
    assert models is not None
    slugs: dict[str, str] = {}
    for model in models:
        slug = run_dir_name(model)
        if slug in slugs:
            raise ImportSourceError(f"{source}: models {slugs[slug]!r} and {model!r} map to the same run name {slug!r}")
        slugs[slug] = model

    cards = {ctx.key: ctx.card for ctx in contexts.values()}
    checksums: dict[str, str] = {}
    for ctx in contexts.values():
        checksums.update(ctx.checksums)
    prepared = []
    bar = Progress(len(models) * sum(len(rows) for rows in tables.values()), "import", "rows")
    for model in models:
        records: list[dict[str, Any]] = []
        differences: list[dict[str, Any]] = []
        counts: dict[str, dict[str, int]] = {}
        for task, rows in tables.items():
            ctx = contexts[task]
            agree = 0
            for (label, row), question in bar.count(zip(rows, ctx.questions)):
                answer = row[model]
                extra = {"released_prediction": answer, "source_row": label}
                rec = _record(ctx, question, _cti_request(ctx, suite, question, model), answer, model, extra)
                records.append(rec)
                same = rec["valid"] and (rec["prediction"] or "").upper() == answer.strip().upper()
                agree += same
                if not same:
                    reason = (f"not counted by the released scorer: {rec['invalid_reason']} "
                              f"({rec['extraction_detail']})" if not rec["valid"]
                              else f"read as {rec['prediction']!r}")
                    differences.append({"task": task, "question_id": question.id, "question_index": question.index,
                                        "source_row": f"{CTI_FILES[task]}: {label}", "prediction": rec["prediction"],
                                        "released_prediction": answer, "score": rec["score"], "reason": reason})
            counts[task] = {"prediction_agree": agree, "prediction_differ": len(rows) - agree}
        prepared.append((model, records, differences, counts))
    bar.close()

    stamp = new_run_id()
    out = []
    for model, records, differences, counts in prepared:
        results = summarize(records, cards)
        report = {
            "source": {"kind": "cti-bench-responses", "model": model},
            "tasks": _task_summary(results, {}, counts),
            "note": "CTI-Bench publishes no per-item scores: the differences listed are rows whose published "
                    "answer the released rule does not read as itself (e.g. not a letter / CWE id / vector), "
                    "which the released scorer leaves out of its denominator.",
            "differences": differences,
        }
        src = {"kind": "cti-bench-responses", "path": str(source.resolve()), "model": model, "column": model,
               "files": dict(CTI_FILES), "file_checksums": source_checksums,
               "matched_by": "row order, checked against the benchmark file's gold for every row",
               "raw_outputs_published": False, "note": CTI_NOTE}
        task_overrides = {f"cti_bench.{t}": {"fields": dict(ov), "why": CTI_OVERRIDE_REASON[t]}
                          for t, ov in CTI_TASK_OVERRIDES.items()}
        run = _write_run(report_dir, "cti_bench", model, records, cards, checksums, src, report, origin,
                         {"task_overrides": task_overrides, "scores": {r["task"]: r["score"] for r in results}},
                         stamp)
        log(f"{model}: {run.path} ({run.n_records} records)")
        out.append(run)
    return out


# --------------------------------------------------------------------------- command line

SOURCES: dict[str, Callable[..., list[ImportedRun]]] = {
    "athenabench-runs": import_athenabench_runs,
    "cti-bench-responses": import_cti_bench_responses,
}


def add_import_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``import`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "import", help="turn published model outputs into run directories (one per model), scored with the "
                       "released layer",
        description="Turn a benchmark's published model outputs into benchaudit run directories, one per model, "
                    "scored with the suite's released layer and compared with the released scores.")
    p.add_argument("source", choices=sorted(SOURCES),
                   help="athenabench-runs: AthenaBench runs-mini/ (raw responses + released scores); "
                        "cti-bench-responses: CTI-Bench responses/ (extracted answers only)")
    p.add_argument("dir", type=Path, help="the source folder, e.g. $BENCHAUDIT_DATA/athenabench/runs-mini")
    p.add_argument("--report-dir", type=Path, default=Path("reports"), help="where run directories go (default: reports/)")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"), help="where suites live (default: suites/)")
    p.add_argument("--data-dir", help="benchmark data directory (default: $BENCHAUDIT_DATA, else ~/.cache/benchaudit/datasets)")
    return p


def run_import(args: argparse.Namespace) -> int:
    """Run ``benchaudit import``: 0 when every run directory was written, 2 on bad input."""
    try:
        runs = SOURCES[args.source](args.dir, args.report_dir, args.suites_dir, getattr(args, "data_dir", None),
                                    log=print)
    except (ImportSourceError, SuiteError, PipelineError, TemplateError) as err:
        print(f"benchaudit import: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"benchaudit import: {err}", file=sys.stderr)
        return 2
    print(f"{len(runs)} run directories written under {args.report_dir}")
    return 0
