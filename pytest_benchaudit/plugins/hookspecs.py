"""The hooks a benchaudit plugin implements, as pytest-xdist declares its own in ``newhooks.py``.

A plugin is a module named by an entry point in the group ``benchaudit`` of its distribution::

    [project.entry-points.benchaudit]
    example = "benchaudit_example.plugin"

whose functions, marked with :data:`hookimpl`, return what it adds.  Every hook is optional and
called once per process, when a command or a pytest run first needs that registry
(:mod:`.plugin_manager`); each returns a collection and the results of all plugins are merged, a name
registered twice (by two plugins, or by a plugin and the built-ins) being one error naming both.
The built-ins are registered through the same hooks (:mod:`.builtin_plugin`).

These hooks register things; the hooks that *report* on a pytest run (``pytest_benchaudit_record``,
``pytest_benchaudit_summary``) are pytest hooks, declared in :mod:`pytest_benchaudit.newhooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from pytest_benchaudit.compare.analysis_registry import Analysis

__all__ = [
    "PROJECT",
    "Importer",
    "Reader",
    "benchaudit_analyses",
    "benchaudit_importers",
    "benchaudit_metrics",
    "benchaudit_readers",
    "benchaudit_rules",
    "benchaudit_suite_dirs",
    "hookimpl",
    "hookspec",
]

#: pluggy's project name and the entry-point group a distribution declares its plugin in.
PROJECT = "benchaudit"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin's implementation of one of the hooks below (``@hookimpl def benchaudit_rules(): ...``).
hookimpl = pluggy.HookimplMarker(PROJECT)


class Reader(Protocol):
    """A data format's reader, registered by ``benchaudit_readers`` under the format's name."""

    def __call__(self, text: str, path: Path, mapping: Mapping[str, Any], /) -> Iterator[tuple[str, dict[str, Any]]]:
        """The file's text, its path (for messages) and the task's ``[tasks.T.data]`` table in; ``(row label
        for messages, row)`` pairs out.  A malformed row is a ``DataError`` naming the path and the label."""


class Importer(Protocol):
    """What ``benchaudit import SOURCE DIR`` calls: published outputs of a benchmark -> run directories."""

    @property
    def name(self) -> str:
        """The SOURCE word on the command line (``athenabench-runs``)."""

    @property
    def help(self) -> str:
        """One line for ``benchaudit plugins``: what the source is."""

    def detect(self, path: Path) -> bool:
        """Whether ``path`` looks like this importer's source (a quick look, no reading of every file)."""

    def import_runs(
        self, source: Path, report_dir: Path, suites_dir: Path, data_dir: str | None, log: Callable[[str], object]
    ) -> Sequence[Any]:
        """Write one run directory per model under ``report_dir``; returns what was written."""


@hookspec
def benchaudit_suite_dirs() -> Iterable[Path]:  # type: ignore[empty-body]
    """Folders that hold suite folders (``<dir>/<name>/suite.toml``).  ``pytest suites/NAME`` and
    ``benchaudit card NAME`` look there when no local ``suites/NAME`` exists: the packaged suites
    first, then the plugins' (the pytest header says which ran)."""


@hookspec
def benchaudit_readers() -> Mapping[str, Reader]:  # type: ignore[empty-body]
    """Data formats by name (a task's ``data.format``, or the file's extension): ``{"quiz": read_quiz}``."""


@hookspec
def benchaudit_rules() -> Iterable[Callable[..., Any]]:  # type: ignore[empty-body]
    """Extraction rules, each declared with ``@rule(name=..., reads=..., answers=...)``
    (:func:`pytest_benchaudit.scoring.declarations.rule`)."""


@hookspec
def benchaudit_metrics() -> Iterable[Callable[..., Any]]:  # type: ignore[empty-body]
    """Metrics, each declared with ``@metric(name=..., lower_is_better=..., kind=..., description=...)``
    (:func:`pytest_benchaudit.scoring.declarations.metric`): direction, scale and what it compares, once."""


@hookspec
def benchaudit_analyses() -> Iterable[Analysis[Any]]:  # type: ignore[empty-body]
    """Analyses of the compare document (:class:`pytest_benchaudit.compare.analysis_registry.Analysis`),
    in the order they are shown; asked only by the commands that compare (``compare``, ``audit``, ``diagnose``)."""


@hookspec
def benchaudit_importers() -> Iterable[Importer]:  # type: ignore[empty-body]
    """Importers of published outputs (:class:`Importer`); asked only by ``benchaudit import``."""
