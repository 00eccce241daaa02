"""What each extraction rule and metric is, declared once, where it is defined.

A rule or metric is registered by name in its module's table (``extract.RULES``,
``metrics.METRICS``, a family module's ``RULES`` / ``METRICS``); what the rest of the
package needs to know about it is declared with a decorator on its definition, in the
manner of inspect_ai's ``@scorer(metrics=...)``::

    @rule(reads="logprobs", answers="label")
    def logprob_argmax(text, question, generation): ...

    @metric(answers="labels")
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
This module imports nothing of the package, so every rule module can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, TypeVar

__all__ = ["Answers", "MetricReads", "Reads", "RuleInfo", "metric", "metric_reads", "rule", "rule_info"]

Reads = Literal["text", "logprobs", "continuations", "judge"]
Answers = Literal["label", "labels", "other"]
READS: tuple[Reads, ...] = ("text", "logprobs", "continuations", "judge")
ANSWERS: tuple[Answers, ...] = ("label", "labels", "other")

_F = TypeVar("_F", bound=Callable[..., object])
_RULE_ATTR = "__benchaudit_rule__"
_METRIC_ATTR = "__benchaudit_metric__"


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


def rule(*, reads: Reads = "text", answers: Answers = "other", strict: bool = False) -> Callable[[_F], _F]:
    """Declare what the decorated rule reads and answers (returns the function unchanged otherwise)."""
    info = RuleInfo(reads=reads, answers=answers, strict=strict)

    def declare(func: _F) -> _F:
        setattr(func, _RULE_ATTR, info)
        return func

    return declare


def metric(*, answers: Answers = "other") -> Callable[[_F], _F]:
    """Declare which prediction the decorated metric compares (returns the function unchanged otherwise)."""
    reads = MetricReads(answers=answers)

    def declare(func: _F) -> _F:
        setattr(func, _METRIC_ATTR, reads)
        return func

    return declare


def rule_info(func: Callable[..., object]) -> RuleInfo:
    """The :class:`RuleInfo` declared on ``func`` (the default: a text rule, another value)."""
    info = getattr(func, _RULE_ATTR, None)
    return info if isinstance(info, RuleInfo) else RuleInfo()


def metric_reads(func: Callable[..., object]) -> MetricReads:
    """The :class:`MetricReads` declared on ``func`` (the default: another value)."""
    reads = getattr(func, _METRIC_ATTR, None)
    return reads if isinstance(reads, MetricReads) else MetricReads()
