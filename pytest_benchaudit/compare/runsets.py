"""Loading run directories into the run sets (sides) of a comparison.

A run set holds, per task key ``<benchmark>.<task>`` and model, the run's headline result and its
per-item base records (``--vary`` variants left out).  One (task, model) belongs to one run of a set.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.common.errors import BenchauditError, did_you_mean
from pytest_benchaudit.common.progress import iterate
from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.pipeline.variants import BASE, card_for
from pytest_benchaudit.runs.run_meta import RunMeta, run_layers
from pytest_benchaudit.runs.store import load_run

__all__ = ["CompareError", "LoadedRun", "RunSet", "expand_runs", "load_runs", "load_run_set"]


class CompareError(BenchauditError):
    """The runs cannot be compared as asked; the message says why."""


# --------------------------------------------------------------------------- loading


@dataclass
class LoadedRun:
    path: Path
    meta: RunMeta
    records: list[RecordRow]  # base records only
    n_variant_records: int = 0


@dataclass
class RunSet:
    """The results and per-item records of one side of a comparison."""

    label: str
    pipelines: list[str]
    runs: list[str]
    results: dict[str, dict[str, TaskResult]] = field(default_factory=dict)  # task key -> model -> result
    items: dict[tuple[str, str], list[RecordRow]] = field(default_factory=dict)  # (task key, model) -> records
    # (task key, model) -> the pipeline card its records were scored under (the reducer the paired rows use)
    cards: dict[tuple[str, str], PipelineCard] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def expand_runs(paths: Iterable[Path]) -> list[Path]:
    """Run directories named, or found one level under a folder named; in order, without repeats."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / "run.json").exists():  # a run directory, even one whose run.json is unusable (said when read)
            found = [p]
        elif p.is_dir():
            found = sorted(c for c in p.iterdir() if (c / "run.json").exists())
            if not found:
                raise CompareError(f"{p}: neither a run directory (no run.json) nor a folder of run directories")
        elif p.exists():
            raise CompareError(f"{p}: not a directory (expected a benchaudit run directory, or a folder of them)")
        else:
            raise CompareError(f"{p}: not found")
        out += [f for f in found if f.resolve() not in {o.resolve() for o in out}]
    return out


def load_runs(paths: Iterable[Path]) -> list[LoadedRun]:
    """Each run named (or found in a folder named), read with its base records."""
    runs = []
    for path in iterate(expand_runs(paths), label="load", unit="runs"):
        meta, records = load_run(path, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
        # A --pipelines run's layers are base records of their layer (variant = the layer's name).
        layers = set(run_layers(meta))
        base = [
            r for r in records if not r.get("variant") or (r["variant"] in layers and r["pipeline"] == r["variant"])
        ]
        runs.append(LoadedRun(path, meta, base, len(records) - len(base)))
    return runs


def load_run_set(label: str, runs: list[LoadedRun], pipeline: str | None = None) -> RunSet:
    """One side of the comparison: the runs' base records (under ``pipeline`` if given), summarized per run."""
    seen_pipelines = sorted({r["pipeline"] for run in runs for r in run.records})
    if pipeline is not None and pipeline not in seen_pipelines:
        raise CompareError(
            f"no records under pipeline {pipeline!r}{did_you_mean(pipeline, seen_pipelines)} in the "
            f"runs of set {label!r}; they hold: {', '.join(seen_pipelines) or 'no records'}"
        )
    rs = RunSet(label, [], [])
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    for run in runs:
        layered = run_layers(run.meta)
        recs = [
            r
            for r in run.records
            if (r["pipeline"] == pipeline if pipeline is not None else not (layered and r.get("variant")))
        ]
        if not recs:
            continue
        if layered and pipeline is None:
            rs.notes.append(
                f"{run.path}: a --pipelines run: its first layer ({layered[0]}) compared; "
                f"--pipelines {','.join(layered[:2])} compares its layers"
            )
        if run.n_variant_records:
            rs.notes.append(
                f"{run.path}: {run.n_variant_records} variant records (--vary) left out; base records compared"
            )
        groups: dict[tuple[str, str], list[RecordRow]] = defaultdict(list)
        for r in recs:
            groups[(f"{r['benchmark']}.{r['task']}", r["model"])].append(r)
        for (key, model), group in groups.items():
            pipes = sorted({r["pipeline"] for r in group})
            if len(pipes) > 1:
                raise CompareError(
                    f"{run.path}: {key} of {model!r} is scored under several pipelines "
                    f"({', '.join(pipes)}); choose two with --pipelines A,B"
                )
            if (key, model) in owner:
                first_path, first_pipe = owner[(key, model)]
                if first_pipe != pipes[0]:
                    raise CompareError(
                        f"{key} of {model!r} is scored under several pipelines ({first_pipe} in "
                        f"{first_path}, {pipes[0]} in {run.path}); choose two with --pipelines A,B "
                        "(or give the second set with --against)"
                    )
                raise CompareError(
                    f"{key} of {model!r} appears in two runs of set {label!r}: {first_path} "
                    f"and {run.path}; give one run per model and task"
                )
            owner[(key, model)] = (str(run.path), pipes[0])
            rs.items[(key, model)] = group
            rs.cards[(key, model)] = card_for(
                run.meta.get("pipeline_cards") or {},
                group[0]["benchmark"],
                group[0]["task"],
                group[0].get("variant") or BASE,
            )
        for res in summarize(recs, run.meta.get("pipeline_cards") or {}):
            rs.results.setdefault(f"{res['benchmark']}.{res['task']}", {})[res["model"]] = res
        rs.runs.append(str(run.path))
        for p in sorted({r["pipeline"] for r in recs}):
            if p not in rs.pipelines:
                rs.pipelines.append(p)
    if not rs.results:
        raise CompareError(f"set {label!r}: no records to compare")
    return rs
