"""The shape of ``compare.json``: run sets, per-set analyses, rank shifts, paired rows and the analyses' parts.

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: the compare document is the JSON
object it is written as, typed key by key for the checker, validated by :data:`COMPARE` (``extra="forbid"``)
and published as a JSON Schema (``docs/schemas/compare.schema.json``, :class:`CompareDocument`).

The parts of the registered analyses (:mod:`.analysis_registry`) are declared for the built-ins (``peer_gaps``,
``similarity``, ``sensitivity``) in :mod:`.analysis_documents`, re-exported here; an analysis registered from
outside adds a key of its own, which the validator does not know.

Pure: no I/O; imports no other module of :mod:`pytest_benchaudit.compare` but :mod:`.analysis_documents`
(they import it).
"""

from __future__ import annotations

from typing import NotRequired

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.summary_documents import TauRow
from pytest_benchaudit.compare.analysis_documents import (
    Coverage,
    LeaveOneOut,
    LeaveOneOutRow,
    MissingPair,
    PeerGapRow,
    Permutation,
    RunClass,
    SensitivityPart,
    SensitivityRow,
    SetSimilarity,
    SimilarityLayer,
    SimilarityPair,
    SimilarityPart,
    SimilarityTable,
    TaskText,
    TemplateRemoved,
)

__all__ = [
    "BenchmarkRank",
    "BootstrapInfo",
    "BootstrapQuestions",
    "COMPARE",
    "CompareDocument",
    "CompareTauRow",
    "Comparison",
    "Conventions",
    "Coverage",
    "LeaveOneOut",
    "LeaveOneOutRow",
    "MDE80Row",
    "MissingPair",
    "MissingRow",
    "OneSetAnalysis",
    "PairedRow",
    "ParallelAnalysis",
    "PcaResult",
    "PeerGapRow",
    "Permutation",
    "RankShiftRow",
    "RankTie",
    "RunClass",
    "RunSetMeta",
    "SensitivityPart",
    "SensitivityRow",
    "SetAnalysis",
    "SetComparison",
    "SetPairs",
    "SetSimilarity",
    "SimilarityLayer",
    "SimilarityPair",
    "SimilarityPart",
    "SimilarityTable",
    "SpearmanRow",
    "TaskInfo",
    "TaskText",
    "TemplateRemoved",
]

_FORBID = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- one set


@with_config(_FORBID)
class RunSetMeta(TypedDict):
    """``sets[side]``: which runs (and pipeline) one side of the comparison is."""

    key: str
    label: str
    pipeline_filter: str | None
    pipelines: list[str]
    runs: list[str]


@with_config(_FORBID)
class TaskInfo(TypedDict):
    """``tasks[key]``: a task's metric(s), direction (None: mixed, not ranked), models with a score, question
    counts and denominators."""

    metrics: list[str]
    lower_is_better: bool | None
    n_models: int
    n_questions: list[int]
    denominators: list[str]


@with_config(_FORBID)
class BenchmarkRank(TypedDict):
    """``benchmark_ranks[bench][model]``: the model's mean task rank and its rank by it."""

    mean_task_rank: float
    rank: float


@with_config(_FORBID)
class ParallelAnalysis(TypedDict):
    """Horn's parallel analysis of a PCA."""

    threshold: list[float]
    n_components: int
    n_permutations: int
    quantile: float
    seed: int
    rule: str


@with_config(_FORBID)
class PcaResult(TypedDict, total=False):
    """``pca``: the PCA of the models x tasks matrix, or ``skipped`` with the reason (and, as far as it got,
    ``models_left_out`` / ``constant_tasks``)."""

    skipped: str
    rows: str
    columns: list[str]
    models: list[str]
    models_left_out: list[str]
    constant_tasks: list[str]
    orientation: str
    eigenvalues: list[float]
    variance_explained: list[float]
    cumulative: list[float]
    loadings: dict[str, list[float]]
    model_coordinates: dict[str, list[float]]
    parallel_analysis: ParallelAnalysis


@with_config(_FORBID)
class CompareTauRow(TauRow):
    """A tau-b row of the compare document; ``similar`` once ``--similar`` declared pairs (:func:`.mark_similar`)."""

    similar: NotRequired[bool]


@with_config(_FORBID)
class PairedRow(TypedDict):
    """One pair of models on one task (``discordant`` only under McNemar)."""

    task: str
    model_a: str  # the better by headline
    model_b: str
    n: int  # questions both have
    n_a: int  # questions model a has
    n_b: int
    diff: float | None  # mean of score_a - score_b, in the metric's units
    se: float | None
    ci95: list[float] | None
    p_value: float | None
    p_holm: float | None
    significant: bool | None
    # "mcnemar_exact" | "paired_t" | "clustered_t"; None when no test ran (under two common questions, or two groups)
    test: str | None
    mde80: float | None
    sd_diff: float | None
    lower_is_better: bool
    favours: str | None  # the model the paired difference favours; None when diff is 0
    discordant: NotRequired[list[int]]  # [questions only a gets right, questions only b gets right]
    # The aggregation.by field the se, ci95 and test are clustered by, and its groups among the n questions;
    # null: the questions are treated as independent.  Old compare documents lack both.
    clustered_by: NotRequired[str | None]
    n_groups: NotRequired[int | None]


@with_config(_FORBID)
class RankTie(TypedDict):
    """Two models next to each other in a task's ranking whose order is not significant."""

    task: str
    better: str
    worse: str
    n: int
    diff: float | None
    ci95: list[float] | None
    p_value: float | None
    p_holm: float | None


@with_config(_FORBID)
class MDE80Row(TypedDict):
    """A task's minimum detectable difference at 80% power (:mod:`.paired_rows`)."""

    mde80: float | None
    n: int
    sd_diff: float | None
    pairs: int


@with_config(_FORBID)
class SetPairs(TypedDict):
    """What the paired analysis of one run set adds to it (:func:`.paired_rows.analyse_pairs`)."""

    paired: list[PairedRow]
    rank_ties: list[RankTie]
    mde80: dict[str, MDE80Row]


@with_config(_FORBID)
class OneSetAnalysis(TypedDict):
    """:func:`.oneset.analyse_set`: scores, ranks, tau-b, win rates, benchmark ranks, PCA and task info of one set."""

    label: str
    pipelines: list[str]
    runs: list[str]
    models: list[str]
    tasks: dict[str, TaskInfo]
    scores: dict[str, dict[str, float]]  # task key -> model -> headline
    ranks: dict[str, dict[str, float]]  # task key -> model -> rank (1 = best)
    tau_b: list[CompareTauRow]
    mean_win_rate: dict[str, float | None]
    benchmark_ranks: dict[str, dict[str, BenchmarkRank]]
    pca: PcaResult
    pca_by_benchmark: dict[str, PcaResult]


# --------------------------------------------------------------------------- two sets


@with_config(_FORBID)
class Comparison(TypedDict):
    """``comparison``: the two sides' labels and what tells them apart."""

    a: str
    b: str
    by: str  # "pipelines" | "run sets"


@with_config(_FORBID)
class RankShiftRow(TypedDict):
    """A model's benchmark rank under set a and set b (by mean task rank)."""

    benchmark: str
    model: str
    rank_a: float
    rank_b: float
    shift: float  # rank_a - rank_b: positive = better under b
    direction_stability: float | None
    mean_task_rank_a: float
    mean_task_rank_b: float


@with_config(_FORBID)
class SpearmanRow(TypedDict):
    """Spearman rho between a benchmark's two rankings, with its bootstrap CI."""

    benchmark: str
    rho: float | None
    ci95: list[float] | None
    n_models: int
    tasks: list[str]
    n_resamples: int
    n_resamples_defined: int
    p_value: float | None


@with_config(_FORBID)
class MissingRow(TypedDict):
    """A model left out of a benchmark's comparison, and why."""

    benchmark: str
    model: str
    missing_from: list[str]  # sides
    tasks: dict[str, list[str]]  # side -> the tasks it lacks there
    reason: str


@with_config(_FORBID)
class BootstrapQuestions(TypedDict):
    """Per task: the questions the bootstrap resamples, and the most a model has."""

    n_common: int
    n_max: int


@with_config(_FORBID)
class BootstrapInfo(TypedDict):
    """``bootstrap``: how the paired bootstrap over questions was drawn."""

    unit: str
    n_resamples: int
    seed: int
    paired: bool
    interval: str
    seconds: float
    questions: dict[str, BootstrapQuestions]
    how: str


class SetComparison(TypedDict):
    """:func:`.twosets.compare_sets`: set a against set b (its parts go to the document's top level)."""

    rank_shift: list[RankShiftRow]
    spearman: list[SpearmanRow]
    missing: list[MissingRow]
    notes: list[str]
    bootstrap: BootstrapInfo
    min_shift_for_stability: int


# --------------------------------------------------------------------------- the document


@with_config(_FORBID)
class SetAnalysis(OneSetAnalysis):
    """``by_set[side]``: one set's analysis with its paired rows (and the similarity table, on request)."""

    paired: list[PairedRow]
    rank_ties: list[RankTie]
    mde80: dict[str, MDE80Row]
    similarity: NotRequired[SetSimilarity]


@with_config(_FORBID)
class Conventions(TypedDict):
    """``conventions``: what the document's numbers mean, in words."""

    task_key: str
    ranks: str
    scores: str
    top_level: str
    tau_b: str
    benchmark_ranking: str
    shift: str
    direction_stability: str
    peer_gap: str
    mean_win_rate: str
    paired: str
    rank_ties: str
    mde80: str


@with_config(_FORBID)
class CompareDocument(TypedDict):
    """``compare.json``: set a's analysis at the top level, every set's under ``by_set``; with two sets the
    rank shifts, Spearman rho and the bootstrap; the registered analyses' parts (``peer_gaps``,
    ``similarity``, ``sensitivity``)."""

    version: str
    created: str
    sets: dict[str, RunSetMeta]
    conventions: Conventions
    scores: dict[str, dict[str, float]]
    ranks: dict[str, dict[str, float]]
    tau_b: list[CompareTauRow]
    mean_win_rate: dict[str, float | None]
    benchmark_ranks: dict[str, dict[str, BenchmarkRank]]
    pca: PcaResult
    pca_by_benchmark: dict[str, PcaResult]
    tasks: dict[str, TaskInfo]
    paired: list[PairedRow]
    rank_ties: list[RankTie]
    mde80: dict[str, MDE80Row]
    by_set: dict[str, SetAnalysis]
    comparison: Comparison | None
    rank_shift: list[RankShiftRow]
    spearman: list[SpearmanRow]
    missing: list[MissingRow]
    bootstrap: BootstrapInfo | None
    notes: list[str]
    # Two sets.
    label_a: NotRequired[str]
    label_b: NotRequired[str]
    min_shift_for_stability: NotRequired[int]
    # --similar TASK~TASK.
    similar_pairs: NotRequired[list[list[str]]]
    # The built-in analyses (.builtin_analyses).
    peer_gaps: NotRequired[list[PeerGapRow]]
    similarity: NotRequired[SimilarityPart]
    sensitivity: NotRequired[SensitivityPart]


#: Validates a compare.json document (``extra="forbid"``: a key nobody declared is an error).
COMPARE: TypeAdapter[CompareDocument] = TypeAdapter(CompareDocument)
