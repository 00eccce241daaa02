"""CTI-Bench's released ``responses/``: gold and one already-extracted answer per model and row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import JsonValue

from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.common.progress import Progress
from pytest_benchaudit.dataset.readers import file_checksum, resolve_data_dir
from pytest_benchaudit.dataset.suites import Suite
from pytest_benchaudit.importers.common import (
    Difference,
    ImportedRun,
    ImportReport,
    ImportSourceError,
    RecordExtras,
    TaskCounts,
    _load_suite,
    _read_rows,
    _record,
    _task_context,
    _task_summary,
    _TaskContext,
    _write_run,
    run_dir_name,
)
from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow
from pytest_benchaudit.pipeline.types import Message, Question, Request
from pytest_benchaudit.prompt.templates import render_request
from pytest_benchaudit.runs.run_meta import RunSource, TaskOverride
from pytest_benchaudit.runs.store import new_run_id

# --------------------------------------------------------------------------- CTI-Bench responses

# suite task -> released responses file
CTI_FILES = {
    "mcq": "cti-mcq-responses.tsv",
    "rcm": "cti-rcm-responses.tsv",
    "rcm_2021": "cti-rcm-2021-responses.tsv",
    "vsp": "cti-vsp-responses.tsv",
    "taa": "cti-taa-responses.tsv",
}
CTI_NOTE = (
    "Raw outputs were not published with these files: the released responses TSVs hold only the already-"
    "extracted answers ('X' = refusal or error), and the notebook admits some responses had to be collected "
    "manually. raw_output is the extracted answer as published (released_prediction), re-read with the "
    "released layer's rule; request is what the released notebook sends (system message for GPT models, "
    "system text glued to the prompt for Gemini / Llama-3), with the released parameters. No ATE responses "
    "were released."
)
# CTI-TAA's released extraction was by hand: the published names are its output, read whole.
CTI_TASK_OVERRIDES: dict[str, list[tuple[str, JsonValue]]] = {"taa": [("extraction.rule", "whole_answer")]}
CTI_OVERRIDE_REASON = {
    "taa": "the released extraction was manual (format_taa only flattens the response); "
    "the published names are its result, read whole ('whole_answer')"
}


# model-prediction.ipynb writes the literal cell 'Error' when the model's API call raised: the
# request failed, so it is an inference error, not an answer the rule could not read.
API_ERROR_CELL = "Error"
API_ERROR_DETAIL = "the released response is the notebook's 'Error' cell: the API call failed, no answer came back"


def _cti_request(ctx: _TaskContext, suite: Suite, question: Question, model: str) -> Request:
    req = render_request(ctx.pipeline, suite.templates[ctx.pipeline.prompt.template], question)
    if not model.lower().startswith("chatgpt") and req.messages and req.messages[0].role == "system":
        # The notebook's Gemini and Replicate paths glue the system text to the prompt with a space.
        system, first, *rest = req.messages
        glued = Message(role="user", content=f"{system.content} {first.content}")
        note = (
            "Gemini / Replicate path of the released notebook: system text prepended to the prompt "
            "with a space (prompt.format.system_role=prepend_user)"
        )
        req = req.model_copy(update={"messages": (glued, *rest), "adjustments": (*req.adjustments, note)})
    return req


def import_cti_bench_responses(
    source: Path,
    report_dir: Path,
    suites_dir: Path,
    data_dir: str | None = None,
    log: Callable[[str], None] = lambda msg: None,
) -> list[ImportedRun]:
    """Turn CTI-Bench's released ``responses/*.tsv`` into one run directory per model."""
    source = Path(source)
    if not source.is_dir():
        raise ImportSourceError(f"{source}: not a directory (expected CTI-Bench's evaluation/responses/ folder)")
    suite = _load_suite(suites_dir, "cti_bench")
    root, origin = resolve_data_dir(data_dir)
    contexts = {task: _task_context(suite, task, root, origin, CTI_TASK_OVERRIDES.get(task, [])) for task in CTI_FILES}
    tables: dict[str, list[tuple[str, dict[str, str]]]] = {}  # a TSV row's cells, by column
    models: list[str] | None = None
    source_checksums: dict[str, str] = {}
    for task, name in CTI_FILES.items():
        path = source / name
        rows = [(label, {col: str(cell) for col, cell in row.items()}) for label, row in _read_rows(path, "tsv")]
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
            raise ImportSourceError(
                f"{path}: model columns {', '.join(cols)} differ from "
                f"{', '.join(models)} in {source / CTI_FILES['mcq']}"
            )
        if len(rows) != len(ctx.questions):
            raise ImportSourceError(
                f"{path}: {len(rows)} rows, but {ctx.data_file} has {len(ctx.questions)} "
                "questions; rows are matched to the benchmark file by order"
            )
        for (label, row), question in zip(rows, ctx.questions):
            if row["GT"].strip() != question.gold.strip():
                raise ImportSourceError(
                    f"{path}: {label}: GT {row['GT']!r} differs from {question.gold!r} in row "
                    f"{question.index + 1} of {ctx.data_file} (rows are matched by order)"
                )
        tables[task] = rows
        source_checksums[name] = file_checksum(path)
    assert models is not None
    slugs: dict[str, str] = {}
    for model in models:
        slug = run_dir_name(model)
        if slug in slugs:
            raise ImportSourceError(f"{source}: models {slugs[slug]!r} and {model!r} map to the same run name {slug!r}")
        slugs[slug] = model

    cards: Cards = {ctx.key: ctx.card for ctx in contexts.values()}
    checksums: dict[str, str] = {}
    for ctx in contexts.values():
        checksums.update(ctx.checksums)
    prepared: list[tuple[str, list[RecordRow], list[Difference], dict[str, TaskCounts]]] = []
    bar = Progress(len(models) * sum(len(rows) for rows in tables.values()), "import", "rows")
    for model in models:
        records: list[RecordRow] = []
        differences: list[Difference] = []
        counts: dict[str, TaskCounts] = {}
        for task, rows in tables.items():
            ctx = contexts[task]
            agree = 0
            for (label, row), question in bar.count(zip(rows, ctx.questions)):
                answer = row[model]
                extra: RecordExtras = {"released_prediction": answer, "source_row": label}
                rec = _record(
                    ctx,
                    question,
                    _cti_request(ctx, suite, question, model),
                    answer,
                    model,
                    extra,
                    error=API_ERROR_DETAIL if answer.strip() == API_ERROR_CELL else None,
                )
                records.append(rec)
                same = rec["valid"] and (rec["prediction"] or "").upper() == answer.strip().upper()
                agree += same
                if not same:
                    reason = (
                        f"not counted by the released scorer: {rec['invalid_reason']} ({rec['extraction_detail']})"
                        if not rec["valid"]
                        else f"read as {rec['prediction']!r}"
                    )
                    differences.append(
                        {
                            "task": task,
                            "question_id": question.id,
                            "question_index": question.index,
                            "source_row": f"{CTI_FILES[task]}: {label}",
                            "prediction": rec["prediction"],
                            "released_prediction": answer,
                            "score": rec["score"],
                            "reason": reason,
                        }
                    )
            counts[task] = {"prediction_agree": agree, "prediction_differ": len(rows) - agree}
        prepared.append((model, records, differences, counts))
    bar.close()

    stamp = new_run_id()
    out = []
    for model, records, differences, counts in prepared:
        results = summarize(records, cards)
        report: ImportReport = {
            "source": {"kind": "cti-bench-responses", "model": model},
            "tasks": _task_summary(results, {}, counts),
            "note": "CTI-Bench publishes no per-item scores: the differences listed are rows whose published "
            "answer the released rule does not read as itself (e.g. not a letter / CWE id / vector), "
            "which the released scorer leaves out of its denominator.",
            "differences": differences,
        }
        src: RunSource = {
            "kind": "cti-bench-responses",
            "path": str(source.resolve()),
            "model": model,
            "column": model,
            "files": dict(CTI_FILES),
            "file_checksums": source_checksums,
            "matched_by": "row order, checked against the benchmark file's gold for every row",
            "raw_outputs_published": False,
            "note": CTI_NOTE,
        }
        task_overrides: dict[str, TaskOverride] = {
            f"cti_bench.{t}": {"fields": dict(ov), "why": CTI_OVERRIDE_REASON[t]}
            for t, ov in CTI_TASK_OVERRIDES.items()
        }
        run = _write_run(
            report_dir,
            "cti_bench",
            model,
            records,
            cards,
            checksums,
            src,
            report,
            origin,
            {"task_overrides": task_overrides, "scores": {r["task"]: r["score"] for r in results}},
            stamp,
        )
        log(f"{model}: {run.path} ({run.n_records} records)")
        out.append(run)
    return out
