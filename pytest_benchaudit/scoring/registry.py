"""Names only the scoring registries know: extraction rules and metrics.

The pipeline model (:mod:`pytest_benchaudit.pipeline.stages`) checks types; whether
``extraction.rule=final_line`` or ``scoring.metric=accuracy`` names something that exists is
known only here, downstream, so options and offline commands ask this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Protocol

from pytest_benchaudit.common.errors import ConfigError, did_you_mean
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, is_unspecified
from pytest_benchaudit.scoring import extract, metrics

__all__ = ["check_suite_names", "check_vary", "unknown_name"]


class SuiteLike(Protocol):
    """What :func:`check_suite_names` reads of a suite (a :class:`pytest_benchaudit.dataset.suites.Suite`)."""

    @property
    def path(self) -> Path: ...

    @property
    def tasks(self) -> Mapping[str, Any]: ...

    def layer_names(self, task: str) -> list[str]: ...

    def pipeline(self, task: str, layer: str) -> Pipeline: ...


def unknown_name(path: str, value: Any) -> str | None:
    """Why ``value`` is not a known name for ``path`` (a rule or metric field), or ``None``."""
    if is_unspecified(value):
        return None
    if path == "extraction.rule" and value not in extract.RULES:
        names = extract.rule_names()
        return f"{value!r} is not a known rule{did_you_mean(str(value), names)}; allowed: {', '.join(names)}"
    if path == "scoring.metric" and value not in metrics.METRICS:
        names = metrics.metric_names()
        return f"{value!r} is not a known metric{did_you_mean(str(value), names)}; allowed: {', '.join(names)}"
    return None


def check_suite_names(suite: SuiteLike) -> None:
    """Raise one :class:`ConfigError` for a layer naming a rule or metric that does not exist.

    Called wherever suites are read for use (collection, ``card``, ``ledger``, ``validate``),
    so a typo fails before anything runs instead of scoring every item invalid.
    """
    for task in suite.tasks:
        for layer in suite.layer_names(task):
            pipe = suite.pipeline(task, layer)
            for path, value in (("extraction.rule", pipe.extraction.rule), ("scoring.metric", pipe.scoring.metric)):
                problem = unknown_name(path, value)
                if problem:
                    raise ConfigError(f"{suite.path}: [tasks.{task}.{layer}] {path}: {problem}")


def check_vary(vary: list[tuple[str, list[Any]]]) -> None:
    """Raise :class:`PipelineError` naming the field for a ``--vary`` value no pipeline can use."""
    for path, values in vary:
        for value in values:
            problem = unknown_name(path, value)
            if problem:
                raise PipelineError(f"--vary {path}={value}: {problem}")
