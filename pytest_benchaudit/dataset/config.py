"""The ``suite.toml`` schema: every table and key a suite config may have, unknown ones refused.

A typo in a suite config must not change what a benchmark asks: ``qestion = "..."`` would
silently ask empty questions, ``[tasks.t.relased]`` would become a fourth layer, a missing
``gold`` would surface as a raw ``KeyError`` mid-run.  :func:`check_suite_config` validates a
file's own tables (before ``extends`` merges a base file in) against the pydantic models below
and raises one :class:`ConfigError` naming the file, the table and the key, with the nearest
valid name; :func:`check_task_data` checks what only the merged config knows (a task's data
mapping after ``data_defaults``).  The pipeline fields inside a layer table are checked by the
pipeline model itself (:func:`pytest_benchaudit.pipeline.stages.build_pipeline`), and template
keys by :class:`pytest_benchaudit.prompt.templates.Template`.

docs/suites.md documents the format field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from pytest_benchaudit.common.errors import ConfigError, did_you_mean
from pytest_benchaudit.dataset.formats import READERS
from pytest_benchaudit.pipeline.stages import DOWNSTREAM_STAGES, LAYERS, PEER_LAYERS, field_paths

__all__ = [
    "SuiteConfig",
    "TaskConfig",
    "DataConfig",
    "MultiverseValue",
    "EMPTY_GOLD_DEFAULT",
    "EmptyGold",
    "check_suite_config",
    "check_task_data",
    "is_layer_name",
    "skips_empty_gold",
]

# Keys of a task's data mapping that must be there once data_defaults are merged in; the
# question text comes from `question` or, for benchmarks that ship whole prompts, `prompt`.
REQUIRED_DATA_KEYS = ("file", "question", "gold")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _known_format(name: str) -> str:
    """A data format some reader reads: the built-ins (json, jsonl, csv, tsv) or a plugin's."""
    if name not in READERS:  # its own error type: the message names the table, then the key
        raise PydanticCustomError(
            "data_format",
            f"unknown data format {name!r}{did_you_mean(name, list(READERS))}; "
            f"known: {', '.join(READERS)} (a plugin may add one: docs/plugins.md)",
        )
    return name


#: ``data.format``: a name in :data:`pytest_benchaudit.dataset.readers.READERS`, checked when a suite is read.
DataFormat = Annotated[str, AfterValidator(_known_format)]


class BenchmarkConfig(_Strict):
    """``[benchmark]``: who the benchmark is and where its data folder is."""

    name: str | None = None
    title: str | None = None
    data_folder: str | None = None
    source: str | None = None
    revision: str | None = None
    licence: str | None = None


class HubSource(_Strict):
    """``data.hub``: a Hugging Face hub split to download once when the local file is missing."""

    repo: str
    config: str | None = None
    split: str | None = None


class GoldFile(_Strict):
    """``data.gold_file``: gold labels kept in another file, joined by row."""

    file: str
    column: str
    format: DataFormat | None = None
    key: str | None = None


EmptyGold = Literal["skip", "keep"]
# A row whose gold is empty is kept and scored unless the task says "skip" (released code may score
# it: SecEval's eval.py matches an empty gold with an empty prediction).
EMPTY_GOLD_DEFAULT: EmptyGold = "keep"


def skips_empty_gold(data: Mapping[str, Any]) -> bool:
    """True when a task's ``[data]`` table (validated by :class:`DataConfig`) has its rows without a
    gold label reported and skipped (``empty_gold = "skip"``), False when they are scored (``keep``,
    the default): the one reading of ``empty_gold`` the collector and ``benchaudit plan`` share."""
    return (data.get("empty_gold") or EMPTY_GOLD_DEFAULT) == "skip"


class DataConfig(_Strict):
    """``[tasks.NAME.data]`` (and ``[data_defaults]``, ``[tasks.NAME.few_shot]``): how rows map onto questions."""

    file: str | None = None
    format: DataFormat | None = None
    records: str | None = None
    columns: list[str] | None = None
    id: str | None = None
    question: str | None = None
    prompt: str | None = None
    choices: str | list[str] | dict[str, str] | None = None
    choices_prefixed: bool | None = None
    gold: str | None = None
    gold_file: GoldFile | None = None
    empty_gold: EmptyGold | None = None  # unset: EMPTY_GOLD_DEFAULT; read through skips_empty_gold
    meta: list[str] | None = None
    where: dict[str, Any] | None = None
    hub: HubSource | None = None


class ResourceFile(_Strict):
    """``[tasks.NAME.resources]`` entry: a JSON lookup file a metric reads (e.g. alias graphs)."""

    file: str
    folder: str | None = None


def is_layer_name(name: str) -> bool:
    """A layer is one of the three, a peer harness's (``inspect_evals``, ``lm_eval``), or a named
    variant of one (``released_base``, ``released_gemini``, ``lm_eval_5shot``)."""
    names = (*LAYERS, *PEER_LAYERS)
    return name in names or any(name.startswith(f"{layer}_") and len(name) > len(layer) + 1 for layer in names)


class MultiverseValue(_Strict):
    """One value of a field in ``[tasks.NAME.multiverse]``: the value and why it is defensible."""

    value: Any
    why: str

    @model_validator(mode="after")
    def _reason(self) -> MultiverseValue:
        if not self.why.strip():
            raise ValueError(f"value {self.value!r}: 'why' is empty; say why this value is defensible")
        return self


def _check_multiverse(table: dict[str, list[MultiverseValue]]) -> None:
    """A ``[tasks.NAME.multiverse]`` table names downstream ``--set`` fields, each with distinct values.
    (Which downstream fields change a task's score, and whether a rule or metric exists, the
    multiverse itself checks: :mod:`pytest_benchaudit.multiverse.space`.)"""
    known = field_paths()
    for path, values in table.items():
        if path not in known:
            raise ValueError(f"multiverse field {path!r} is not a pipeline field{did_you_mean(path, known)}")
        if path.split(".")[0] not in DOWNSTREAM_STAGES:
            raise ValueError(
                f"multiverse field {path!r} is upstream: its values need new generations, which "
                "enter the multiverse from the runs (--pipelines, --vary), not from the suite"
            )
        if not values:
            raise ValueError(f"multiverse field {path!r} has no values")
        seen = [repr(v.value) for v in values]
        if len(set(seen)) < len(seen):
            raise ValueError(f"multiverse field {path!r} lists a value twice")


class TaskConfig(_Strict):
    """``[tasks.NAME]``: a task's title, data, few-shot source, resources, its multiverse (the defensible
    values of its downstream fields, ``benchaudit multiverse``) and its layer tables."""

    model_config = ConfigDict(extra="allow")  # the extra keys are layers, checked below

    title: str | None = None
    data: DataConfig | None = None
    few_shot: DataConfig | None = None
    resources: dict[str, str | ResourceFile] | None = None
    multiverse: dict[str, list[MultiverseValue]] | None = None

    @model_validator(mode="after")
    def _layers(self) -> TaskConfig:
        if self.multiverse is not None:
            _check_multiverse(self.multiverse)
        for key, value in (self.model_extra or {}).items():
            if not is_layer_name(key):
                known = [*type(self).model_fields, *LAYERS, *PEER_LAYERS]
                raise ValueError(
                    f"unknown key or layer {key!r}{did_you_mean(key, known)}; layers are "
                    f"{', '.join((*LAYERS, *PEER_LAYERS))} or a named variant such as released_base"
                )
            if not isinstance(value, dict):
                raise ValueError(f"layer {key!r} must be a table of pipeline fields")
        return self


class FetchConfig(_Strict):
    """``[fetch]``: where ``benchaudit fetch`` downloads the benchmark's files from."""

    base_url: str
    files: dict[str, dict[str, Any]]


class SuiteConfig(_Strict):
    """One ``suite.toml`` file as written (before ``extends`` merges its base file in)."""

    extends: str | None = None
    benchmark: BenchmarkConfig | None = None
    templates: dict[str, dict[str, Any]] | None = None  # keys checked by prompt.templates.Template
    layers: dict[str, dict[str, Any]] | None = None
    data_defaults: DataConfig | None = None
    tasks: dict[str, TaskConfig] | None = None
    fetch: FetchConfig | None = None
    # Free-form notes for `benchaudit ledger` (quirks of the released data, citations); the ledger
    # command reads and checks its own keys.
    ledger: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _shared_layers(self) -> SuiteConfig:
        for key in self.layers or {}:
            if not is_layer_name(key):
                raise ValueError(f"[layers.{key}]: unknown layer {key!r}{did_you_mean(key, (*LAYERS, *PEER_LAYERS))}")
        return self


def _table(loc: tuple[Any, ...]) -> tuple[str, str | None]:
    """(``[tasks.mcq.data]``, ``'qestion'``) from a pydantic error location."""
    parts = [str(p) for p in loc if not isinstance(p, int)]
    # pydantic names union members in the location (e.g. 'str', 'list[str]'): not table names
    parts = [p for p in parts if not p.startswith(("str", "list[", "dict[", "int", "bool", "literal["))]
    if not parts:
        return "(top level)", None
    return ("[" + ".".join(parts[:-1]) + "]" if len(parts) > 1 else "(top level)"), parts[-1]


def _fields_at(parents: list[str]) -> list[str]:
    """The key names the table at ``parents`` may have (for the nearest-name hint)."""
    n = len(parents)
    if n == 0:
        model: type[BaseModel] | None = SuiteConfig
    elif parents[0] == "tasks" and n == 2:
        return [*TaskConfig.model_fields, *LAYERS, *PEER_LAYERS]
    elif parents[-1] in ("data", "few_shot", "data_defaults"):
        model = DataConfig
    elif len(parents) >= 3 and parents[0] == "tasks" and parents[2] == "multiverse":
        model = MultiverseValue
    else:
        tables: dict[str, type[BaseModel]] = {
            "benchmark": BenchmarkConfig,
            "fetch": FetchConfig,
            "hub": HubSource,
            "gold_file": GoldFile,
        }
        model = tables.get(parents[-1])
    return list(model.model_fields) if model else []


def check_suite_config(cfg: dict[str, Any], path: Path) -> SuiteConfig:
    """Validate one file's own tables; raise one :class:`ConfigError` naming file, table and key."""
    try:
        return SuiteConfig.model_validate(cfg)
    except ValidationError as err:
        first = err.errors()[0]
        table, key = _table(first["loc"])
        kind = first["type"]
        if kind == "extra_forbidden" and key is not None:
            parents = [str(p) for p in first["loc"][:-1] if not isinstance(p, int)]
            hint = did_you_mean(key, _fields_at(parents))
            raise ConfigError(f"{path}: {table}: unknown key {key!r}{hint}") from None
        if kind == "missing" and key is not None:
            raise ConfigError(f"{path}: {table}: missing key {key!r}") from None
        message = str(first["msg"]).removeprefix("Value error, ")
        where = f"{table}" + (f" {key}" if key and kind != "value_error" else "")
        if kind == "value_error" and key is not None and table == "(top level)":
            where = f"[{key}]"
        elif kind == "value_error" and key is not None:
            where = f"{table[:-1]}.{key}]"
        raise ConfigError(f"{path}: {where}: {message}") from None


def check_task_data(path: Path, task: str, data: dict[str, Any]) -> None:
    """A task's merged data mapping has the keys every reader needs.

    ``file``, the question text (``question``, or ``prompt`` for benchmarks that ship whole
    prompts) and the gold label (``gold``, or ``gold_file`` when labels live in another file).
    """
    for key in REQUIRED_DATA_KEYS:
        if key in data or (key == "gold" and "gold_file" in data) or (key == "question" and "prompt" in data):
            continue
        raise ConfigError(f"{path}: [tasks.{task}.data]: missing key {key!r} (set it there or in [data_defaults])")
