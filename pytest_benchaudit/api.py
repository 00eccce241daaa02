"""The public API: every name a user or a plugin author may import, in one place.

Everything else in the package is internal: its modules may be renamed, split or changed without
notice.  docs/api.md lists these names (a test holds the two equal, and checks that every name here is
importable and documented, and that examples/ and docs/ import nothing else of the package).  Importing
this module is cheap: each name is loaded on first use.

- the pipeline and its records: :class:`Pipeline`, :func:`build_pipeline`, :func:`parse_override`,
  :func:`apply_overrides`, :class:`Question`, :class:`Request`, :class:`Generation`, :class:`Extraction`,
  :class:`Score`, :class:`MetricInfo`, :class:`Record`, :func:`evaluate`, :func:`summarize`;
- suites: :func:`load_suite`, :class:`Suite`;
- plugins: :data:`hookimpl`, the decorators :func:`rule` and :func:`metric`, the hook specifications
  (:mod:`hookspecs`), :class:`Importer`, :class:`Reader`, :class:`Analysis`, :class:`AnalysisContext`,
  :class:`HtmlSection`, :class:`HtmlKit` (a compare analysis), :func:`load_plugins`;
- run directories: :class:`RunDirectory`, :func:`load_run`, :func:`read_records`, :func:`read_run_json`,
  :func:`read_summary_json`;
- errors: :class:`BenchauditError`, :class:`UsageError`, :class:`ConfigError`, :class:`DataError`,
  :class:`PipelineError`, :class:`PluginError`, :class:`UnscorablePrediction`.

The package's top level (``import pytest_benchaudit``) re-exports the same names.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_NAMES = {
    "Pipeline": "pytest_benchaudit.pipeline.stages",
    "PipelineError": "pytest_benchaudit.pipeline.stages",
    "build_pipeline": "pytest_benchaudit.pipeline.stages",
    "parse_override": "pytest_benchaudit.pipeline.stages",
    "apply_overrides": "pytest_benchaudit.pipeline.layering",
    "evaluate": "pytest_benchaudit.scoring.evaluate",
    "summarize": "pytest_benchaudit.aggregate.results",
    "Question": "pytest_benchaudit.pipeline.types",
    "Request": "pytest_benchaudit.pipeline.types",
    "Generation": "pytest_benchaudit.pipeline.types",
    "Extraction": "pytest_benchaudit.pipeline.types",
    "Score": "pytest_benchaudit.pipeline.types",
    "MetricInfo": "pytest_benchaudit.pipeline.types",
    "UnscorablePrediction": "pytest_benchaudit.pipeline.types",
    "Record": "pytest_benchaudit.pipeline.record",
    "Suite": "pytest_benchaudit.dataset.suites",
    "load_suite": "pytest_benchaudit.dataset.suites",
    "rule": "pytest_benchaudit.scoring.declarations",
    "metric": "pytest_benchaudit.scoring.declarations",
    "hookimpl": "pytest_benchaudit.plugins.hookspecs",
    "hookspecs": "pytest_benchaudit.plugins",
    "Importer": "pytest_benchaudit.plugins.hookspecs",
    "Reader": "pytest_benchaudit.plugins.hookspecs",
    "Analysis": "pytest_benchaudit.compare.analysis_registry",
    "AnalysisContext": "pytest_benchaudit.compare.analysis_registry",
    "HtmlSection": "pytest_benchaudit.compare.analysis_registry",
    "HtmlKit": "pytest_benchaudit.compare.analysis_registry",
    "load_plugins": "pytest_benchaudit.plugins.plugin_manager",
    "PluginError": "pytest_benchaudit.plugins.plugin_manager",
    "RunDirectory": "pytest_benchaudit.runs.store",
    "load_run": "pytest_benchaudit.runs.store",
    "read_records": "pytest_benchaudit.runs.store",
    "read_run_json": "pytest_benchaudit.runs.store",
    "read_summary_json": "pytest_benchaudit.runs.store",
    "BenchauditError": "pytest_benchaudit.common.errors",
    "UsageError": "pytest_benchaudit.common.errors",
    "ConfigError": "pytest_benchaudit.common.errors",
    "DataError": "pytest_benchaudit.common.errors",
}

__all__ = sorted(_NAMES)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    pass


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_benchaudit.api' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
