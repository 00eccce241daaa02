"""Names only the scoring registries know: extraction rules and metrics, and what each is.

The pipeline model (:mod:`pytest_benchaudit.pipeline.stages`) checks types; whether
``extraction.rule=final_line`` or ``scoring.metric=accuracy`` names something that exists is
known only here, downstream, so options and offline commands ask this module.

What a rule reads and answers, and which prediction a metric compares, is declared on each
definition (:mod:`.declarations`); :func:`rule_info`, :func:`rules_reading`, :func:`strict_rule`
and :func:`metric_answers` answer it by name, so no other module lists rule or metric names.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol

from pytest_benchaudit.common.errors import ConfigError, did_you_mean
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, is_unspecified
from pytest_benchaudit.scoring import declarations, extract, metrics
from pytest_benchaudit.scoring.declarations import Answers, Reads, RuleInfo

__all__ = [
    "check_pipeline_names",
    "check_suite_names",
    "check_vary",
    "metric_answers",
    "rule_info",
    "rules_reading",
    "strict_rule",
    "unknown_name",
]


def rule_info(name: str) -> RuleInfo:
    """What the rule ``name`` reads and answers; the default (a text rule) for a name no rule has."""
    func = extract.RULES.get(name)
    return declarations.rule_info(func) if func is not None else RuleInfo()


def rules_reading(*reads: Reads) -> frozenset[str]:
    """The names of the rules that read one of ``reads`` (``rules_reading("logprobs")``: the
    first-token log-probability rules, which read no text and which decoding cannot move)."""
    return frozenset(name for name, func in extract.RULES.items() if declarations.rule_info(func).reads in reads)


def strict_rule(answers: Answers) -> str:
    """The strict reader of a label (``answers="label"``) or a label set (``"labels"``): the rule
    that reads one only where a final-answer line states it alone.  Exactly one rule is each."""
    found = sorted(
        name
        for name, func in extract.RULES.items()
        if declarations.rule_info(func).strict and declarations.rule_info(func).answers == answers
    )
    if len(found) != 1:
        raise LookupError(f"expected one strict rule answering {answers!r}, found {found or 'none'}")
    return found[0]


def metric_answers(name: str) -> Answers:
    """Which prediction the metric ``name`` compares: ``label``, ``labels`` (a set) or ``other``."""
    func = metrics.METRICS.get(name)
    return declarations.metric_reads(func).answers if func is not None else "other"


class SuiteLike(Protocol):
    """What :func:`check_suite_names` reads of a suite (a :class:`pytest_benchaudit.dataset.suites.Suite`)."""

    @property
    def path(self) -> Path: ...

    @property
    def tasks(self) -> Collection[str]: ...  # the task names (a Suite's dict of TaskSpec by name)

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


def check_pipeline_names(pipeline: Pipeline) -> None:
    """Raise :class:`PipelineError` for a rule or metric of ``pipeline`` that does not exist (a ``--set``
    or a variant may name one the suite's layers do not)."""
    for path, value in (("extraction.rule", pipeline.extraction.rule), ("scoring.metric", pipeline.scoring.metric)):
        problem = unknown_name(path, value)
        if problem:
            raise PipelineError(f"{path} {problem}")


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
