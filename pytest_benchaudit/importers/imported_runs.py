"""Another harness's log as a run directory: the importer-neutral half of Inspect, lm-eval and EEE imports.

An importer reads its format into a :class:`HarnessTask` (what the log says of one task x model:
the harness's own reported metric and its denominator, the generation settings it states, which
of our peer layers it may be) and a stream of :class:`ImportedSample` (one sample and epoch: the
request as sent, the raw output, why it stopped, usage, error, the harness's own answer and score).
:func:`import_task` turns them into one run directory:

1. **Peer layer or generic.**  For each candidate (suite, task, layer) of the task's name, every
   sample's request must be what that layer renders for one of its questions (:mod:`.peer_match`).
   Then the records are scored as a pytest run under that layer scores them (``evaluate``), the
   harness's answer and score kept beside ours (``released_prediction`` / ``released_score`` /
   ``released_value``), and ``rescore`` / ``audit --toward`` work on the run.  The first request
   that differs is a *near miss*: the reason (the first differing field) goes into the import
   report and the task imports as a generic one.
2. **Generic**: the card is an ``imported`` layer holding what the log states, each field's ``why``
   naming the log field it came from, every other field ``unspecified``.  A record's prediction
   and score are the harness's own; a sample the harness did not score (an error) is invalid
   (``inference_error``), and ``scoring.denominator`` is ``valid``: the harness's denominator.
3. **The headline check**: our score over the samples the harness scored, its repeats reduced as
   the harness reduces epochs, must equal the harness's reported metric.  A mismatch is an
   :class:`ImportMismatch` naming the task, both numbers and the first sample that differs.
4. **Written whole or not at all**: records are streamed into a staging folder under the report
   directory (one sample in memory at a time; the summary, the check and the duplicate check keep
   a few numbers per sample) and renamed into place at the end; on any error the folder is removed.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from pydantic import JsonValue

from pytest_benchaudit.aggregate.results import benchmark_scores
from pytest_benchaudit.importers.common import ImportedRun, ImportSourceError, _versions, run_dir_name
from pytest_benchaudit.importers.headline_check import IMPORTED_LAYER, Accumulator, ImportMismatch
from pytest_benchaudit.importers.headline_check import check as headline_check
from pytest_benchaudit.importers.log_samples import HarnessTask, ImportedSample, ImportOptions
from pytest_benchaudit.importers.peer_match import LayerIndex, load_layer, sent_fields
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordExtras, RecordRow
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, build_pipeline
from pytest_benchaudit.pipeline.types import (
    INVALID_REASONS,
    ContinuationLogprobs,
    Extraction,
    Generation,
    InvalidReason,
    Question,
    Score,
)
from pytest_benchaudit.runs.run_meta import RunSource
from pytest_benchaudit.runs.store import RunDirectory, new_run_id
from pytest_benchaudit.scoring.evaluate import evaluate

# The log's types are named here too, where the importers have always taken them from.
__all__ = ["HarnessTask", "ImportMismatch", "ImportOptions", "ImportedSample", "import_task", "imported_pipeline"]


class _NearMiss(Exception):
    pass


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "task"


def _nest(flat: dict[str, JsonValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        *heads, last = path.split(".")
        for head in heads:
            node = node.setdefault(head, {})
        node[last] = value
    return out


def imported_pipeline(task: HarnessTask) -> Pipeline:
    """The ``imported`` layer: what the log states, with the log field as each one's ``why``."""
    flat = {name: value for name, (value, _why) in task.stated.items()}
    why = {name: why for name, (_value, why) in task.stated.items()}
    fields = _nest(flat)
    try:
        return build_pipeline(
            IMPORTED_LAYER,
            task.benchmark or _slug(task.harness),
            _slug(task.task),
            {**fields, "why": why, "notes": tuple(task.notes)},
        )
    except PipelineError as err:
        raise ImportSourceError(f"{task.files[0]}: the log's settings are not a valid pipeline: {err}") from None


def _generation(sample: ImportedSample) -> Generation:
    conts = None
    if sample.continuations is not None:
        conts = tuple(
            ContinuationLogprobs(
                continuation=c["continuation"],
                tokens=tuple(c["tokens"]),
                logprobs=tuple(c["logprobs"]),
                missing=c["missing"],
            )
            for c in sample.continuations
        )
    return Generation(
        text=sample.output,
        finish_reason=sample.finish_reason,
        error=sample.error,
        usage=sample.usage,
        served_model=sample.served_model,
        continuations=conts,
    )


def _extras(sample: ImportedSample) -> RecordExtras:
    return {
        "released_prediction": sample.peer_answer,
        "released_score": sample.peer_score,
        "released_value": sample.peer_value,
        "released_id": sample.sample_id,
        "source_row": sample.source_row,
    }


class _Generic:
    """Questions made from the samples themselves (id, target, choices, text), in first-seen order."""

    def __init__(self, task: HarnessTask, pipeline: Pipeline) -> None:
        self.task, self.pipeline = task, pipeline
        self.index: dict[str, int] = {}

    def record(self, sample: ImportedSample, item_id: str) -> RecordRow:
        index = self.index.setdefault(sample.sample_id, len(self.index))
        question = Question(
            benchmark=self.pipeline.benchmark,
            task=self.pipeline.task,
            id=sample.sample_id,
            index=index,
            text=sample.question_text,
            choices=sample.choices,
            gold=sample.target,
        )
        if sample.invalid_reason in INVALID_REASONS:
            extraction = Extraction(
                invalid_reason=cast(InvalidReason, sample.invalid_reason), detail="invalid as the log says"
            )
            score = Score(value=sample.peer_value or 0.0, correct=False)
        elif sample.error is not None:
            extraction = Extraction(invalid_reason="inference_error", detail=sample.error)
            score = Score(value=0.0, correct=False)
        elif sample.peer_value is None:
            extraction = Extraction(invalid_reason="unparseable", detail="the harness did not score this sample")
            score = Score(value=0.0, correct=False)
        else:
            extraction = Extraction(
                prediction=sample.peer_answer if sample.peer_answer is not None else "",
                detail="the harness's own answer and score",
            )
            score = Score(value=sample.peer_value, correct=sample.peer_value >= 1.0)
        rec = evaluate(
            question,
            self.pipeline,
            sample.request,
            _generation(sample),
            model=self.task.model,
            repeat=sample.epoch - 1,
            item_id=item_id,
            extraction=extraction,
            score=score,
            extra=_extras(sample),
        )
        return cast(RecordRow, rec.model_dump(mode="json"))


def _matched_record(layer: LayerIndex, task: HarnessTask, sample: ImportedSample, item_id: str) -> RecordRow:
    sent = sent_fields(sample.request)
    question = layer.lookup(sent, task.compared)
    if question is None:
        raise _NearMiss(layer.first_difference(sent, task.compared))
    rec = evaluate(
        question,
        layer.pipeline,
        layer.rendered[question.id],
        _generation(sample),
        model=task.model,
        repeat=sample.epoch - 1,
        item_id=item_id,
        resources=layer.resources,
        extra=_extras(sample),
    )
    return cast(RecordRow, rec.model_dump(mode="json"))


def import_task(
    task: HarnessTask, samples: Callable[[], Iterator[ImportedSample]], options: ImportOptions
) -> ImportedRun:
    """One run directory for ``task`` (see the module docstring); raises without leaving anything behind."""
    near_misses: list[str] = []
    for bench, name, layer_name in task.candidates:
        layer = load_layer(options.suites_dir, options.data_dir, options.data_origin, bench, name, layer_name)
        if isinstance(layer, str):
            near_misses.append(layer)
            continue
        layer.index(task.compared)
        try:
            return _write(task, samples(), options, layer, near_misses)
        except _NearMiss as miss:
            near_misses.append(f"not the {layer_name!r} layer of {bench}.{name}: {miss}")
            options.log(f"{task.task} [{task.model}]: near miss, imported as a generic task: {near_misses[-1]}")
    return _write(task, samples(), options, None, near_misses)


def _write(
    task: HarnessTask,
    samples: Iterable[ImportedSample],
    options: ImportOptions,
    layer: LayerIndex | None,
    near_misses: list[str],
) -> ImportedRun:
    report_dir = Path(options.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    staging = report_dir / f".importing-{secrets.token_hex(4)}"
    stamp = options.stamp or new_run_id()
    name = f"{stamp}-{_slug(task.harness)}-{_slug(task.task)}-{run_dir_name(task.model)}"
    try:
        run = _stream(task, samples, options, layer, near_misses, staging, name)
        target = report_dir / name
        os.replace(staging / name, target)
        run.path = target
        return run
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stream(
    task: HarnessTask,
    samples: Iterable[ImportedSample],
    options: ImportOptions,
    layer: LayerIndex | None,
    near_misses: list[str],
    staging: Path,
    name: str,
) -> ImportedRun:
    if layer is not None:
        card: PipelineCard = layer.pipeline.card()
        card["dataset_checksums"] = {layer.data_file.name: _sha256(layer.data_file)}
        key = layer.key
        generic = None
    else:
        pipeline = imported_pipeline(task)
        card = pipeline.card()
        key = f"{pipeline.benchmark}.{pipeline.task}"
        generic = _Generic(task, pipeline)
    cards: Cards = {key: card}
    acc = Accumulator(task, cards)
    run = RunDirectory(staging, name)
    try:
        for sample in samples:
            item_id = f"{key}::{sample.sample_id}[{task.model}]" + (f"#{sample.epoch}" if sample.epoch > 1 else "")
            record = (
                generic.record(sample, item_id)
                if generic is not None
                else _matched_record(cast(LayerIndex, layer), task, sample, item_id)
            )
            run.append(record)
            acc.add(sample, record)
        if acc.n_samples == 0:
            raise ImportSourceError(
                f"{task.files[0]}: the log holds no samples of {task.task} (was it run without "
                "logging samples?): nothing to import"
            )
        results = acc.summary.results()
        check = headline_check(
            task,
            acc,
            results,
            layer.layer if layer else None,
            f"{layer.key} {layer.layer}" if layer else None,
            near_misses,
        )
        run.write_run(
            source=_source(task, layer),
            pipeline=card.get("pipeline"),
            overrides={},
            versions={**_versions(), task.harness: task.harness_version},
            models=[{"spec": task.model, "kind": "imported", "served_model_ids": []}],
            data_dir_origin=options.data_origin if layer is not None else "not read",
            pipeline_cards=cards,
            scores={r["task"]: r["score"] for r in results},
        )
        run.write_json(
            "summary.json", {"results": results, "benchmarks": benchmark_scores(results, cards), "gates": []}
        )
        run.write_json("import_report.json", check)
        run.finish()
    except BaseException:
        run.abandon()
        raise
    options.log(
        f"{task.task} [{task.model}]: {acc.n_samples} samples -> {layer.layer if layer else IMPORTED_LAYER} "
        f"layer, {task.metric} {check['reported']} (harness) = {check['ours_on_harness_denominator']} (ours)"
    )
    return ImportedRun(task.model, staging / name, acc.n_samples, 0, results)


def _source(task: HarnessTask, layer: LayerIndex | None) -> RunSource:
    source: RunSource = {
        "kind": f"{task.harness}-log",
        "path": str(task.files[0].resolve()),
        "model": task.model,
        "files": {p.name: str(p.resolve()) for p in task.files},
        "file_checksums": {p.name: _sha256(p) for p in task.files},
        "matched_by": (
            f"every request equal to what the {layer.layer!r} layer of {layer.key} renders"
            if layer
            else "no peer layer matched: a generic task"
        ),
        "note": f"Imported from a {task.harness} {task.harness_version} log of {task.task}.",
    }
    if task.not_recorded:
        source["not_recorded"] = dict(task.not_recorded)
    if task.dataset_questions is not None:
        source["dataset_questions"] = task.dataset_questions
    return source


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
