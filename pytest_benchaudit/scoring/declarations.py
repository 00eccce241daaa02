"""What each extraction rule and metric is, declared once, where it is defined.

A rule or metric is registered, and what the rest of the package needs to know about it is
declared, by one decorator on its definition, in the manner of inspect_ai's
``@scorer(metrics=...)``; a module's tables (``extract.RULES``, ``metrics.METRICS`` /
``METRIC_INFO``, a family module's) are :func:`declared` from its namespace::

    @rule(name="logprob_argmax", reads="logprobs", answers="label")
    def logprob_argmax(text, question, generation): ...

    @metric(name="label_set_match", answers="labels", lower_is_better=False, kind="binary",
            description="set of answer labels equals the gold set")
    def label_set_match(prediction, question, resources): ...

A rule's :class:`RuleInfo` says what it reads (``text``: the answer text; ``logprobs``: the
first token's log-probabilities, no text; ``continuations``: the echoed log-likelihood of
each option; ``judge``: an LLM judge reads it), what its prediction is (one option label,
a set of labels, or another value: an id, a vector, a number) and whether it is the
project's *strict* reader (a label only where a final-answer line states it alone).  A
metric's :class:`MetricReads` says which prediction it compares: one label, a label set,
or another value.  Direction, scale and resources stay in ``MetricInfo`` beside the metric.

Who reads them (:mod:`pytest_benchaudit.scoring.names` answers by name): the judge
orchestration (:mod:`.judge_calls`: which strict rule cuts the answer text the judge reads), the
diagnose checks (which rules read no text, which is the strict reader to compare with) and
the ledger (which rules decoding cannot move).  A rule or metric without a decorator is a
text rule with an ``other`` prediction, a metric comparing ``other`` values: the common case.

A plugin's rule or metric is declared the same way (``benchaudit_rules`` / ``benchaudit_metrics``
return the decorated functions, :mod:`pytest_benchaudit.plugins.hookspecs`)::

    @metric(name="quiz_exact", answers="label", lower_is_better=False, kind="binary",
            description="the option the answer names is the gold one")
    def quiz_exact(prediction, question, resources): ...

This module imports only :mod:`pytest_benchaudit.pipeline.types`, so every rule module can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pytest_benchaudit.pipeline.types import MetricInfo

__all__ = [
    "Answers",
    "MetricReads",
    "Reads",
    "RuleInfo",
    "declared",
    "declared_metric_info",
    "declared_name",
    "metric",
    "metric_reads",
    "rule",
    "rule_info",
]

Reads = Literal["text", "logprobs", "continuations", "judge"]
Answers = Literal["label", "labels", "other"]
READS: tuple[Reads, ...] = ("text", "logprobs", "continuations", "judge")
ANSWERS: tuple[Answers, ...] = ("label", "labels", "other")

_F = TypeVar("_F", bound=Callable[..., object])
_RULE_ATTR = "__benchaudit_rule__"
_METRIC_ATTR = "__benchaudit_metric__"
_NAME_ATTR = "__benchaudit_name__"
_INFO_ATTR = "__benchaudit_metric_info__"


@dataclass(frozen=True)
class RuleInfo:
    """What an extraction rule reads and what its prediction is (see the module doc)."""

    reads: Reads = "text"
    answers: Answers = "other"
    # The strict reader of its ``answers``: a label (or label set) only where a final-answer line
    # states it alone; the checks re-read answers with it, the judge reads the text it leaves.
    strict: bool = False

    def __post_init__(self) -> None:
        if self.reads not in READS:
            raise ValueError(f"RuleInfo.reads {self.reads!r}: expected one of {', '.join(READS)}")
        if self.answers not in ANSWERS:
            raise ValueError(f"RuleInfo.answers {self.answers!r}: expected one of {', '.join(ANSWERS)}")
        if self.strict and (self.reads != "text" or self.answers == "other"):
            raise ValueError("a strict rule reads text and answers a label or a label set")


@dataclass(frozen=True)
class MetricReads:
    """Which prediction a metric compares with the gold: one label, a label set, or another value."""

    answers: Answers = "other"

    def __post_init__(self) -> None:
        if self.answers not in ANSWERS:
            raise ValueError(f"metric answers {self.answers!r}: expected one of {', '.join(ANSWERS)}")


def rule(
    *, name: str | None = None, reads: Reads = "text", answers: Answers = "other", strict: bool = False
) -> Callable[[_F], _F]:
    """Declare what the decorated rule reads and answers, and (a plugin's rule) the ``name`` a pipeline's
    ``extraction.rule`` gives it; returns the function unchanged otherwise."""
    info = RuleInfo(reads=reads, answers=answers, strict=strict)

    def declare(func: _F) -> _F:
        setattr(func, _RULE_ATTR, info)
        if name is not None:
            setattr(func, _NAME_ATTR, _checked_name(name, "rule"))
        return func

    return declare


def metric(
    *,
    name: str | None = None,
    answers: Answers = "other",
    lower_is_better: bool | None = None,
    kind: Literal["binary", "continuous"] | None = None,
    description: str = "",
    **info: Any,
) -> Callable[[_F], _F]:
    """Declare which prediction the decorated metric compares and, for a plugin's metric, its ``name``
    (a pipeline's ``scoring.metric``) and what aggregation needs: ``lower_is_better``, ``kind``,
    ``description`` and any other :class:`~pytest_benchaudit.pipeline.types.MetricInfo` field
    (``invalid_value``, ``resources``, ...).  A wrong field is a ``TypeError`` at the decorator;
    returns the function unchanged otherwise."""
    reads = MetricReads(answers=answers)
    given = lower_is_better is not None or kind is not None
    if given and (lower_is_better is None or kind is None):
        raise TypeError("metric(): lower_is_better and kind go together (the direction and the scale)")
    if info and not given:
        raise TypeError(f"metric(): {', '.join(sorted(info))} without lower_is_better and kind")
    declared = (
        MetricInfo(lower_is_better=bool(lower_is_better), kind=kind, description=description, **info)
        if given and kind is not None
        else None
    )

    def declare(func: _F) -> _F:
        setattr(func, _METRIC_ATTR, reads)
        if name is not None:
            setattr(func, _NAME_ATTR, _checked_name(name, "metric"))
        if declared is not None:
            setattr(func, _INFO_ATTR, declared)
        return func

    return declare


def _checked_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"{what} name {name!r}: letters, digits, '_' and '-' only")
    return name


def declared(
    namespace: Mapping[str, Any],
) -> tuple[dict[str, Callable[..., Any]], dict[str, Callable[..., Any]], dict[str, MetricInfo]]:
    """``(rules, metrics, metric infos)`` by name: the functions of a module's namespace (``globals()``) that
    declare a name, in definition order; a function imported from another module is that module's.  The one
    registration of a built-in rule or metric is its decorator: a module's tables are this call's result."""
    rules: dict[str, Callable[..., Any]] = {}
    metrics: dict[str, Callable[..., Any]] = {}
    infos: dict[str, MetricInfo] = {}
    for value in list(namespace.values()):
        name = declared_name(value) if callable(value) else None
        if name is None or getattr(value, "__module__", None) != namespace.get("__name__"):
            continue
        if hasattr(value, _RULE_ATTR):
            rules[name] = value
        else:
            info = declared_metric_info(value)
            if info is None:
                raise TypeError(f"metric {name!r} declares no direction and scale (lower_is_better, kind)")
            metrics[name] = value
            infos[name] = info
    return rules, metrics, infos


def declared_name(func: Callable[..., object]) -> str | None:
    """The ``name`` declared on a rule or metric, ``None`` when its decorator gave none."""
    name = getattr(func, _NAME_ATTR, None)
    return name if isinstance(name, str) else None


def declared_metric_info(func: Callable[..., object]) -> MetricInfo | None:
    """The :class:`MetricInfo` declared on a metric by :func:`metric`, ``None`` when it declared none."""
    info = getattr(func, _INFO_ATTR, None)
    return info if isinstance(info, MetricInfo) else None


def rule_info(func: Callable[..., object]) -> RuleInfo:
    """The :class:`RuleInfo` declared on ``func`` (the default: a text rule, another value)."""
    info = getattr(func, _RULE_ATTR, None)
    return info if isinstance(info, RuleInfo) else RuleInfo()


def metric_reads(func: Callable[..., object]) -> MetricReads:
    """The :class:`MetricReads` declared on ``func`` (the default: another value)."""
    reads = getattr(func, _METRIC_ATTR, None)
    return reads if isinstance(reads, MetricReads) else MetricReads()
