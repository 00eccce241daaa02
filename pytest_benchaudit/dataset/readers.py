"""Reading benchmark data: the data directory, data files, checksums, rows, questions, resources.

Data lives outside the repository (the benchmarks' licences are non-commercial): ``--data-dir``,
else ``$BENCHAUDIT_DATA``, else a per-user cache directory, with one folder per benchmark holding
the original file names.  Every problem with a data file is a :class:`SuiteError` naming the file,
the row and the problem.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_benchaudit.dataset.formats import BUILTIN_READERS, READERS, Reader
from pytest_benchaudit.dataset.suites import DataUnavailable, Suite, SuiteError, is_folder_name
from pytest_benchaudit.pipeline.layering import deep_merge
from pytest_benchaudit.pipeline.types import Question

__all__ = [
    "BUILTIN_READERS",
    "DATA_ENV",
    "DataMissing",
    "READERS",
    "Reader",
    "data_file",
    "file_checksum",
    "load_questions",
    "load_resources",
    "resolve_data_dir",
    "resolved",
]

DATA_ENV = "BENCHAUDIT_DATA"
_LABELS = ("A", "B", "C", "D", "E", "F", "G", "H")


def resolve_data_dir(option: str | None) -> tuple[Path, str]:
    """Where benchmark data is read from, and which setting chose it."""
    if option:
        return Path(option).expanduser(), "--data-dir"
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser(), f"${DATA_ENV}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "benchaudit" / "datasets", "the per-user cache directory"


def resolved(path: Path, what: str) -> Path:
    """``path`` with its symbolic links followed; a loop of them (or a path that cannot be resolved)
    is a :class:`SuiteError` naming it and ``what`` it is (``pathlib`` raises ``RuntimeError`` for a
    loop on Python < 3.13, ``OSError`` on later ones)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as err:
        why = "a loop of symbolic links" if "loop" in str(err).lower() else str(err)
        raise SuiteError(f"{path}: {what} cannot be read: {why}") from None


def data_file(data_dir: Path, suite: Suite, filename: str, origin: str) -> Path:
    """The path of one data file, checked to stay inside the data directory."""
    root = resolved(data_dir / suite.data_folder, "the benchmark's data folder")
    path = resolved(root / filename, "the data file")
    if not path.is_relative_to(root):
        raise SuiteError(f"{suite.path}: data file {filename!r} points outside the data directory {root}")
    if not path.is_file():
        raise DataMissing(_missing_message(data_dir, suite, path, origin))
    return path


class DataMissing(DataUnavailable):
    """A benchmark's data is not in the data directory: its tasks are skipped (``pytest suites/``
    runs the benchmarks whose data is there), the reason saying how to get it."""


def _missing_message(data_dir: Path, suite: Suite, path: Path, origin: str) -> str:
    """What is missing and how to get it: ``benchaudit fetch`` where the suite says where its files
    come from (a ``[fetch]`` table), or the folder to put them in."""
    folder = data_dir / suite.data_folder
    how = (
        f"`benchaudit fetch {suite.path.parent.name}"
        + (f" --data-dir {data_dir}" if origin == "--data-dir" else "")
        + "` downloads it, or "
        if "fetch" in suite.own_tables
        else f"put the benchmark's original files in a '{suite.data_folder}/' folder there, or "
    )
    how += f"point --data-dir / ${DATA_ENV} at a directory that holds '{suite.data_folder}/'"
    if not folder.is_dir():  # the whole benchmark is missing: one reason for each of its tasks
        return (
            f"{suite.name}: data not found: no '{suite.data_folder}/' folder in {data_dir} (data directory "
            f"from {origin}); {how}"
        )
    return f"{suite.name}: data file not found: {path} (data directory from {origin}); {how}"


_checksums: dict[tuple[str, int, int], str] = {}


def file_checksum(path: Path) -> str:
    """sha256 of a file, memoised on (path, size, mtime)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _checksums:
        _checksums[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _checksums[key]


def _rows(path: Path, mapping: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (row label for messages, row dict) from a file in one of :data:`READERS`' formats."""
    fmt = mapping.get("format") or path.suffix.lstrip(".")
    reader = READERS.get(fmt)
    if reader is None:
        raise SuiteError(f"{path}: unknown data format {fmt!r} ({', '.join(READERS)})")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SuiteError(f"{path}: not UTF-8 text: {err}") from None
    if not text.strip():
        raise SuiteError(f"{path}: file is empty")
    yield from reader(text, path, mapping)  # a row that is not a table: _field names it


def _field(row: dict[str, Any], name: str, path: Path, label: str, kind: type | tuple[type, ...] = str) -> Any:
    if not isinstance(row, dict):
        raise SuiteError(f"{path}: {label}: expected an object, found {type(row).__name__}")
    if name not in row:
        raise SuiteError(f"{path}: {label}: missing field {name!r}")
    value = row[name]
    if not isinstance(value, kind) or (
        isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    ):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SuiteError(f"{path}: {label}: field {name!r} should be {expected}, found {type(value).__name__}")
    return value


def _choices(row: dict[str, Any], mapping: dict[str, Any], path: Path, label: str) -> dict[str, str]:
    spec = mapping.get("choices")
    if spec is None:
        return {}
    if isinstance(spec, list):  # one column per option, in label order
        return {_LABELS[i]: _field(row, col, path, label) for i, col in enumerate(spec)}
    value = _field(row, spec, path, label, (list, dict))
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    prefixed = mapping.get("choices_prefixed", False)
    for i, text in enumerate(value):
        lab = _LABELS[i]
        if not isinstance(text, str):
            raise SuiteError(f"{path}: {label}: option {i + 1} of {spec!r} is not a string")
        if prefixed:
            # SecEval stores "A: text"; keep only the text, the template re-adds labels.
            if not text.startswith(f"{lab}: "):
                raise SuiteError(f"{path}: {label}: option {i + 1} should start with '{lab}: '")
            text = text[len(lab) + 2 :]
        out[lab] = text
    return out


def _gold(row: dict[str, Any], mapping: dict[str, Any], path: Path, label: str) -> str:
    value = _field(row, mapping["gold"], path, label, (str, int, list))
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value)


def load_resources(suite: Suite, task: str, data_dir: Path, origin: str) -> tuple[dict[str, Any], dict[str, Path]]:
    """The task's resource files (JSON), read from the data directory: (data, paths).

    A resource is a file in the suite's data folder (``aliases = "taa/aliases.json"``) or
    in another benchmark's folder of the same data directory
    (``aliases = { folder = "cti-bench", file = "taa-lookups/alias_dict.json" }``), e.g.
    when a benchmark is scored with another one's published lookup tables.
    """
    data: dict[str, Any] = {}
    paths: dict[str, Path] = {}
    for name, ref in suite.tasks[task].resources.items():
        if isinstance(ref, dict):
            folder = str(ref.get("folder", suite.data_folder))
            # Checked by name, not by resolving: a benchmark folder may be a symlink to elsewhere
            # (data_file still keeps the file inside that folder), but a suite config names one
            # folder of the data directory, never a path out of it.
            if not is_folder_name(folder):
                raise SuiteError(f"{suite.path}: resource {name!r} folder {folder!r} is outside the data directory")
            owner = replace(suite, data_folder=folder)
            path = data_file(data_dir, owner, str(ref["file"]), origin)
        else:
            path = data_file(data_dir, suite, ref, origin)
        try:
            data[name] = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise SuiteError(f"{path}: resource {name!r} is not valid JSON: {err}") from None
        paths[name] = path
    return data, paths


def _ensure_hub_export(suite: Suite, mapping: dict[str, Any], data_dir: Path) -> None:
    """Download a hub-only dataset into its local export file once (see ``hub``)."""
    from pytest_benchaudit.dataset.hub import HubUnavailable, export_hub_dataset

    root = resolved(data_dir / suite.data_folder, "the benchmark's data folder")
    target = resolved(root / mapping["file"], "the data file")
    if not target.is_relative_to(root):
        raise SuiteError(f"{suite.path}: data file {mapping['file']!r} points outside the data directory {root}")
    if target.is_file():
        return
    try:
        export_hub_dataset(mapping["hub"], target)
    except HubUnavailable as err:
        raise DataUnavailable(f"{suite.name}: {err}") from None


def _gold_column(
    suite: Suite, mapping: dict[str, Any], data_dir: Path, origin: str, n_rows: int, path: Path
) -> list[str] | None:
    """Gold labels kept in a second file, joined by row order (CTI-TAA keeps them in its
    released responses file): ``gold_file = {file = "...", column = "GT", format = "tsv"}``."""
    spec = mapping.get("gold_file")
    if not spec:
        return None
    gold_path = data_file(data_dir, suite, spec["file"], origin)
    values = [str(_field(row, spec["column"], gold_path, label, (str, int))) for label, row in _rows(gold_path, spec)]
    if len(values) != n_rows:
        raise SuiteError(
            f"{gold_path}: {len(values)} gold rows, but {path.name} has {n_rows} questions; "
            "the files are joined by row order and must have the same length"
        )
    return values


def load_questions(
    suite: Suite, task: str, data_dir: Path, origin: str, *, few_shot: bool = False
) -> tuple[list[Question], Path]:
    """Read a task's questions (or its few-shot examples) from the data directory.

    Gold labels come from the ``gold`` field, or from ``gold_file`` (a second file joined
    by row order).  An empty gold is kept as ``""``: whether such rows are scored is the
    task's ``empty_gold`` setting, applied by the collector.
    """
    spec = suite.tasks[task]
    mapping = spec.data if not few_shot else deep_merge(spec.data, spec.few_shot or {})
    if mapping.get("hub"):
        _ensure_hub_export(suite, mapping, data_dir)
    path = data_file(data_dir, suite, mapping["file"], origin)
    rows = list(_rows(path, mapping))
    golds = _gold_column(suite, mapping, data_dir, origin, len(rows), path)
    where = mapping.get("where") or {}
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for index, (label, row) in enumerate(rows):
        # `where = {language = "English"}`: keep only rows whose fields equal these values
        # (SecBench mixes languages in one file). Row positions stay those of the file.
        if where and not all(_field(row, key, path, label, (str, int, float)) == value for key, value in where.items()):
            continue
        qid = str(_field(row, mapping["id"], path, label, (str, int))) if mapping.get("id") else f"{index + 1:04d}"
        if qid in seen:
            raise SuiteError(f"{path}: {label}: duplicate question id {qid!r} (first at {seen[qid]})")
        seen[qid] = label
        meta = {m: row.get(m) for m in mapping.get("meta", []) if isinstance(row, dict)}
        if mapping.get("labels"):
            # The answer labels a rule may read (e.g. "TFX"), when they are not option letters.
            meta["labels"] = str(mapping["labels"])
        questions.append(
            Question(
                benchmark=suite.name,
                task=task,
                id=qid,
                index=index,
                text=_field(row, mapping["question"], path, label) if mapping.get("question") else "",
                choices=_choices(row, mapping, path, label),
                gold=golds[index] if golds is not None else _gold(row, mapping, path, label),
                prompt=_field(row, mapping["prompt"], path, label) if mapping.get("prompt") else None,
                meta=meta,
            )
        )
    if not questions:
        raise SuiteError(f"{path}: no questions found" + (f" matching where = {where}" if where else ""))
    return questions, path
