"""The headline check: an imported run's score against the harness's own reported metric.

:class:`Accumulator` sees each record as it is written and keeps what the check needs (per sample its
score and the harness's, a few numbers): no sample is held.  :func:`check` then computes our score over
the samples the harness scored, each sample's epochs reduced as the harness reduces them, and raises
:class:`ImportMismatch` (the task, both numbers, the first sample that differs) when it is not the
harness's number; the further metrics of the log (lm-eval's ``acc_norm``) are checked as the mean of
their per-sample values.  What it returns is ``import_report.json``.
"""

from __future__ import annotations

from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.results import Summarizer
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.importers.common import ImportSourceError
from pytest_benchaudit.importers.log_samples import HarnessTask, ImportedSample
from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow

__all__ = ["Accumulator", "IMPORTED_LAYER", "ImportCheck", "ImportMismatch", "check"]

IMPORTED_LAYER = "imported"
_TOLERANCE = 1e-9


class ImportMismatch(ImportSourceError):
    """Our headline and the harness's own reported metric differ (the message names both and a sample)."""


class MetricRow(TypedDict):
    name: str
    reported: float | None
    ours: float | None
    equal: bool


class ImportCheck(TypedDict):
    """``import_report.json`` of an imported log."""

    harness: str
    harness_version: str
    task: str
    model: str
    files: list[str]
    layer: str
    matched: str | None
    near_misses: list[str]
    metric: str
    reported: float | None
    reported_n: int | None
    ours_on_harness_denominator: float | None
    ours_n: int
    headline: float | None
    headline_denominator: str
    equal: bool
    other_metrics: list[MetricRow]
    samples: int
    records: int
    left_out: list[str]
    notes: list[str]
    not_recorded: dict[str, str]  # record fields the log does not hold -> why (finish_reason: lm-eval)


def _reduce(values: list[float], how: str) -> float:
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    if how == "median":
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return sum(values) / len(values)


class Accumulator:
    """Streams records into the run directory and keeps what the checks need (a few numbers per sample)."""

    def __init__(self, task: HarnessTask, cards: Cards) -> None:
        self.task = task
        self.summary = Summarizer(cards)
        self.seen: set[tuple[str, int]] = set()
        self.ours: dict[str, list[float]] = {}
        self.theirs: dict[str, list[float]] = {}
        self.meta_sums: dict[str, list[float]] = {}
        self.first_diff: str | None = None
        self.n_samples = 0

    def add(self, sample: ImportedSample, record: RecordRow) -> None:
        key = (sample.sample_id, sample.epoch)
        if key in self.seen:
            raise ImportSourceError(
                f"{sample.source_row}: sample id {sample.sample_id!r} epoch {sample.epoch} "
                "appears twice in the log (each sample and epoch must be one entry)"
            )
        self.seen.add(key)
        self.n_samples += 1
        self.summary.add(record)
        for name in self.task.other_metrics:
            value = sample.meta.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.meta_sums.setdefault(name, []).append(float(value))
        if sample.peer_value is None:
            return  # the harness left the sample out of its metric
        self.ours.setdefault(sample.sample_id, []).append(float(record["score"]))
        self.theirs.setdefault(sample.sample_id, []).append(sample.peer_value)
        if self.first_diff is None and abs(float(record["score"]) - sample.peer_value) > _TOLERANCE:
            self.first_diff = (
                f"sample {sample.sample_id!r} epoch {sample.epoch} ({sample.source_row}): ours "
                f"{record['score']:g} (prediction {record['prediction']!r}), the harness's "
                f"{sample.peer_value:g} (answer {sample.peer_answer!r})"
            )

    def ours_on_harness_denominator(self) -> float | None:
        reduced = [_reduce(v, self.task.reducer) for v in self.ours.values()]
        return sum(reduced) / len(reduced) if reduced else None

    def first_reduced_difference(self) -> str | None:
        for sid, values in self.theirs.items():
            logged = self.task.reduced.get(sid)
            if logged is not None and abs(_reduce(values, self.task.reducer) - logged) > _TOLERANCE:
                return (
                    f"sample {sid!r}: its epochs {values} reduce ({self.task.reducer}) to "
                    f"{_reduce(values, self.task.reducer):g}, the log's reduced value is {logged:g}"
                )
        return None


def check(
    task: HarnessTask,
    acc: Accumulator,
    results: list[TaskResult],
    layer: str | None,
    matched: str | None,
    near_misses: list[str],
) -> ImportCheck:
    ours = acc.ours_on_harness_denominator()
    result = results[0]
    equal = task.reported is None or (ours is not None and abs(ours - task.reported) <= _TOLERANCE)
    if not equal:
        where = (
            acc.first_diff
            or acc.first_reduced_difference()
            or (
                "no single sample differs from the harness's own per-sample scores: the harness's metric is not their "
                f"{task.reducer} over epochs and mean over samples"
            )
        )
        raise ImportMismatch(
            f"{task.files[0]}: {task.task} [{task.model}]: our {task.metric} "
            f"{_fmt(ours)} over {len(acc.ours)} samples differs from the harness's reported "
            f"{_fmt(task.reported)} over {task.reported_n}; first difference: {where}"
        )
    others: list[MetricRow] = []
    for metric, reported in task.other_metrics.items():
        values = acc.meta_sums.get(metric) or []
        mine = sum(values) / len(values) if values else None
        same = mine is not None and abs(mine - reported) <= _TOLERANCE
        if not same:
            raise ImportMismatch(
                f"{task.files[0]}: {task.task} [{task.model}]: {metric} from the per-sample values "
                f"is {_fmt(mine)}, the harness reports {_fmt(reported)}"
            )
        others.append({"name": metric, "reported": reported, "ours": mine, "equal": same})
    return {
        "harness": task.harness,
        "harness_version": task.harness_version,
        "task": task.task,
        "model": task.model,
        "files": [str(p) for p in task.files],
        "layer": layer or IMPORTED_LAYER,
        "matched": matched,
        "near_misses": near_misses,
        "metric": task.metric,
        "reported": task.reported,
        "reported_n": task.reported_n,
        "ours_on_harness_denominator": ours,
        "ours_n": len(acc.ours),
        "headline": result["score"],
        "headline_denominator": result["denominator"],
        "equal": equal,
        "other_metrics": others,
        "samples": acc.n_samples,
        "records": acc.n_samples,
        "left_out": task.left_out,
        "notes": task.notes,
        "not_recorded": task.not_recorded,
    }


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"
