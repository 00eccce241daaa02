"""Run-directory level re-scoring: ``benchaudit rescore`` (and the base of ``sweep``).

Reads a run directory (``run.json`` cards + ``records.jsonl``), re-scores every record
under a new pipeline (see :mod:`.records`), and writes a *new* run directory with the
same contracts, so ``show``, ``summarize``, ``sweep`` and later ``compare`` accept it.
No pytest, no model server.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import JsonValue

from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
from pytest_benchaudit.aggregate.summary_documents import TaskResult, VariantDelta
from pytest_benchaudit.common.errors import BenchauditError, did_you_mean
from pytest_benchaudit.common.progress import Progress, iterate
from pytest_benchaudit.dataset.readers import load_resources, resolve_data_dir
from pytest_benchaudit.dataset.suites import SuiteError, load_suite, suite_path
from pytest_benchaudit.pipeline.layering import retarget
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordRow
from pytest_benchaudit.pipeline.stages import DOWNSTREAM_STAGES, Pipeline, PipelineError, is_unspecified, leaf_fields
from pytest_benchaudit.pipeline.variants import card_key as variant_card_key
from pytest_benchaudit.rescore.records import pipeline_from_card, rescore_records
from pytest_benchaudit.runs.run_meta import RescoreSkip
from pytest_benchaudit.runs.store import RunDirectory, load_run
from pytest_benchaudit.scoring.extract import RULES
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["RescoreError", "rescore_run", "sweep_run", "card_key"]


class RescoreError(BenchauditError):
    """A run directory cannot be re-scored as asked; the message says why."""


def card_key(rec: RecordRow) -> str:
    """The pipeline-card key a record was scored under (see :func:`pipeline.variants.card_key`)."""
    return variant_card_key(rec["benchmark"], rec["task"], rec.get("variant") or "")


class _Resources:
    """Task resources (e.g. alias graphs), loaded from the data directory only when a metric needs them."""

    def __init__(self, suites_dir: Path, data_dir: str | None) -> None:
        self.suites_dir = suites_dir
        self.data_dir, self.origin = resolve_data_dir(data_dir)
        self._cache: dict[tuple[str, str], Resources] = {}

    def __call__(self, bench: str, task: str, metric: str) -> Resources:
        """The resources ``metric`` reads for ``bench.task`` ({} for a metric that reads none); a
        :class:`RescoreError` naming the metric and the task when the task's suite does not declare
        them all, never the scorer's KeyError mid-way."""
        why = self.unscorable(bench, task, metric)
        if why:
            raise RescoreError(why)
        return self._cache.get((bench, task), {})

    def unscorable(self, bench: str, task: str, metric: str) -> str | None:
        """Why ``metric`` cannot score ``bench.task`` (it reads resources the task's suite does not declare:
        ``--set scoring.metric=actor_graph`` on a run whose other tasks have no alias graph), or None.
        A declared file that cannot be read is a :class:`RescoreError` (the data's problem, not a skip)."""
        info = METRIC_INFO.get(metric)
        if info is None or not info.resources:
            return None
        path = suite_path(self.suites_dir, bench)
        if (bench, task) not in self._cache:
            try:
                suite = load_suite(path)
                if task not in suite.tasks:
                    raise SuiteError(f"{path}: no task {task!r}")
                self._cache[(bench, task)] = load_resources(suite, task, self.data_dir, self.origin)[0]
            except SuiteError as err:
                raise RescoreError(f"metric {metric!r} of {bench}.{task} needs its resource files: {err}") from None
        missing = [name for name in info.resources if name not in self._cache[(bench, task)]]
        if not missing:
            return None
        return (
            f"metric {metric!r} cannot score {bench}.{task}: it reads the task resource(s) {', '.join(missing)}, "
            f"which {path} does not declare under [tasks.{task}.resources]"
        )


def _layer(suites_dir: Path, bench: str, task: str, layer: str) -> Pipeline:
    try:
        return load_suite(suite_path(suites_dir, bench)).pipeline(task, layer)
    except (SuiteError, PipelineError) as err:
        raise RescoreError(str(err)) from None


class _Layers:
    """A layer per task, or the reason there is none: a task without that layer is skipped, as
    collection skips it; a layer that no task of the run defines is an unknown layer (an error
    listing the layers there are, with the nearest name)."""

    def __init__(self, suites_dir: Path, layer: str, option: str) -> None:
        self.suites_dir, self.layer, self.option = suites_dir, layer, option  # option: what the user gave it as
        self.seen: set[str] = set()

    def get(self, bench: str, task: str) -> Pipeline | str:
        path = suite_path(self.suites_dir, bench)
        if not path.is_file():
            # A benchmark with no suite here (an imported log's generic task): nothing to re-score toward.
            return f"{bench}.{task}: no suite {bench!r} under {self.suites_dir}, so no {self.layer!r} pipeline"
        try:
            suite = load_suite(path)
            if task not in suite.tasks:
                raise RescoreError(
                    f"{suite_path(self.suites_dir, bench)}: no task {task!r}; tasks: {', '.join(suite.tasks)}"
                )
            layers = suite.layer_names(task)
            self.seen.update(layers)
            if self.layer not in layers:
                return f"{bench}.{task} defines no {self.layer!r} pipeline (available: {', '.join(layers)})"
            return suite.pipeline(task, self.layer)
        except (SuiteError, PipelineError) as err:
            raise RescoreError(str(err)) from None

    def check_known(self) -> None:
        if self.seen and self.layer not in self.seen:
            raise RescoreError(
                f"{self.option} {self.layer}: unknown pipeline layer {self.layer!r}"
                f"{did_you_mean(self.layer, self.seen)}; layers of the run's suites: "
                f"{', '.join(sorted(self.seen))}"
            )


def unscorable_fields(pipeline: Pipeline) -> list[str]:
    """Downstream fields left ``unspecified`` that scoring needs (as collection skips their items)."""
    return pipeline.unspecified_fields(("extraction", "scoring"))


def _skip_reason(key: str, pipeline: Pipeline) -> str | None:
    missing = unscorable_fields(pipeline)
    if not missing:
        return None
    return f"{key} under {pipeline.name!r}: {', '.join(missing)} unspecified; choose with --set FIELD=VALUE"


def rescore_run(
    run_dir: Path,
    *,
    layer: str | None = None,
    overrides: list[tuple[str, JsonValue]] | None = None,
    report_dir: Path | None = None,
    suites_dir: Path = Path("suites"),
    data_dir: str | None = None,
    warn: Callable[[str], None] = lambda msg: print(f"warning: {msg}", file=sys.stderr),
    stages: tuple[str, ...] = DOWNSTREAM_STAGES,
    option: str = "--pipeline",
) -> tuple[RunDirectory, list[TaskResult], Cards]:
    """Re-score ``run_dir`` and write a new run directory; return it with its results and cards.

    ``layer``: the layer whose ``stages`` are applied (default every downstream stage; ``("extraction",)``
    changes the extraction fields alone, the other downstream fields kept as stored); ``option``: the
    command-line option that named it, for the errors about it (``audit`` names its ``--toward``)."""
    meta, records = load_run(run_dir, warn, require_records=True)
    stored_cards: Cards = meta.get("pipeline_cards") or {}
    overrides = overrides or []
    pipelines: dict[str, Pipeline] = {}
    skipped: dict[str, str] = {}  # card key -> why its records are not re-scored
    layers = _Layers(suites_dir, layer, option) if layer else None
    resources = _Resources(suites_dir, data_dir)
    for key in sorted({card_key(r) for r in records}):
        card = stored_cards.get(key) or stored_cards.get(key.split("|", 1)[0])
        if card is None:
            raise RescoreError(f"{run_dir / 'run.json'}: no pipeline card for {key}; cannot tell what was asked")
        stored = _stored_pipeline(run_dir, key, card)
        target = layers.get(stored.benchmark, stored.task) if layers else None
        if isinstance(target, str):
            skipped[key] = target
            continue
        try:
            pipelines[key] = retarget(stored, target, overrides, stages)
        except PipelineError as err:
            raise RescoreError(f"{key}: {err}") from None
        # every task's resources are read before the first record is written
        why = _skip_reason(key, pipelines[key]) or resources.unscorable(
            stored.benchmark, stored.task, pipelines[key].scoring.metric
        )
        if why:
            skipped[key] = why
            del pipelines[key]
    if layers:
        layers.check_known()
    skips: list[RescoreSkip] = [
        {"task": key, "records": sum(1 for r in records if card_key(r) == key), "reason": why}
        for key, why in skipped.items()
    ]
    if not pipelines:
        raise RescoreError("nothing re-scored: " + "; ".join(f"{s['reason']} ({s['records']} records)" for s in skips))
    if skipped:
        records = [r for r in records if card_key(r) in pipelines]
    new_records = rescore_records(
        iterate(records, len(records), "rescore", "records"),
        lambda rec: pipelines[card_key(rec)],
        _task_resources(resources, pipelines.values()),
    )
    cards: Cards = {
        key: _rescored_card(p, stored_cards.get(key) or stored_cards.get(key.split("|", 1)[0]))
        for key, p in pipelines.items()
    }
    out = RunDirectory(report_dir or run_dir.parent)
    out.append_many(new_records)
    results = summarize(new_records, cards)
    out.write_json(
        "summary.json", {**summary_document(results, benchmark_scores(results, cards), [], cards), "skipped": skips}
    )
    out.finish(
        skipped=skips,
        source={
            "kind": "rescore",
            "run_dir": str(run_dir),
            "run_id": meta.get("run_id"),
            "pipeline": layer,
            "overrides": {k: v for k, v in overrides},
            "stages": list(stages) if layer else [],
        },
        rescored_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        models=meta.get("models", []),
        versions=meta.get("versions", {}),
        pipeline_cards=cards,
        dataset_checksums=meta.get("dataset_checksums", {}),
    )
    return out, results, cards


def _task_resources(resources: _Resources, pipelines: Iterable[Pipeline]) -> Callable[[str, str], Resources]:
    """Each task's resources for the scorer: those of a metric that reads them, whichever variant's pipeline
    names it (a variant's card key is not ``bench.task``, so it is looked up by the pipeline's task)."""
    metric = {
        (p.benchmark, p.task): p.scoring.metric
        for p in pipelines
        if (info := METRIC_INFO.get(p.scoring.metric)) is not None and info.resources
    }
    return lambda bench, task: resources(bench, task, metric[(bench, task)]) if (bench, task) in metric else {}


def _rescored_card(pipeline: Pipeline, stored: PipelineCard | None) -> PipelineCard:
    """The card of a re-scored task: the new pipeline's, with what was asked kept from the stored card
    (its upstream hash, which may cover what the fields do not hold, e.g. a template's text; those
    materials; the data files' checksums): re-scoring changes nothing upstream."""
    card: PipelineCard = {**pipeline.card(), "dataset_checksums": stored.get("dataset_checksums", {}) if stored else {}}
    if stored and stored.get("upstream_hash"):
        card["upstream_hash"] = stored["upstream_hash"]
    if stored and stored.get("materials"):
        card["materials"] = stored["materials"]
    return card


def _drop_unscorable(
    key: str, changes: list[tuple[str, list[JsonValue]]], where: str, n: int, warn: Callable[[str], None]
) -> list[tuple[str, list[JsonValue]]]:
    """``changes`` without downstream values of ``unspecified``: such a variant cannot be scored, so it
    is skipped with the field named, as collection skips items whose pipeline leaves a field unspecified."""
    out = []
    for field, values in changes:
        scorable = field.split(".")[0] not in ("extraction", "scoring")
        kept = [v for v in values if scorable or not is_unspecified(v)]
        if len(kept) < len(values):
            warn(
                f"{key}: {field} is unspecified ({where}): that variant is skipped ({n} records); "
                f"choose a value with --vary {field}=VALUE"
            )
        if kept:
            out.append((field, kept))
    return out


def _stored_pipeline(run_dir: Path, key: str, card: PipelineCard) -> Pipeline:
    """The pipeline a stored card describes, or an error naming the run and the card."""
    try:
        return pipeline_from_card(card)
    except (KeyError, TypeError, ValueError) as err:  # pydantic's ValidationError is a ValueError
        raise RescoreError(
            f"{run_dir / 'run.json'}: pipeline card {key!r} is not a valid card "
            f"({type(err).__name__}: {str(err).splitlines()[0]})"
        ) from None


def _downstream_leaves(pipeline: Pipeline) -> dict[str, JsonValue]:
    return dict(
        leaf_fields({k: v for k, v in pipeline.stages().items() if k in ("extraction", "scoring", "aggregation")})
    )


def sweep_run(
    run_dir: Path,
    vary: list[tuple[str, list[JsonValue]]],
    *,
    toward: str | None = None,
    suites_dir: Path = Path("suites"),
    data_dir: str | None = None,
    warn: Callable[[str], None] = lambda msg: print(f"warning: {msg}", file=sys.stderr),
) -> tuple[list[VariantDelta], list[TaskResult], Cards]:
    """Single-field counterfactuals from a stored run: (delta rows, results, cards).

    Each ``(field, value)`` of ``vary`` re-scores the run's base records with only that
    downstream field changed.  ``toward=LAYER`` adds one variant for every downstream field
    whose value in LAYER differs from the stored pipeline, which attributes the move from
    the stored pipeline to LAYER field by field.  Upstream fields are refused (they need
    new generations: use ``pytest --vary`` for those).
    """
    from pytest_benchaudit.aggregate.results import variant_deltas
    from pytest_benchaudit.pipeline.variants import build_variants

    meta, records = load_run(run_dir, warn, require_records=True)
    base_records = [r for r in records if not r.get("variant")]
    stored_cards: Cards = meta.get("pipeline_cards") or {}
    resources = _Resources(suites_dir, data_dir)
    cards: Cards = {}
    all_records: list[RecordRow] = list(base_records)
    by_key: dict[str, list[RecordRow]] = {}
    for rec in base_records:
        by_key.setdefault(card_key(rec), []).append(rec)
    bar = Progress(0, "sweep", "records")
    layers = _Layers(suites_dir, toward, "--toward") if toward else None
    notes: list[str] = []  # told after the layer is known to exist, so a typo gives one error only
    harness_own: list[str] = []  # imported tasks the harness extracted and scored: nothing to re-score
    user_warn, warn = warn, notes.append
    for key, recs in by_key.items():
        if key not in stored_cards:
            raise RescoreError(f"{run_dir / 'run.json'}: no pipeline card for {key}")
        stored = _stored_pipeline(run_dir, key, stored_cards[key])
        cards[key] = stored_cards[key]
        changes = [(f, list(values)) for f, values in vary]
        if layers:
            layer = layers.get(stored.benchmark, stored.task)
            if isinstance(layer, str):
                warn(f"{layer}: no --toward variants for {key}")
            else:
                target = _downstream_leaves(layer)
                mine = _downstream_leaves(stored)
                changes += [(f, [v]) for f, v in target.items() if mine.get(f) != v]
        changes = _drop_unscorable(key, changes, f"--toward {toward}" if toward else "--vary", len(recs), warn)
        try:
            for field, values in changes:  # refuse upstream fields with the field named
                for value in values:
                    retarget(stored, None, [(field, value)])
            variants = build_variants(stored, changes)[1:]
        except PipelineError as err:
            raise RescoreError(f"{key}: {err}") from None
        scorable = [v for v in variants if _scorable_here(v.pipeline)]
        if len(scorable) < len(variants):
            harness_own.append(
                f"{key}: {', '.join(v.name for v in variants if v not in scorable)} ({len(recs)} records)"
            )
            variants = scorable
        for variant in list(variants):  # a metric this task has no resource files for: that variant is skipped
            why = resources.unscorable(stored.benchmark, stored.task, variant.pipeline.scoring.metric)
            if why:
                warn(f"{key}: {why}: that variant is skipped ({len(recs)} records)")
                variants.remove(variant)
        bar.total = (bar.total or 0) + len(recs) * len(variants)
        for variant in variants:
            pipeline = variant.pipeline
            cards[f"{key}|{variant.name}"] = {**pipeline.card(), "variant": variant.info()}
            rescored = rescore_records(bar.count(recs), _constant(pipeline), _resources_under(resources, pipeline))
            all_records += [{**r, "variant": variant.name} for r in rescored]
    bar.close()
    if layers:
        layers.check_known()
    if harness_own:
        why = (
            "an imported task extracted and scored by its harness (extraction.rule unspecified, or "
            "scoring.metric a name of the harness's own): the variant has no rule or metric of ours to "
            "re-score with"
        )
        if len(all_records) == len(base_records):  # not one variant built: say so once, as the error
            raise RescoreError(f"{run_dir}: nothing to sweep: {why}: {', '.join(harness_own)}")
        notes.append(f"{', '.join(harness_own)}: skipped: {why}")
    for note in notes:
        user_warn(note)
    results = summarize(all_records, cards)
    return variant_deltas(results, cards), results, cards


def _scorable_here(pipeline: Pipeline) -> bool:
    """Whether this package can re-extract and re-score under ``pipeline``: not so for an imported generic task,
    whose ``imported`` card states what the log states (the rule ``unspecified``, the metric the harness's own
    name, e.g. ``inspect:choice/accuracy``)."""
    rule, metric = pipeline.extraction.rule, pipeline.scoring.metric
    return (not is_unspecified(rule) and rule in RULES) and (not is_unspecified(metric) and metric in METRIC_INFO)


def _constant(pipeline: Pipeline) -> Callable[[RecordRow], Pipeline]:
    """Every record under one pipeline (a sweep variant)."""
    return lambda _rec: pipeline


def _resources_under(resources: _Resources, pipeline: Pipeline) -> Callable[[str, str], Resources]:
    """The lookup files a variant's metric reads."""
    return lambda bench, task: resources(bench, task, pipeline.scoring.metric)
