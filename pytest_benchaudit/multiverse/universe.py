"""``benchaudit multiverse RUN...``: every defensible pipeline of each task at once, and what survives it.

:func:`build_multiverse` reads the runs (:mod:`.cells`), takes each task's space from its suite
(:mod:`.space`: declared in ``[tasks.T.multiverse]``, else the defaults), enumerates it
(:mod:`.enumerate_specs`), scores every model under every specification from the stored outputs
(:mod:`.fast_rescore`: each specification's score is ``benchaudit rescore RUN --set ...``'s), and
reports per model, per pair and per field (:mod:`.robustness`, :mod:`.variance`) with a verdict per
benchmark first (:mod:`.mv_verdict`): the ``multiverse.json`` document (:mod:`.mv_documents`).

A task whose stored pipeline reads a judge's verdict is left out (its readings cannot be made again
offline under other fields); so are specifications a field left ``unspecified`` cannot score (the
model has no score there).  docs/multiverse.md describes the method and every number.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import JsonValue

from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.compare.runsets import expand_runs
from pytest_benchaudit.dataset.suites import Suite, SuiteError, load_suite, suite_path
from pytest_benchaudit.diagnose.flips import OrderFlip
from pytest_benchaudit.multiverse.cells import LoadedRuns, TaskRecords, gather
from pytest_benchaudit.multiverse.enumerate_specs import MAX_SPECS, Enumeration, enumerate_specs
from pytest_benchaudit.multiverse.fast_rescore import TaskScorer
from pytest_benchaudit.multiverse.mv_documents import (
    MULTIVERSE,
    MULTIVERSE_VERSION,
    FieldShare,
    MultiverseDocument,
    SkipRow,
    SpaceRow,
    SpecRow,
    VarianceRow,
    VarianceTerm,
)
from pytest_benchaudit.multiverse.mv_verdict import verdicts
from pytest_benchaudit.multiverse.robustness import Grid, model_rows, pair_rows, significance
from pytest_benchaudit.multiverse.space import (
    GENERATIONS,
    Evidence,
    TaskSpace,
    declared_space,
    default_space,
    metric_scale,
)
from pytest_benchaudit.multiverse.variance import decompose
from pytest_benchaudit.pipeline.record_documents import PipelineCard
from pytest_benchaudit.pipeline.stages import PipelineError, is_unspecified
from pytest_benchaudit.rescore.records import pipeline_from_card
from pytest_benchaudit.rescore.run_dirs import _Resources
from pytest_benchaudit.runs.store import load_run
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.scoring.names import rule_info, unknown_name
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = [
    "MultiverseError",
    "build_multiverse",
    "multiverse_of",
    "order_flips",
    "suite_spaces",
    "space_row",
    "task_space",
    "write_document",
]

HOW = (
    "each specification re-scores the stored outputs (the score benchaudit rescore --set gives); "
    "upstream fields vary only where the runs hold their generations; see docs/multiverse.md"
)
_SCORING = ("extraction.rule", "extraction.reasoning", "scoring.metric", "scoring.denominator")


def _unscorable(fields: Mapping[str, JsonValue]) -> bool:
    """A scoring field missing or ``unspecified``, or naming a rule or metric that does not exist."""
    if any(is_unspecified(fields.get(f, "unspecified")) for f in _SCORING):
        return True
    return any(unknown_name(f, fields[f]) for f in ("extraction.rule", "scoring.metric"))


class MultiverseError(BenchauditError):
    """The runs or a suite cannot give a multiverse as asked; the message says why."""


def _suite(suites_dir: Path, bench: str, cache: dict[str, Suite | str]) -> Suite | str:
    """The benchmark's suite, or why there is none (the space then comes from the runs alone)."""
    if bench not in cache:
        try:
            cache[bench] = load_suite(suite_path(suites_dir, bench))
        except SuiteError as err:
            cache[bench] = str(err)
    return cache[bench]


def task_space(
    suite: Suite | str,
    bench: str,
    task: str,
    evidence: Evidence,
    anchor: str | None,
    base_card: PipelineCard | None = None,
) -> TaskSpace:
    """The task's space: its suite's declared table, else the defaults over its layers (none when the
    suite cannot be read: then the runs' own values and the registry's)."""
    layers = {}
    notes: list[str] = []
    if isinstance(suite, str):
        notes.append(f"no suite: {suite}; the space holds the runs' values and the registry's")
    elif task in suite.tasks:
        spec = suite.tasks[task]
        layers = {name: suite.pipeline(task, name) for name in spec.layers}
        if spec.multiverse:
            if base_card is not None:
                base = pipeline_from_card(base_card)
            else:
                base = next(iter(layers.values()))
            return declared_space(
                bench,
                task,
                spec.multiverse,
                base,
                evidence,
                f"{suite.path}: [tasks.{task}.multiverse]",
                tuple(spec.resources),
            )
    space = default_space(bench, task, layers, evidence, anchor)
    return TaskSpace(space.benchmark, space.task, space.axes, space.source, space.left_out, (*notes, *space.notes))


def space_row(space: TaskSpace, enum: Enumeration | None, notes: Sequence[str] = ()) -> SpaceRow:
    """The document's row of a space (``enum`` None: not enumerated, as ``--list`` prints it)."""
    return {
        "benchmark": space.benchmark,
        "task": space.task,
        "source": "suite" if space.source == "suite" else "default",
        "fields": [
            {"field": a.field, "upstream": a.upstream, "values": [{"value": v.value, "why": v.why} for v in a.values]}
            for a in space.axes
        ],
        "left_out": [{"field": x.field, "value": x.value, "why": x.why} for x in space.left_out],
        "size": space.size,
        "enumerated": len(enum.specs) if enum else 0,
        "sampled": bool(enum and enum.sampled),
        "sample_seed": enum.seed if enum else None,
        "notes": [*space.notes, *notes],
    }


def suite_spaces(bench: str, suites_dir: Path) -> list[SpaceRow]:
    """``--list BENCH``: each task's space before any run (no generation sets; the metric scale kept is
    the released layer's, else the first layer's that names one)."""
    suite = _suite(suites_dir, bench, {})
    if isinstance(suite, str):
        raise MultiverseError(suite)
    rows = []
    for task in suite.tasks:
        metrics = {name: suite.pipeline(task, name).scoring.metric for name in suite.layer_names(task)}
        named = [m for name, m in sorted(metrics.items(), key=lambda x: x[0] != "released") if not is_unspecified(m)]
        choices = suite.tasks[task].data.get("choices")
        options = {len(choices)} if isinstance(choices, (list, dict)) else set()  # one column per option
        try:
            space = task_space(suite, bench, task, Evidence(option_counts=options), named[0] if named else None)
        except PipelineError as err:
            raise MultiverseError(str(err)) from None
        rows.append(space_row(space, None))
    return rows


def _judged(records: TaskRecords) -> str | None:
    for cell in records.cells:
        fields = cell.card.get("fields") or {}
        info = METRIC_INFO.get(str(fields.get("scoring.metric")))
        if rule_info(str(fields.get("extraction.rule"))).reads == "judge" or (info is not None and info.needs_judge):
            return "its stored pipeline reads a judge's verdict, which cannot be read again offline under other fields"
    return None


def _grid(
    space: TaskSpace, enum: Enumeration, records: TaskRecords, resources: Callable[[str], Resources], notes: list[str]
) -> Grid:
    """Every cell scored under every enumerated specification."""
    scorer = TaskScorer(records.cells, resources)
    models = sorted({c.model for c in records.cells})
    first = records.cells[0].card.get("fields") or {}
    metrics = space.axis("scoring.metric")
    metric = ", ".join(str(v.value) for v in metrics.values) if metrics else str(first.get("scoring.metric"))
    lib = bool(METRIC_INFO[str(metrics.values[0].value if metrics else first.get("scoring.metric"))].lower_is_better)
    grid = Grid(space.key, space, list(enum.specs), models, lib, metric, [], [])
    unscorable = 0
    for spec in enum.specs:
        values = spec.values(space)
        generations = values.pop(GENERATIONS, None)
        scores: dict[str, float | None] = dict.fromkeys(models)
        answers = {}
        for i, cell in enumerate(records.cells):
            if generations is not None and cell.generations != generations:
                continue
            fields = {**(cell.card.get("fields") or {}), **values}
            if _unscorable(fields):
                unscorable += 1
                continue
            got = scorer.score(i, fields)
            scores[cell.model] = got.headline
            if got.answers is not None:
                answers[cell.model] = got.answers
        grid.scores.append(scores)
        grid.answers.append(answers)
    if unscorable:
        notes.append(
            f"{unscorable} model x specification cells have a scoring field unspecified (or an unknown rule "
            "or metric): no score there"
        )
    return grid


def _variance(grid: Grid, sampled: bool) -> list[VarianceRow]:
    """The pooled decomposition over the models scored in every specification, then each model's."""
    axes = grid.space.axes
    fields = [a.field for a in axes]
    n_levels = [len(a.values) for a in axes]
    levels = [spec.levels for spec in grid.specs]
    complete = [m for m in grid.models if all(s.get(m) is not None for s in grid.scores)]
    rows: list[VarianceRow] = []
    for model in [None, *complete]:
        chosen = complete if model is None else [model]
        ys = [[float(s[m] or 0.0) for s in grid.scores] for m in chosen]
        d = decompose(levels, ys, fields, n_levels)
        terms: list[VarianceTerm] = [{"fields": [f], "share": d.share(ss)} for f, ss in d.main.items()]
        terms += [{"fields": list(pair), "share": d.share(ss)} for pair, ss in d.interactions.items()]
        shares: list[FieldShare] = sorted(
            ({"field": f, "share": d.field_share(f)} for f in d.fields), key=lambda x: (-x["share"], x["field"])
        )
        left = [m for m in grid.models if m not in complete]
        note = "no variance: every specification gives the same score" if d.total == 0 else ""
        if model is None and left:
            note = "; ".join(
                x for x in (note, f"models without a score in every specification left out: {', '.join(left)}") if x
            )
        n = len(chosen) * len(grid.scores)
        rows.append(
            {
                "task": grid.key,
                "model": model,
                "exact": not sampled,
                "total_ss": d.total,
                "sd": (d.total / n) ** 0.5 if n else 0.0,
                "fields": shares,
                "higher_order": d.share(d.higher_order),
                "terms": terms,
                "note": note,
            }
        )
    return rows


def build_multiverse(
    run_paths: Sequence[Path],
    *,
    suites_dir: Path = Path("suites"),
    data_dir: str | None = None,
    seed: int = 0,
    resamples: int = 1000,
    max_specs: int = MAX_SPECS,
    warn: Callable[[str], None] = lambda msg: print(f"warning: {msg}", file=sys.stderr),
) -> MultiverseDocument:
    """The multiverse document of the runs in ``run_paths`` (run directories or folders of them)."""
    try:
        paths = expand_runs(run_paths)
    except BenchauditError as err:
        raise MultiverseError(str(err)) from None
    loaded = [(str(p), *load_run(p, warn, require_records=True)) for p in paths]
    return multiverse_of(
        loaded, suites_dir=suites_dir, data_dir=data_dir, seed=seed, resamples=resamples, max_specs=max_specs
    )


def multiverse_of(
    loaded: LoadedRuns,
    *,
    suites_dir: Path = Path("suites"),
    data_dir: str | None = None,
    seed: int = 0,
    resamples: int = 1000,
    max_specs: int = MAX_SPECS,
) -> MultiverseDocument:
    """The multiverse document of runs already loaded: (path, run.json, records) each."""
    if max_specs < 1:
        raise MultiverseError(f"--max-specs must be at least 1, not {max_specs}")
    tasks = gather(loaded)
    resources = _Resources(suites_dir, data_dir)
    suites: dict[str, Suite | str] = {}
    doc: MultiverseDocument = {
        "version": MULTIVERSE_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "runs": sorted(p for p, _m, _r in loaded),
        "seed": seed,
        "resamples": resamples,
        "max_specs": max_specs,
        "verdicts": [],
        "spaces": [],
        "models": [],
        "pairs": [],
        "variance": [],
        "specifications": [],
        "skipped": [],
        "how": HOW,
    }
    for key, records in sorted(tasks.items()):
        why = _judged(records)
        if why:
            doc["skipped"].append(SkipRow(task=key, reason=why))
            continue
        anchor = str((records.cells[0].card.get("fields") or {}).get("scoring.metric"))
        if metric_scale(anchor) is None:
            doc["skipped"].append(SkipRow(task=key, reason=f"its metric {anchor!r} is not one the registry knows"))
            continue
        suite = _suite(suites_dir, records.benchmark, suites)
        try:
            space = task_space(suite, records.benchmark, records.task, records.evidence, anchor, records.cells[0].card)
        except PipelineError as err:
            raise MultiverseError(str(err)) from None
        enum = enumerate_specs(space, seed, max_specs)
        notes = list(records.notes)
        grid = _grid(space, enum, records, lambda metric: resources(records.benchmark, records.task, metric), notes)  # noqa: B023 - called within this iteration
        significance(grid)
        doc["spaces"].append(space_row(space, enum, notes))
        doc["models"] += model_rows(grid, resamples, seed)
        doc["pairs"] += pair_rows(grid)
        doc["variance"] += _variance(grid, enum.sampled)
        doc["specifications"] += [
            SpecRow(task=key, spec=spec.number, fields=spec.values(space), scores=scores)
            for spec, scores in zip(grid.specs, grid.scores)
        ]
    doc["verdicts"] = verdicts(doc["spaces"], doc["pairs"])
    return doc


def order_flips(doc: MultiverseDocument) -> list[OrderFlip]:
    """The document's pairs as diagnose's BA07 reads them (:mod:`pytest_benchaudit.diagnose.flips`)."""
    out = []
    for p in doc["pairs"]:
        bench, _, task = p["task"].partition(".")
        out.append(
            OrderFlip(
                bench,
                task,
                p["model_a"],
                p["model_b"],
                p["n_specs"],
                p["a_better"],
                p["b_better"],
                p["significant_a"],
                p["significant_b"],
                tuple((f["field"], f["share"]) for f in p["flip_fields"]),
            )
        )
    return out


def write_document(doc: MultiverseDocument, path: Path) -> Path:
    """Check ``doc`` against its type (:data:`~.mv_documents.MULTIVERSE`) and write it as JSON (atomically)."""
    MULTIVERSE.validate_python(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
