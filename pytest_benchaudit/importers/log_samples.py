"""What an importer reads a log into: :class:`HarnessTask` (one task x model) and :class:`ImportedSample` s.

The harness-neutral middle of the log importers (Inspect, lm-eval, Every Eval Ever): each reads its
format into these, and :mod:`.imported_runs` turns them into a run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from pytest_benchaudit.pipeline.record_documents import ContinuationRow

if TYPE_CHECKING:
    from pytest_benchaudit.importers.common import ImportedRun

__all__ = ["HarnessTask", "ImportOptions", "ImportedSample"]


@dataclass
class ImportedSample:
    """One sample and epoch of a log, as the importer read it (nothing guessed: None where the log is silent)."""

    sample_id: str
    epoch: int  # 1-based, as Inspect counts epochs
    target: str
    request: dict[str, JsonValue]  # {"mode", "messages" | "prompt", "params", "continuations"?}: as sent
    output: str = ""
    finish_reason: str | None = None
    error: str | None = None
    usage: dict[str, JsonValue] = field(default_factory=dict)
    peer_answer: str | None = None
    peer_score: JsonValue = None  # as the log writes it ("C", 1.0, true, ...)
    peer_value: float | None = None  # on the metric's scale; None: the harness did not score the sample
    continuations: list[ContinuationRow] | None = None
    choices: dict[str, str] = field(default_factory=dict)
    question_text: str = ""
    source_row: str = ""
    served_model: str | None = None
    meta: dict[str, JsonValue] = field(default_factory=dict)
    # Why the sample is invalid where the log says so (an Every Eval Ever file we exported); None: the
    # sample is invalid only when it errored or the harness did not score it.
    invalid_reason: str | None = None


@dataclass
class HarnessTask:
    """What a log says of one task x model, beside its samples."""

    harness: str  # inspect, lm-eval, every-eval-ever
    harness_version: str
    task: str  # the harness's own task name
    model: str
    files: list[Path]
    metric: str  # the harness's metric, e.g. "accuracy", "acc", "exact_match"
    reported: float | None  # the harness's value of it
    reported_n: int | None = None  # the samples it counted (its denominator)
    reducer: str = "mean"  # how the harness reduces a sample's epochs (mean, max, ...)
    # Card fields the log states: flat field name -> (value, the log field it came from).
    stated: dict[str, tuple[JsonValue, str]] = field(default_factory=dict)
    candidates: list[tuple[str, str, str]] = field(default_factory=list)
    compared: tuple[str, ...] = ("messages", "prompt", "continuations", "params")
    benchmark: str = ""  # the generic task's benchmark name (default: the harness)
    notes: list[str] = field(default_factory=list)
    # The harness's own per-sample reduced values, where the log keeps them (Inspect's reductions).
    reduced: dict[str, float] = field(default_factory=dict)
    # Further metrics of the log, each checked as the mean of the per-sample values in ``meta[name]``.
    other_metrics: dict[str, float] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # what the import could not take, and why
    # A record field the log does not hold -> why (run.json source.not_recorded; runs.run_meta.not_recorded).
    not_recorded: dict[str, str] = field(default_factory=dict)
    # The questions of the harness's whole dataset, where the log states it (Inspect's eval.dataset.samples):
    # a run of a --limit subset holds fewer (run.json source.dataset_questions; `benchaudit plan` reads it).
    dataset_questions: int | None = None


@dataclass
class ImportOptions:
    report_dir: Path
    suites_dir: Path
    data_dir: Path
    data_origin: str
    log: Callable[[str], object] = lambda _msg: None
    stamp: str = ""


class LogImporter:
    """The base of the log importers: a format's ``import_logs(paths, options)`` (several logs at once, so two
    logs of one task and model are refused together) and, from it, ``import_runs`` in the shape of the
    released-output importers (``athenabench-runs``, ``cti-bench-responses``): one source path and the
    command's folders, so one registry can hold both kinds."""

    name: str = ""
    help: str = ""

    def detect(self, path: Path) -> bool:
        raise NotImplementedError

    def import_logs(self, paths: list[Path], options: ImportOptions) -> list[ImportedRun]:
        raise NotImplementedError

    def import_runs(
        self,
        source: Path,
        report_dir: Path,
        suites_dir: Path,
        data_dir: str | None,
        log: Callable[[str], object] = print,
    ) -> list[ImportedRun]:
        from pytest_benchaudit.dataset.readers import resolve_data_dir

        data, origin = resolve_data_dir(data_dir)
        options = ImportOptions(Path(report_dir), Path(suites_dir), data, origin, log=log)
        return self.import_logs([Path(source)], options)
