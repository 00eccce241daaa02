"""The parts of ``compare.json`` that the built-in analyses add: ``peer_gaps``, ``similarity``, ``sensitivity``.

Declared beside :mod:`.compare_documents` (which re-exports every name here, so import them from there) because
each analysis family's rows are one seam: :mod:`.peers`, :mod:`.similarity` and :mod:`.sensitivity` build
them, :class:`.compare_documents.CompareDocument` holds them under the analysis's name.  Validated with the
document by :data:`.compare_documents.COMPARE` (``extra="forbid"``).

No postponed annotations here: typing_extensions' TypedDict reads ``NotRequired`` from the evaluated
annotations (with them every key would count as one kind at run time).

Pure: no I/O; imports no other module of :mod:`pytest_benchaudit.compare`.
"""

from typing import NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

__all__ = [
    "Coverage",
    "LeaveOneOut",
    "LeaveOneOutRow",
    "MissingPair",
    "PeerGapRow",
    "Permutation",
    "RunClass",
    "SensitivityPart",
    "SensitivityRow",
    "SetSimilarity",
    "SimilarityLayer",
    "SimilarityPair",
    "SimilarityPart",
    "SimilarityTable",
    "TaskText",
    "TemplateRemoved",
]

_FORBID = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- peer gaps


@with_config(_FORBID)
class PeerGapRow(TypedDict):
    """``peer_gaps``: a model's gap to its peers' mean under each set, and its change (:mod:`.peers`)."""

    benchmark: str
    task: str
    model: str
    n_peers: int
    gap_a: float
    gap_b: float
    delta: float | None
    comparable: bool
    metric_a: str
    metric_b: str
    gap_a_pp: float | None
    gap_b_pp: float | None
    delta_pp: float | None


# --------------------------------------------------------------------------- similarity


@with_config(_FORBID)
class SimilarityPair(TypedDict):
    """Two tasks' cosine similarity and tau-b."""

    task_a: str
    task_b: str
    similarity: float
    tau_b: float | None
    n_models: int | None


@with_config(_FORBID)
class MissingPair(TypedDict):
    """A task pair without a tau-b, and why."""

    task_a: str
    task_b: str
    cross_benchmark: bool
    n_common_models: int | None
    reason: str


@with_config(_FORBID)
class Coverage(TypedDict):
    """The pairs used within and across benchmarks, and those missing."""

    within_benchmark: int
    cross_benchmark: int
    missing: int
    note: str | None


@with_config(_FORBID)
class LeaveOneOutRow(TypedDict):
    """r without one pair."""

    task_a: str
    task_b: str
    r_without: float | None
    delta: float | None


@with_config(_FORBID)
class LeaveOneOut(TypedDict):
    """The jackknife of r: r without each pair, its range, the most influential pair."""

    method: str
    why: str
    pairs: list[LeaveOneOutRow]
    r_min: float | None
    r_max: float | None
    most_influential: LeaveOneOutRow | None
    note: str | None


@with_config(_FORBID)
class Permutation(TypedDict):
    """The Mantel permutation test of r."""

    test: str
    n_permutations: int
    seed: int
    p_value: float


@with_config(_FORBID)
class TemplateRemoved(TypedDict):
    """The template text removed from a task's prompts before they are embedded."""

    lines: list[str]
    prefix: str
    suffix: str
    prefix_chars: int
    suffix_chars: int
    from_questions: int


@with_config(_FORBID)
class TaskText(TypedDict):
    """``similarity.texts[key]``: what was embedded for a task."""

    description: str
    question_ids: list[str]
    template_removed: TemplateRemoved
    embedded: list[str]


@with_config(_FORBID)
class SimilarityTable(TypedDict):
    """:func:`.similarity.similarity_table`: the pairs, Pearson r and its tests (``skipped`` when r is undefined)."""

    pairs: list[SimilarityPair]
    n_pairs: int
    embedder: str
    pearson_r: float | None
    p_value: float | None
    permutation: Permutation | None
    leave_one_out: LeaveOneOut | None
    tasks: list[str]
    pairs_missing: list[MissingPair]
    coverage: Coverage
    note: str
    skipped: NotRequired[str]


@with_config(_FORBID)
class SetSimilarity(SimilarityTable):
    """``by_set[side].similarity``: one set's table against the shared task vectors."""

    n_prompts: int
    embed_seconds: float
    texts: str  # "see similarity.texts"


@with_config(_FORBID)
class SimilarityLayer(TypedDict):
    """``similarity.layers[side]``: each set's r and p-values side by side."""

    label: str
    pearson_r: float | None
    p_value: float | None
    permutation_p: float | None
    n_pairs: int
    leverage_note: str | None
    skipped: str | None


@with_config(_FORBID)
class SimilarityPart(SimilarityTable):
    """``similarity``: set a's table, every set's r (``layers``) and the texts embedded."""

    n_prompts: int
    embed_seconds: float
    texts: dict[str, TaskText]
    layers: dict[str, SimilarityLayer]
    how: str


# --------------------------------------------------------------------------- sensitivity


@with_config(_FORBID)
class RunClass(TypedDict):
    """A ``--sensitivity`` run classified against the base: regenerated (upstream) or re-scored (downstream)."""

    run: str
    kind: str  # "upstream" | "downstream"
    scope: str | None  # "extraction" | "downstream" for a re-scored run
    shared_items: int
    raw_outputs_differ: int
    upstream_hash_differs: list[str]
    upstream_fields_differ: list[str]
    downstream_fields_differ: list[str]
    pipelines: list[str]


@with_config(_FORBID)
class SensitivityRow(TypedDict, total=False):
    """``sensitivity.benchmarks[]``: per column (gen, ext, downstream) rho, its CI, models, tasks and, without a
    rho, why; whether generation moves the ranking more than extraction."""

    benchmark: str
    rho_gen: float | None
    ci95_gen: list[float] | None
    n_models_gen: int
    tasks_gen: list[str]
    why_no_gen: str
    rho_ext: float | None
    ci95_ext: list[float] | None
    n_models_ext: int
    tasks_ext: list[str]
    why_no_ext: str
    rho_downstream: float | None
    ci95_downstream: list[float] | None
    n_models_downstream: int
    tasks_downstream: list[str]
    why_no_downstream: str
    generation_moves_more: bool | None


@with_config(_FORBID)
class SensitivityPart(TypedDict):
    """``sensitivity``: the runs' classes and the per-benchmark rho table."""

    runs: list[RunClass]
    benchmarks: list[SensitivityRow]
    n_resamples: int
    seed: int
    notes: list[str]
    columns: dict[str, str]  # rho_<column> -> what its runs change
    how: str
