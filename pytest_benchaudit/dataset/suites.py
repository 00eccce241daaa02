"""Suite configs, dataset readers, data location and checksums.

A suite is one benchmark: ``suites/<bench>/suite.toml`` declares its tasks, the
data file of each task and how its columns map onto :class:`Question`, the
prompt templates, and the three pipeline layers (``documented``, ``released``,
``standardized``).  Nothing here runs a model; it only reads files.

Data lives outside the repository (the benchmarks' licences are
non-commercial): ``--data-dir``, else ``$BENCHAUDIT_DATA``, else a per-user cache
directory.  It holds one folder per benchmark with the original file names.
Every problem with a data file is a :class:`SuiteError` naming the file, the row
and the problem.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchaudit.common.errors import ConfigError, DataError, did_you_mean
from pytest_benchaudit.dataset.config import check_suite_config, check_task_data
from pytest_benchaudit.dataset.formats import SuiteError
from pytest_benchaudit.pipeline.layering import deep_merge, task_layers
from pytest_benchaudit.pipeline.stages import (
    Pipeline,
    PipelineError,
    build_pipeline,
)
from pytest_benchaudit.prompt.templates import Template, TemplateError

__all__ = [
    "PLUGIN_SUITE_DIRS",
    "SUITE_FILENAME",
    "SuiteError",
    "suite_path",
    "DataUnavailable",
    "Suite",
    "TaskSpec",
    "load_suite",
]

SUITE_FILENAME = "suite.toml"
# Keys of a [tasks.NAME] table that are not pipeline layers.
_TASK_KEYS = frozenset({"data", "few_shot", "title", "resources", "multiverse"})


class DataUnavailable(SuiteError, DataError):
    """Data that cannot be had here (a hub-only dataset, offline or without its library).

    Unlike a missing or malformed local file, this does not stop a run over many suites:
    the task's items are skipped with the message.
    """


@dataclass(frozen=True)
class TaskSpec:
    """One task of a suite: its data mapping, few-shot source and raw layer tables."""

    name: str
    title: str
    data: dict[str, Any]
    few_shot: dict[str, Any] | None
    layers: dict[str, dict[str, Any]]
    # name -> JSON file a metric reads (e.g. TAA alias graphs); see ``load_resources``
    resources: dict[str, Any] = field(default_factory=dict)
    # ``[tasks.NAME.multiverse]``: field -> [{value, why}], the defensible values ``benchaudit multiverse``
    # enumerates (empty: its defaults, pytest_benchaudit.multiverse.space)
    multiverse: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    """One benchmark's ``suite.toml`` as read and checked by :func:`load_suite`: its tasks, templates and
    layers; :meth:`pipeline` resolves a task's pipeline under a layer."""

    name: str
    title: str
    path: Path
    data_folder: str
    info: dict[str, Any]
    templates: dict[str, Template]
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    # The suite file's own top-level tables (not merged from `extends`), e.g. [fetch], [ledger].
    own_tables: dict[str, Any] = field(default_factory=dict)
    # Every file the suite was read from: suite.toml, then the file it `extends` (run.json checksums them).
    files: tuple[Path, ...] = ()

    def layer_names(self, task: str) -> list[str]:
        return list(self.tasks[task].layers)

    def pipeline(self, task: str, layer: str) -> Pipeline:
        """The task's pipeline under ``layer``, validated (no overrides applied)."""
        spec = self.tasks[task]
        if layer not in spec.layers:
            raise PipelineError(
                f"{self.name}.{task} has no pipeline {layer!r}{did_you_mean(layer, spec.layers)}; available: "
                f"{', '.join(spec.layers)}"
            )
        raw = dict(spec.layers[layer])
        why = raw.pop("why", {})
        notes = raw.pop("notes", [])
        dataset = {
            "source": self.info.get("source", "unspecified"),
            "revision": self.info.get("revision", "unspecified"),
            "files": [spec.data["file"]] + ([spec.few_shot["file"]] if spec.few_shot else []),
        }
        raw["dataset"] = deep_merge(dataset, raw.get("dataset", {}))
        return build_pipeline(layer, self.name, task, {**raw, "why": why, "notes": notes})


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite config not found") from None
    except OSError as err:  # a folder, a symbolic link loop, no permission
        raise SuiteError(f"{path}: cannot read the suite config: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise SuiteError(
            f"{path}: line {line}: byte 0x{data[err.start]:02x} is not UTF-8 (TOML files are UTF-8 "
            "text; save the file as UTF-8)"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: not valid TOML: {err}") from None


#: Folders of suites the installed plugins register (``benchaudit_suite_dirs``), in load order, kept here by
#: :mod:`pytest_benchaudit.plugins.plugin_manager`; :func:`suite_path` looks in them after a ``suites_dir``.
PLUGIN_SUITE_DIRS: list[Path] = []


def suite_path(suites_dir: Path | str, bench: str) -> Path:
    """``suites_dir/bench/suite.toml``, else the first plugin's suite of that name; else the first path
    (for the error that names it).  Every command that re-reads a run's suite by name looks here."""
    path = Path(suites_dir) / bench / SUITE_FILENAME
    if path.is_file():
        return path
    for folder in PLUGIN_SUITE_DIRS:
        if (folder / bench / SUITE_FILENAME).is_file():
            return folder / bench / SUITE_FILENAME
    return path


def load_suite(path: Path) -> Suite:
    """Read and check a ``suite.toml``. Raises :class:`SuiteError` naming the problem."""
    cfg = _read_toml(path)
    _check_config(cfg, path)
    own_tables = {k: v for k, v in cfg.items() if k in ("fetch", "ledger")}
    files = [path]
    if "extends" in cfg:
        # Shared defaults (e.g. the project's standardized layer) live once in a base file.
        try:
            base_path = (path.parent / cfg.pop("extends")).resolve()
        except (RuntimeError, OSError) as err:  # a loop of symbolic links (RuntimeError before Python 3.13)
            raise SuiteError(f"{path}: 'extends' cannot be read: {err}") from None
        if not base_path.is_relative_to(path.parent.parent.resolve()):
            raise SuiteError(f"{path}: 'extends' must name a file inside the suites directory")
        base = _read_toml(base_path)
        files.append(base_path)
        _check_config(base, base_path)
        cfg = deep_merge(base, cfg)
    bench = cfg.get("benchmark") or {}
    name = bench.get("name") or path.parent.name
    templates: dict[str, Template] = {}
    for tname, tdata in (cfg.get("templates") or {}).items():
        try:
            templates[tname] = Template.from_config(tdata)
        except (TemplateError, ValueError, TypeError) as err:
            raise SuiteError(f"{path}: template {tname!r}: {err}") from None
    shared_layers: dict[str, Any] = cfg.get("layers") or {}
    data_defaults: dict[str, Any] = cfg.get("data_defaults") or {}
    tasks: dict[str, TaskSpec] = {}
    for tname, tdata in (cfg.get("tasks") or {}).items():
        data = deep_merge(data_defaults, tdata.get("data") or {})
        try:
            check_task_data(path, tname, data)
        except ConfigError as err:
            raise SuiteError(str(err)) from None
        try:
            layers = task_layers(tname, shared_layers, tdata, _TASK_KEYS)
        except PipelineError as err:
            raise SuiteError(f"{path}: {err}") from None
        tasks[tname] = TaskSpec(
            name=tname,
            title=tdata.get("title", tname),
            data=data,
            few_shot=tdata.get("few_shot"),
            layers=layers,
            resources=dict(tdata.get("resources") or {}),
            multiverse=dict(tdata.get("multiverse") or {}),
        )
    if not tasks:
        raise SuiteError(f"{path}: no [tasks.*] defined")
    if not is_folder_name(str(bench.get("data_folder", name))):
        raise SuiteError(
            f"{path}: [benchmark] data_folder {bench.get('data_folder')!r} is outside the data directory "
            "(give a folder name inside it)"
        )
    suite = Suite(
        name=name,
        title=bench.get("title", name),
        path=path,
        data_folder=bench.get("data_folder", name),
        info=bench,
        templates=templates,
        tasks=tasks,
        own_tables=own_tables,
        files=tuple(files),
    )
    # Validate every layer now so a typo fails at collection, not mid-run.
    for tname, spec in tasks.items():
        for layer in spec.layers:
            try:
                pipe = suite.pipeline(tname, layer)
            except PipelineError as err:
                raise SuiteError(f"{path}: {err}") from None
            tpl = pipe.prompt.template
            if tpl != "unspecified" and tpl not in templates:
                raise SuiteError(
                    f"{path}: {name}.{tname} layer {layer!r}: unknown prompt.template {tpl!r}; "
                    f"templates: {', '.join(templates)}"
                )
    return suite


def is_folder_name(folder: str) -> bool:
    """A relative path of plain names (``cti-bench``, ``a/b``): no ``..``, not absolute, not empty."""
    parts = Path(folder).parts
    return bool(parts) and not Path(folder).is_absolute() and ".." not in parts and "\\" not in folder


def _check_config(cfg: dict[str, Any], path: Path) -> None:
    """Schema check of one file's own tables (see :mod:`.config`), as a :class:`SuiteError`."""
    try:
        check_suite_config(cfg, path)
    except ConfigError as err:
        raise SuiteError(str(err)) from None
