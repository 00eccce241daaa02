"""The shape of ``compare.json``: run sets, per-set analyses, rank shifts, paired rows and the analyses' parts.

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.documents` gives: the compare document is the JSON
object it is written as, typed key by key for the checker, validated by :data:`COMPARE` (``extra="forbid"``)
and published as a JSON Schema (``docs/schemas/compare.schema.json``, :class:`CompareDocument`).

The parts of the registered analyses (:mod:`.registry`) are declared for the built-ins (``peer_gaps``,
``similarity``, ``sensitivity``); an analysis registered from outside adds a key of its own, which the
validator does not know.

Pure: no I/O; imports no other module of :mod:`pytest_benchaudit.audit.compare` (they import it).
"""

from __future__ import annotations

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import NotRequired, TypedDict

from pytest_benchaudit.aggregate.documents import TauRow

__all__ = ["BenchmarkRank", "BootstrapInfo", "BootstrapQuestions", "COMPARE", "CompareDocument", "CompareTauRow",
           "Comparison", "Conventions", "Coverage", "LeaveOneOut", "LeaveOneOutRow", "MDE80Row", "MissingPair",
           "MissingRow", "OneSetAnalysis", "PairedRow", "ParallelAnalysis", "PcaResult", "PeerGapRow", "Permutation",
           "RankShiftRow", "RankTie", "RunClass", "RunSetMeta", "SensitivityPart", "SensitivityRow", "SetAnalysis",
           "SetComparison", "SetPairs", "SetSimilarity", "SimilarityLayer", "SimilarityPair", "SimilarityPart",
           "SimilarityTable", "SpearmanRow", "TaskInfo", "TaskText", "TemplateRemoved"]

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
    test: str  # "mcnemar_exact" | "paired_t"
    mde80: float | None
    sd_diff: float | None
    lower_is_better: bool
    favours: str | None  # the model the paired difference favours; None when diff is 0
    discordant: NotRequired[list[int]]  # [questions only a gets right, questions only b gets right]


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
    """A task's minimum detectable difference at 80% power (:mod:`.paired`)."""

    mde80: float | None
    n: int
    sd_diff: float | None
    pairs: int


@with_config(_FORBID)
class SetPairs(TypedDict):
    """What the paired analysis of one run set adds to it (:func:`.paired.analyse_pairs`)."""

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
