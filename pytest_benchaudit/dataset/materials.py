"""What a task's pipeline card is made of beyond its fields, read from the suite and the data directory.

One reading for every place that makes a card, so that they give the same hash: a run's
collection (``pytest_plugin/collect.py``) and ``benchaudit card BENCH`` (a card computed before a
run, a pre-registration, must be the card the run records).  :func:`read_task_files` reads a
task's questions, few-shot exemplars and lookup files and their sha256; :func:`task_card` makes the
card a run records for one layer (:func:`pytest_benchaudit.pipeline.assembly.materials`: template
text, exemplars, checksums, hashed with the fields).

:func:`pin_warnings` compares the data files a task read with the checksums the suite pins in
``[fetch.files]``; :func:`pinned_file_warnings` does the same for every pinned file present in the
data directory (``benchaudit validate``, which reads no questions).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from pytest_benchaudit.dataset.readers import data_file, file_checksum, load_questions, load_resources
from pytest_benchaudit.dataset.suites import Suite, SuiteError
from pytest_benchaudit.pipeline import assembly
from pytest_benchaudit.pipeline.record_documents import CardWarning, PipelineCard
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Question

__all__ = [
    "TaskFiles",
    "pin_warnings",
    "pinned_file_warnings",
    "read_task_files",
    "resource_key",
    "suite_files",
    "task_card",
]


@dataclass(frozen=True)
class TaskFiles:
    """A task's data as a run reads it, with the checksums its card and run.json show."""

    questions: list[Question]
    questions_path: Path
    shots: list[Question] = field(default_factory=list)  # the few-shot file's rows (the first k are used)
    resources: dict[str, Any] = field(default_factory=dict)  # name -> the lookup file's JSON
    data_checksums: dict[str, str] = field(default_factory=dict)  # card material: file name -> sha256
    resource_checksums: dict[str, str] = field(default_factory=dict)  # card material: resource name -> sha256
    run_checksums: dict[str, str] = field(default_factory=dict)  # run.json dataset_checksums: folder/file -> sha256
    pinned: dict[str, str] = field(default_factory=dict)  # each file as the suite names it -> sha256


def resource_key(suite: Suite, task: str, name: str) -> str:
    """How run.json names a resource file: its folder in the data directory and its file, as the
    suite writes them (not resolved: a benchmark folder may be a symlink to elsewhere)."""
    ref = suite.tasks[task].resources[name]
    if isinstance(ref, dict):
        return str(Path(str(ref.get("folder", suite.data_folder))) / str(ref["file"]))
    return str(Path(suite.data_folder) / str(ref))


def read_task_files(suite: Suite, task: str, data_dir: Path, origin: str) -> TaskFiles:
    """Read ``task``'s questions, few-shot exemplars and resources from ``data_dir`` (``origin``: which
    setting chose it, for messages) and checksum each file.  Raises what the readers raise:
    :class:`~pytest_benchaudit.dataset.suites.DataUnavailable` (data that cannot be had here) or
    :class:`~pytest_benchaudit.dataset.suites.SuiteError` (a file that cannot be read)."""
    spec = suite.tasks[task]
    questions, path = load_questions(suite, task, data_dir, origin)
    resources, resource_paths = load_resources(suite, task, data_dir, origin)
    resource_sums: dict[str, str] = {}
    run_sums: dict[str, str] = {}
    pinned: dict[str, str] = {}
    for name, res_path in resource_paths.items():
        resource_sums[name] = run_sums[resource_key(suite, task, name)] = _checksum(res_path)
        ref = spec.resources[name]
        if not isinstance(ref, dict) or ref.get("folder", suite.data_folder) == suite.data_folder:
            pinned[str(ref["file"] if isinstance(ref, dict) else ref)] = resource_sums[name]
    shots: list[Question] = []
    shot_sums: dict[str, str] = {}
    if spec.few_shot:
        shots, shot_path = load_questions(suite, task, data_dir, origin, few_shot=True)
        shot_sums[shot_path.name] = run_sums[str(Path(suite.data_folder) / shot_path.name)] = _checksum(shot_path)
        pinned[str(spec.few_shot.get("file", shot_path.name))] = shot_sums[shot_path.name]
    checksum = run_sums[str(Path(suite.data_folder) / path.name)] = _checksum(path)
    pinned[str(spec.data.get("file", path.name))] = checksum
    return TaskFiles(
        questions=questions,
        questions_path=path,
        shots=shots,
        resources=resources,
        data_checksums={path.name: checksum, **shot_sums},
        resource_checksums=resource_sums,
        run_checksums=run_sums,
        pinned=pinned,
    )


def _checksum(path: Path) -> str:
    try:
        return file_checksum(path)
    except OSError as err:  # read once already, so rare: removed meanwhile, an I/O error
        raise SuiteError(f"{path}: cannot read it: {err.strerror or err}") from None


def suite_files(suite: Suite, rootdir: Path) -> dict[str, str]:
    """sha256 of each file the suite was read from, keyed by its path relative to ``rootdir``
    (``suites/toy/suite.toml``, ``suites/standardized.toml``; absolute where outside it)."""
    out = {}
    for path in suite.files or (suite.path,):
        try:
            name = Path(os.path.relpath(path, rootdir)).as_posix()
        except ValueError:  # another drive
            name = str(path)
        out[name if not name.startswith("..") else str(path)] = file_checksum(path)
    return out


def _pins(suite: Suite) -> Mapping[str, Mapping[str, JsonValue]]:
    pins = (suite.own_tables.get("fetch") or {}).get("files") or {}
    return pins if isinstance(pins, dict) else {}


def pin_warnings(suite: Suite, found: Mapping[str, str]) -> list[CardWarning]:
    """A warning for each data file (name in the data folder -> sha256 found) whose checksum
    differs from the one ``[fetch.files]`` pins (:func:`pytest_benchaudit.pipeline.assembly.pin_warnings`)."""
    return assembly.pin_warnings(_pins(suite), found, suite.data_folder, suite.path.parent.name, suite.name)


def pinned_file_warnings(suite: Suite, data_dir: Path, origin: str) -> list[CardWarning]:
    """:func:`pin_warnings` for every file ``[fetch.files]`` pins that is in ``data_dir`` (a file that
    is not there is no warning: ``benchaudit fetch`` or the run says what is missing)."""
    found: dict[str, str] = {}
    for name in _pins(suite):
        try:
            path = data_file(data_dir, suite, name, origin)
        except SuiteError:  # not there (DataMissing), or not a file inside the data folder
            continue
        found[name] = _checksum(path)
    return pin_warnings(suite, found)


def task_card(
    suite: Suite,
    task: str,
    pipeline: Pipeline,
    files: TaskFiles | None,
    rootdir: Path,
    judge: Mapping[str, JsonValue] | None = None,
) -> PipelineCard:
    """The pipeline card a run of ``pipeline`` on ``task`` records (the base variant, no ``--judge``
    unless ``judge`` gives its material): the fields and materials hashed, what run.json shows
    beside the hash.  ``files`` ``None``: the data could not be read, and the card lacks its
    checksums (its hash is then not a run's)."""
    if files is None:
        return pipeline.card(assembly.materials(suite.templates, pipeline, [], {}, {}, judge))
    card = pipeline.card(
        assembly.materials(
            suite.templates, pipeline, files.shots, files.data_checksums, files.resource_checksums, judge
        )
    )
    name = files.questions_path.name
    shown = assembly.TaskMaterials(
        dataset_checksums={name: files.data_checksums[name]},
        suite_files=suite_files(suite, rootdir),
        questions_total=len(files.questions),
        warnings=pin_warnings(suite, files.pinned),
    )
    return assembly.task_card(card, shown)
