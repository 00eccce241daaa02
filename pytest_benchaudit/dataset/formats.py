"""Data formats: a file's text -> rows, by format name (a task's ``data.format``, else the file's extension).

The built-ins (json, jsonl, csv, tsv) are here; a plugin adds one through the hook ``benchaudit_readers``
(:mod:`pytest_benchaudit.plugins`), merged into :data:`READERS`, the one table
:mod:`.readers` reads files with and :mod:`.config` checks ``data.format`` against.  A reader raises
:class:`SuiteError` naming the file and the row for what it cannot read.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from pytest_benchaudit.common.errors import ConfigError

__all__ = ["BUILTIN_READERS", "READERS", "Reader", "SuiteError"]


class SuiteError(ConfigError):
    """A suite config or data file is missing or malformed; the message says where."""


#: A data format: the file's text, its path and the task's data table -> (row label, row) pairs.
Reader = Callable[[str, Path, Mapping[str, Any]], Iterator[tuple[str, dict[str, Any]]]]


def _json_rows(text: str, path: Path, mapping: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        data = _json(text)
    except json.JSONDecodeError as err:
        raise SuiteError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    key = mapping.get("records")
    if key:
        if not isinstance(data, dict) or key not in data:
            raise SuiteError(f"{path}: expected a JSON object with a {key!r} list")
        data = data[key]
    if not isinstance(data, list):
        raise SuiteError(f"{path}: expected a JSON array of records")
    for i, row in enumerate(data):
        yield f"record {i + 1}", row


def _jsonl_rows(text: str, path: Path, mapping: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            yield f"line {lineno}", _json(line)
        except json.JSONDecodeError as err:
            raise SuiteError(f"{path}: line {lineno}: invalid JSON: {err.msg}") from None


def _delimited_rows(
    text: str, path: Path, mapping: Mapping[str, Any], delimiter: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    csv.field_size_limit(1 << 30)
    # newline="" lets the csv module handle quoted newlines (and only \r/\n end a row).
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    columns = mapping.get("columns")
    first_data_line = 1
    if not columns:
        try:
            columns = next(reader)
        except StopIteration:
            raise SuiteError(f"{path}: no header row") from None
        first_data_line = 2
    for i, values in enumerate(reader):
        label = f"row {i + first_data_line}"
        if len(values) != len(columns):
            raise SuiteError(
                f"{path}: {label}: expected {len(columns)} columns ({', '.join(columns)}), found {len(values)}"
            )
        yield label, dict(zip(columns, values))


def _csv_rows(text: str, path: Path, mapping: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    return _delimited_rows(text, path, mapping, ",")


def _tsv_rows(text: str, path: Path, mapping: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    return _delimited_rows(text, path, mapping, "\t")


#: The built-in formats (registered through the plugin hook ``benchaudit_readers`` by
#: :mod:`pytest_benchaudit.plugins.builtin_plugin`, like a plugin's).
BUILTIN_READERS: dict[str, Reader] = {"json": _json_rows, "jsonl": _jsonl_rows, "csv": _csv_rows, "tsv": _tsv_rows}
#: Every format a task's ``data.format`` (or its file's extension) may name: the built-ins and the
#: plugins' (merged in by :mod:`pytest_benchaudit.plugins.plugin_manager`).
READERS: dict[str, Reader] = dict(BUILTIN_READERS)


def _json(text: str) -> Any:
    """``text`` parsed as JSON: by orjson (half json's time on a benchmark file), else by json, which
    reads what orjson refuses (NaN, integers beyond 64 bits) and words the error of what is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
