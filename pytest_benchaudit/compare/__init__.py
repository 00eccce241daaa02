"""``benchaudit compare``: how model rankings agree across tasks, and move between pipelines.

    benchaudit compare RUN... [--pipelines A,B] [--against RUN...] --out DIR [--html PATH]
                              [--similarity [--embedder SPEC]] [--sensitivity RUN...] [--findings JSON]
                              [--resamples 5000] [--seed 0] [--permutations 1000]

RUN is a run directory (``run.json`` + ``records.jsonl``) or a folder of run directories
(e.g. the ``--report-dir`` of ``benchaudit import``).  Only base records (no ``--vary``
variant) are compared.

- One run set (no option): each task key ``<benchmark>.<task>`` must have one score per
  model; a model scored under two pipelines is an error asking for ``--pipelines``.
- ``--pipelines A,B``: set A is the runs' records under pipeline A, set B those under B
  (the pipeline name is read from each record).
- ``--against RUN...``: set A is the positional runs, set B these (both options combine:
  A's pipeline from the positional runs, B's from ``--against``).

``DIR/compare.json`` holds, for set A (and for each set under ``by_set``):

- ``scores`` {task key: {model: score}} (the run's headline score, as in ``summary.json``);
- ``ranks`` {task key: {model: rank}}: 1 = best, direction-aware (lower-is-better metrics
  such as a MAD rank ascending), ties get the average rank;
- ``tau_b`` [{task_a, task_b, tau, p_value, inversions, n_models}]: every pair of tasks with
  at least 3 common models, Kendall tau-b (scipy, variant "b") on the oriented scores of the
  common models; ``inversions`` = model pairs the two tasks order oppositely, counted directly;
- ``mean_win_rate`` {model: share}: HELM-style, the share of other models beaten per task
  (a tie counts half), averaged over the model's tasks;
- ``benchmark_ranks`` {benchmark: {model: {mean_task_rank, rank}}}: models ranked by their mean
  task rank (ties averaged) over the benchmark's tasks; models lacking a task are left out;
- ``pca``: PCA of the models x tasks score matrix (scores oriented higher = better, columns
  standardized), variance explained per component and Horn's parallel analysis.
- ``paired`` [{task, model_a, model_b, n, diff, se, ci95, p_value, p_holm, significant, test, mde80,
  ...}]: every pair of models of a task on the questions both answered, ``rank_ties`` (neighbours in
  a task's ranking whose pair is not significant) and ``mde80`` per task
  (:mod:`pytest_benchaudit.compare.paired_rows`, docs/statistics.md).

With two sets, also:

- ``rank_shift`` [{benchmark, model, rank_a, rank_b, shift, direction_stability, ...}]: the
  benchmark ranking is by *mean task rank* over the tasks both sets have (task ranks can be
  averaged across metrics and directions; a benchmark score cannot always be had:
  AthenaBench's standardized layer leaves it unset because VSP is a MAD), among the models both
  sets score on all of those tasks; ``shift = rank_a - rank_b`` (positive: the model climbs
  under B); ``direction_stability`` (for |shift| >= 3, else null) is the share of bootstrap
  resamples in which the shift keeps its sign;
- ``spearman`` [{benchmark, rho, ci95, ...}]: Spearman rho between the two benchmark rankings,
  95% percentile interval from a paired bootstrap over questions (``bootstrap`` says how: per
  task, resampled indices of the questions every compared model has under both sets, shared by
  all models and both sets; each model's task score recomputed from its per-item ``score`` and
  ``valid`` under its own denominator).
- ``missing``: models left out of a comparison and why;
- ``peer_gaps`` [{task, model, gap_a, gap_b, delta, ...}]: each model's score minus the mean of the
  other models', per set, and its change (:mod:`pytest_benchaudit.compare.peers`).

Also ``pca_by_benchmark`` (a PCA of each benchmark's own tasks when there are several) and, on
request (``benchaudit compare --similarity`` / ``--sensitivity RUN...``, see docs/compare.md),
``similarity`` (:mod:`pytest_benchaudit.compare.similarity`) and ``sensitivity``
(:mod:`pytest_benchaudit.compare.sensitivity`).  The command line is :mod:`pytest_benchaudit.cli.compare_cmd`.

``peer_gaps``, ``similarity`` and ``sensitivity`` are analyses on the registry (:mod:`.analysis_registry`: an
:class:`Analysis` is a name, the function computing its part, a text renderer and an HTML section;
:func:`register` adds one to every compare document, its text and the HTML report); :mod:`.builtin_analyses`
registers the built-ins when this package is imported.
"""

# The built-in analyses register themselves on import: before any module of the package is used.
from pytest_benchaudit.compare import builtin_analyses as _builtin_analyses  # noqa: F401
from pytest_benchaudit.compare.analysis_registry import (
    Analysis,
    AnalysisContext,
    HtmlKit,
    HtmlSection,
    analyses,
    register,
    unregister,
)
from pytest_benchaudit.compare.document_builder import (
    COMPARE_VERSION,
    build_compare,
    compare_document,
    make_sets,
    mark_similar,
    parse_pair,
)
from pytest_benchaudit.compare.oneset import analyse_set, task_ranks, tau_b_table
from pytest_benchaudit.compare.render import render_compare
from pytest_benchaudit.compare.runsets import CompareError, LoadedRun, RunSet, expand_runs, load_run_set, load_runs
from pytest_benchaudit.compare.twosets import MIN_SHIFT, compare_sets

__all__ = [
    "CompareError",
    "LoadedRun",
    "RunSet",
    "expand_runs",
    "load_runs",
    "load_run_set",
    "analyse_set",
    "task_ranks",
    "tau_b_table",
    "compare_sets",
    "MIN_SHIFT",
    "build_compare",
    "compare_document",
    "make_sets",
    "mark_similar",
    "parse_pair",
    "render_compare",
    "COMPARE_VERSION",
    "Analysis",
    "AnalysisContext",
    "HtmlKit",
    "HtmlSection",
    "analyses",
    "register",
    "unregister",
]

#: Old private name, still used by bench/bootstrap_speed.py.
_load = load_runs
