"""The shape of ``multiverse.json`` (``benchaudit multiverse``, and ``benchaudit audit``'s multiverse part).

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: the document is the JSON
object it is written as, typed key by key for the checker, validated where it is read
(:data:`MULTIVERSE`, ``extra="forbid"``) and published as a JSON Schema (``benchaudit schema
multiverse``, docs/schemas/multiverse.schema.json).  docs/multiverse.md says what each number means.

A specification's ``fields`` and a field's ``value`` are open (``JsonValue``): a value is whatever the
pipeline field takes (a rule's name, a credit, a generation set's label).

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

__all__ = [
    "MULTIVERSE",
    "MULTIVERSE_VERSION",
    "FieldShare",
    "LeftOutValue",
    "ModelRow",
    "MultiverseDocument",
    "Order",
    "PairRow",
    "SkipRow",
    "SpaceField",
    "SpaceRow",
    "SpaceValue",
    "SpecRow",
    "VarianceRow",
    "VarianceTerm",
    "VerdictRow",
]

MULTIVERSE_VERSION = "benchaudit.multiverse/1"
_FORBID = ConfigDict(extra="forbid")

#: ``holds``: the better model is better in every specification; ``most``: the other model is better
#: in fewer than a quarter; ``flips``: in a quarter or more; ``tied``: the two score alike in every one.
Order = Literal["holds", "most", "flips", "tied"]


@with_config(_FORBID)
class SpaceValue(TypedDict):
    """One value of a field and why it is defensible (its sources)."""

    value: JsonValue
    why: str


@with_config(_FORBID)
class SpaceField(TypedDict):
    """One axis of a task's space: a pipeline field (or ``generations``, the upstream axis) and its values."""

    field: str
    upstream: bool
    values: list[SpaceValue]


@with_config(_FORBID)
class LeftOutValue(TypedDict):
    """A value a layer or the registry names that the space leaves out, and why."""

    field: str
    value: JsonValue
    why: str


@with_config(_FORBID)
class SpaceRow(TypedDict):
    """One task's space: where it came from, its axes, its size and what was enumerated."""

    benchmark: str
    task: str
    source: Literal["suite", "default"]
    fields: list[SpaceField]
    left_out: list[LeftOutValue]
    size: int
    enumerated: int
    sampled: bool
    sample_seed: int | None
    notes: list[str]


@with_config(_FORBID)
class SpecRow(TypedDict):
    """One specification of a task: its number in the full factorial, its values, each model's score."""

    task: str
    spec: int
    fields: dict[str, JsonValue]
    scores: dict[str, float | None]


@with_config(_FORBID)
class ModelRow(TypedDict):
    """One model on one task across the specifications: the score's distribution and rank intervals."""

    task: str
    model: str
    metric: str
    lower_is_better: bool
    n_specs: int
    median: float | None
    min: float | None
    max: float | None
    min_spec: int | None
    max_spec: int | None
    rank_min: float | None
    rank_max: float | None
    rank_ci95: list[float] | None


@with_config(_FORBID)
class FieldShare(TypedDict):
    """A field and a share (of specification pairs, or of variance)."""

    field: str
    share: float


@with_config(_FORBID)
class PairRow(TypedDict):
    """Two models on one task across the specifications in which both have a score."""

    task: str
    model_a: str
    model_b: str
    n_specs: int
    a_better: float
    b_better: float
    tied: float
    significant: float
    significant_a: float
    significant_b: float
    order: Order
    flip_fields: list[FieldShare]


@with_config(_FORBID)
class VarianceTerm(TypedDict):
    """A main effect (one field) or a two-way interaction (two fields) and its share of the variance."""

    fields: list[str]
    share: float


@with_config(_FORBID)
class VarianceRow(TypedDict):
    """The score variance across one task's specifications, split by field (``model`` None: every model pooled)."""

    task: str
    model: str | None
    exact: bool
    total_ss: float
    sd: float  # the scores' standard deviation across specifications: sqrt(total_ss / n), n = models x specifications
    fields: list[FieldShare]
    higher_order: float
    terms: list[VarianceTerm]
    note: str


@with_config(_FORBID)
class VerdictRow(TypedDict):
    """One benchmark's verdict: which model orderings survive its multiverse."""

    benchmark: str
    sentence: str
    tasks: list[str]
    pairs: int
    holds: int
    most: int
    flips: int
    tied: int
    top_field: str | None
    top_field_pairs: int


@with_config(_FORBID)
class SkipRow(TypedDict):
    """A task left out of the multiverse, and why."""

    task: str
    reason: str


@with_config(_FORBID)
class MultiverseDocument(TypedDict):
    """``multiverse.json``: the verdicts first, then each task's space, models, pairs, variance and specifications."""

    version: str
    created: str
    runs: list[str]
    seed: int
    resamples: int
    max_specs: int
    verdicts: list[VerdictRow]
    spaces: list[SpaceRow]
    models: list[ModelRow]
    pairs: list[PairRow]
    variance: list[VarianceRow]
    specifications: list[SpecRow]
    skipped: list[SkipRow]
    how: str


MULTIVERSE: TypeAdapter[MultiverseDocument] = TypeAdapter(MultiverseDocument)
