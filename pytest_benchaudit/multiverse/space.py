"""The space of a task's multiverse: each field that may vary, and its defensible values.

A task's space is a set of *axes*, one per field, each a list of values with the reason each is
defensible.  Two sources (docs/multiverse.md, "How the space is chosen"):

- **declared**: the suite's ``[tasks.NAME.multiverse]`` table (field -> ``[{value, why}]``).  It is
  the whole downstream space: a field it does not name keeps each run's stored value.
- **default** (no table): for each downstream field that changes a task's score (:data:`FIELDS`),
  the values it takes in any of the task's layers (documented, released, standardized, peer layers)
  and in the runs' own cards, plus what the registry declares applicable to the task's answer type:
  both ``extraction.reasoning`` modes, both denominators, no credit (0) and, for option labels, the
  credit of a blind guess (1/k), the readers (``scoring.registry``) that read the task's answer type
  from what the records hold, every reducer when questions were asked more than once.

Upstream fields enter only through the runs: each set of generations a task's records hold (the
layers of a ``--pipelines`` run, an upstream ``--vary`` value, runs of one model made under
different upstream pipelines) is one value of the ``generations`` axis.

One task's scores must share a scale to be one distribution: a metric whose direction or range
differs from the runs' own metric (AthenaBench VSP: 1 - MAD/7.7 against a MAD) is left out with the
reason (a declared table that mixes scales is refused).  ``unspecified`` values cannot score and a
rule reading what the records lack (log-probabilities, log-likelihoods, a judge's reading) reads
nothing: both are left out, listed.

Values are kept canonical (as the pipeline validates them: ``0`` credit is ``0.0``) and sorted, and
axes sorted by field, so the order in which a suite or a run lists them changes nothing.  Pure: the
suite is read by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

from pydantic import JsonValue

from pytest_benchaudit.aggregate.repeat_stats import REDUCERS
from pytest_benchaudit.common.errors import ConfigError
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, is_unspecified
from pytest_benchaudit.scoring.declarations import Answers
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.scoring.names import rule_info, rules_reading, unknown_name

__all__ = [
    "FIELDS",
    "GENERATIONS",
    "Axis",
    "AxisValue",
    "Evidence",
    "LeftOut",
    "TaskSpace",
    "canonical",
    "declared_space",
    "default_space",
    "metric_scale",
    "value_key",
]

# The downstream fields that change a task's score.  aggregation.method combines tasks (a benchmark's
# score, not a task's) and aggregation.by only breaks a score down: neither moves a task's headline.
FIELDS = (
    "extraction.rule",
    "extraction.reasoning",
    "scoring.metric",
    "scoring.denominator",
    "scoring.invalid_credit",
    "aggregation.reducer",
)
DECLARABLE = (*FIELDS, "aggregation.pass_k")
GENERATIONS = "generations"  # the upstream axis: one value per set of generations the runs hold


@dataclass(frozen=True)
class AxisValue:
    """One value of a field, with why it is defensible (its sources, joined)."""

    value: JsonValue
    why: str


@dataclass(frozen=True)
class Axis:
    """A field and its values (canonical, sorted)."""

    field: str
    values: tuple[AxisValue, ...]

    @property
    def upstream(self) -> bool:
        return self.field == GENERATIONS


@dataclass(frozen=True)
class LeftOut:
    """A value the defaults (or a layer) name that the space leaves out, and why."""

    field: str
    value: JsonValue
    why: str


@dataclass(frozen=True)
class TaskSpace:
    """One task's multiverse: its axes, the values left out, where the space came from."""

    benchmark: str
    task: str
    axes: tuple[Axis, ...]
    source: str  # "suite" (declared) or "default"
    left_out: tuple[LeftOut, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.benchmark}.{self.task}"

    @property
    def size(self) -> int:
        """The number of specifications of the full factorial."""
        return prod(len(a.values) for a in self.axes)

    def axis(self, name: str) -> Axis | None:
        return next((a for a in self.axes if a.field == name), None)


@dataclass
class Evidence:
    """What the records and cards of one task say, for the defaults: the runs' stored downstream
    values (field -> values), what the records hold, and the generation sets (label -> why)."""

    stored: dict[str, list[JsonValue]] = field(default_factory=dict)
    holds: set[str] = field(default_factory=set)  # of "logprobs", "continuations", "judge"
    repeats: int = 1  # the most repeats a question has
    option_counts: set[int] = field(default_factory=set)  # the questions' numbers of option labels
    generations: dict[str, str] = field(default_factory=dict)


def value_key(value: JsonValue) -> str:
    """The canonical text of a value: the sort key, and what makes two values the same."""
    return json.dumps(value, sort_keys=True)


def canonical(base: Pipeline, path: str, value: JsonValue) -> JsonValue:
    """``value`` as the pipeline validates it at ``path`` (``0`` credit -> ``0.0``); raises
    :class:`PipelineError` for a value the field does not take."""
    new = apply_overrides(base, [(path, value)])
    return new.card()["fields"][path]


def metric_scale(metric: str) -> tuple[bool, float, float] | None:
    """(lower is better, no-credit value, best value) of a metric: two metrics of one scale give
    scores one distribution can hold; ``None`` for a metric the registry does not know."""
    info = METRIC_INFO.get(metric)
    return None if info is None else (info.lower_is_better, info.invalid_value, info.best_value)


def _scale_text(metric: str) -> str:
    scale = metric_scale(metric)
    if scale is None:
        return "unknown scale"
    lib, worst, best = scale
    return f"{'lower' if lib else 'higher'} is better, {worst:g} (no credit) to {best:g}"


def _answer_type(layers: Iterable[Pipeline], stored_rules: Iterable[str]) -> Answers:
    """A task's answer type: the option label(s) a rule of its layers or runs declares it reads, else
    ``other`` (an id, a vector, a name: no registry reader is declared for those)."""
    declared = {rule_info(r).answers for r in [*(p.extraction.rule for p in layers), *stored_rules]}
    for kind in ("labels", "label"):
        if kind in declared:
            return kind
    return "other"


class _Collector:
    """Values per field with their sources, in first-seen order; canonical through ``base``."""

    def __init__(self, base: Pipeline) -> None:
        self.base = base
        self.values: dict[str, dict[str, tuple[JsonValue, list[str]]]] = {f: {} for f in FIELDS}
        self.left_out: dict[tuple[str, str], LeftOut] = {}

    def add(self, path: str, value: JsonValue, source: str) -> None:
        if is_unspecified(value) or value is None:
            return
        value = canonical(self.base, path, value)
        entry = self.values[path].setdefault(value_key(value), (value, []))
        if source not in entry[1]:
            entry[1].append(source)

    def drop(self, path: str, keep: Callable[[JsonValue], str | None]) -> None:
        """Leave out the values of ``path`` for which ``keep`` gives a reason."""
        for key, (value, sources) in list(self.values[path].items()):
            why = keep(value)
            if why:
                del self.values[path][key]
                self.left_out[(path, key)] = LeftOut(path, value, f"{why} (named by {', '.join(sources)})")

    def axes(self) -> list[Axis]:
        return [
            Axis(f, tuple(AxisValue(v, "; ".join(src)) for _k, (v, src) in sorted(vals.items())))
            for f, vals in self.values.items()
            if vals
        ]


def _generations(evidence: Evidence) -> list[Axis]:
    if len(evidence.generations) < 2:
        return []
    return [Axis(GENERATIONS, tuple(AxisValue(label, why) for label, why in sorted(evidence.generations.items())))]


def default_space(
    benchmark: str, task: str, layers: Mapping[str, Pipeline], evidence: Evidence, anchor_metric: str | None
) -> TaskSpace:
    """The default space of a task (module docstring): ``layers`` by name, ``evidence`` from the runs
    (empty for ``--list`` before any run), ``anchor_metric`` the metric whose scale the space keeps
    (the runs' own; for ``--list``, the released layer's)."""
    pipelines = list(layers.values())
    base = pipelines[0] if pipelines else Pipeline(name="multiverse", benchmark=benchmark, task=task)
    got = _Collector(base)
    for name, pipe in layers.items():
        for path in FIELDS:
            got.add(path, pipe.card()["fields"][path], f"{name} layer")
    for path, values in evidence.stored.items():
        for value in values:
            got.add(path, value, "the runs' cards")
    answers = _answer_type(pipelines, [str(v) for v in evidence.stored.get("extraction.rule", [])])
    for mode in ("keep", "strip"):
        got.add("extraction.reasoning", mode, "registry: both reasoning modes")
    for denominator in ("total", "valid"):
        got.add("scoring.denominator", denominator, "registry: both denominators")
    got.add("scoring.invalid_credit", 0.0, "registry: no credit (0 on a share, the metric's worst case on an error)")
    if answers == "label" and len(evidence.option_counts) == 1:
        k = next(iter(evidence.option_counts))
        if k > 1:
            got.add("scoring.invalid_credit", 1.0 / k, f"registry: the credit of a blind guess among {k} options")
    if answers != "other":
        readers = rules_reading("text", *(r for r in ("logprobs", "continuations") if r in evidence.holds))
        for rule in sorted(readers):
            if rule_info(rule).answers == answers:
                got.add(
                    "extraction.rule",
                    rule,
                    f"registry: a reader of {'option labels' if answers == 'labels' else 'an option label'}",
                )
    if evidence.repeats > 1:
        for reducer in REDUCERS:
            got.add("aggregation.reducer", reducer, f"registry: a reducer of the {evidence.repeats} repeats")
    got.drop("extraction.rule", lambda rule: _unreadable(str(rule), evidence))
    got.drop("scoring.metric", lambda metric: _off_scale(str(metric), anchor_metric))
    notes = (
        []
        if evidence.repeats > 1
        else ["aggregation.reducer: each question was asked once; every reducer reads its one score alike"]
    )
    axes = [*_generations(evidence), *got.axes()]
    if evidence.repeats <= 1:
        axes = [a for a in axes if a.field != "aggregation.reducer"]
    return TaskSpace(
        benchmark,
        task,
        tuple(sorted(axes, key=lambda a: a.field)),
        "default",
        tuple(sorted(got.left_out.values(), key=lambda x: (x.field, value_key(x.value)))),
        tuple(notes),
    )


def _unreadable(rule: str, evidence: Evidence) -> str | None:
    """Why a rule cannot read the stored generations (it reads what the records lack), or None."""
    reads = rule_info(rule).reads
    if reads == "judge":
        return "reads a judge's verdict: re-reading it under other fields needs the judge again"
    if reads in ("logprobs", "continuations") and reads not in evidence.holds:
        return f"reads {reads} and the records hold none"
    return None


def _off_scale(metric: str, anchor: str | None) -> str | None:
    info = METRIC_INFO.get(metric)
    if info is not None and info.needs_judge:
        return "graded by a judge: re-grading needs the judge again"
    if anchor is None or metric_scale(metric) == metric_scale(anchor):
        return None
    return (
        f"its scale ({_scale_text(metric)}) is not the runs' metric {anchor}'s ({_scale_text(anchor)}): "
        "scores on two scales are not one distribution"
    )


def declared_space(
    benchmark: str,
    task: str,
    table: Mapping[str, Sequence[Mapping[str, JsonValue]]],
    base: Pipeline,
    evidence: Evidence,
    where: str,
    resources: Collection[str] = (),
) -> TaskSpace:
    """The space a suite declares in ``[tasks.TASK.multiverse]`` (``where`` names it in errors), plus
    the runs' generation sets.  A field outside :data:`DECLARABLE`, an unknown rule or metric, a value
    the field does not take, a metric reading resources the task does not declare (``resources``: the
    names under its ``[tasks.TASK.resources]``), or metrics of two scales: one :class:`ConfigError`."""
    axes = []
    for path, entries in sorted(table.items()):
        if path not in DECLARABLE:
            raise ConfigError(
                f"{where}: {path} does not change a task's score (the multiverse varies {', '.join(DECLARABLE)})"
            )
        values: dict[str, AxisValue] = {}
        for entry in entries:
            raw = entry.get("value")
            problem = unknown_name(path, raw)
            if problem:
                raise ConfigError(f"{where}: {path}: {problem}")
            if is_unspecified(raw):
                raise ConfigError(f"{where}: {path}: 'unspecified' cannot be scored; give a value")
            needs = METRIC_INFO[str(raw)].resources if path == "scoring.metric" else ()
            if any(name not in resources for name in needs):
                raise ConfigError(
                    f"{where}: scoring.metric: {raw} reads the task resource(s) {', '.join(needs)}, "
                    f"which [tasks.{task}.resources] does not declare"
                )
            try:
                value = canonical(base, path, raw)
            except PipelineError as err:
                raise ConfigError(f"{where}: {path}: {err}") from None
            values[value_key(value)] = AxisValue(value, str(entry.get("why", "")))
        axes.append(Axis(path, tuple(v for _k, v in sorted(values.items()))))
    metrics = next((a for a in axes if a.field == "scoring.metric"), None)
    if metrics is not None and len({metric_scale(str(v.value)) for v in metrics.values}) > 1:
        raise ConfigError(
            f"{where}: scoring.metric: "
            + "; ".join(f"{v.value} ({_scale_text(str(v.value))})" for v in metrics.values)
            + ": one task's scores must share a scale to be one distribution"
        )
    return TaskSpace(benchmark, task, tuple(sorted([*_generations(evidence), *axes], key=lambda a: a.field)), "suite")
