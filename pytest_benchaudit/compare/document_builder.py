"""The compare document (what ``compare.json`` holds) of one or two run sets.

The core parts (per set: scores, ranks, tau-b, win rates, benchmark ranks, PCA, paired differences; for two
sets: rank shifts, Spearman rho, the bootstrap) are made here; then every analysis registered on
:mod:`.analysis_registry` adds its part (:func:`.analysis_registry.run_analyses`; the built-ins are in :mod:`.builtin_analyses`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping

from pytest_benchaudit.common.errors import did_you_mean
from pytest_benchaudit.compare.analysis_registry import AnalysisContext, run_analyses
from pytest_benchaudit.compare.compare_documents import (
    COMPARE,
    CompareDocument,
    OneSetAnalysis,
    RunSetMeta,
    SetAnalysis,
)
from pytest_benchaudit.compare.oneset import analyse_set
from pytest_benchaudit.compare.paired_rows import analyse_pairs
from pytest_benchaudit.compare.runsets import CompareError, LoadedRun, RunSet, load_run_set
from pytest_benchaudit.compare.twosets import MIN_SHIFT, compare_sets

__all__ = [
    "COMPARE",
    "COMPARE_VERSION",
    "CompareDocument",
    "make_sets",
    "build_compare",
    "compare_document",
    "mark_similar",
    "parse_pair",
]

COMPARE_VERSION = "benchaudit.compare/1"


def _set_meta(rs: RunSet, side: str, pipeline: str | None) -> RunSetMeta:
    return {"key": side, "label": rs.label, "pipeline_filter": pipeline, "pipelines": rs.pipelines, "runs": rs.runs}


def make_sets(
    runs_a: list[LoadedRun], runs_b: list[LoadedRun] | None = None, pipelines: tuple[str, str] | None = None
) -> tuple[RunSet, RunSet | None]:
    """The run sets compared: set a, and set b when there is a second pipeline or run set."""
    pa, pb = pipelines if pipelines else (None, None)
    if runs_b is None and pipelines is not None:
        runs_b = runs_a
    set_a = load_run_set(pa or "a", runs_a, pa)
    set_b = load_run_set(pb or "b", runs_b, pb) if runs_b is not None else None
    if set_b is not None and pa is None:
        # --against without --pipelines: name each side by its pipeline when that says something.
        if len(set_a.pipelines) == 1 and len(set_b.pipelines) == 1 and set_a.pipelines != set_b.pipelines:
            set_a.label, set_b.label = set_a.pipelines[0], set_b.pipelines[0]
    return set_a, set_b


def build_compare(
    runs_a: list[LoadedRun],
    runs_b: list[LoadedRun] | None = None,
    pipelines: tuple[str, str] | None = None,
    n_resamples: int = 5000,
    seed: int = 0,
    permutations: int = 1000,
    options: Mapping[str, object] | None = None,
) -> CompareDocument:
    """The compare document (what ``compare.json`` holds) of one or two run sets."""
    set_a, set_b = make_sets(runs_a, runs_b, pipelines)
    return compare_document(set_a, set_b, pipelines, n_resamples, seed, permutations, options)


def _with_pairs(rs: RunSet, an: OneSetAnalysis) -> SetAnalysis:
    """The set's analysis ``an`` with its paired rows, rank ties and mde80 (:mod:`.paired_rows`)."""
    lib = {k: bool(v["lower_is_better"]) for k, v in an["tasks"].items() if v["lower_is_better"] is not None}
    pairs = analyse_pairs(rs, an["scores"], lib)
    return {**an, "paired": pairs["paired"], "rank_ties": pairs["rank_ties"], "mde80": pairs["mde80"]}


def compare_document(
    set_a: RunSet,
    set_b: RunSet | None,
    pipelines: tuple[str, str] | None = None,
    n_resamples: int = 5000,
    seed: int = 0,
    permutations: int = 1000,
    options: Mapping[str, object] | None = None,
) -> CompareDocument:
    """The compare document of run sets already loaded (see :func:`make_sets`): the core parts, then each
    registered analysis's part; ``options``: the on-request analyses' options, keyed by analysis name
    (e.g. ``{"similarity": SimilarityRequest(...)}``; an on-request analysis without them does not run)."""
    pa, pb = pipelines if pipelines else (None, None)
    an_a = _with_pairs(set_a, analyse_set(set_a, seed, permutations))
    doc: CompareDocument = {
        "version": COMPARE_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "sets": {"a": _set_meta(set_a, "a", pa)},
        "conventions": {
            "task_key": "<benchmark>.<task>",
            "ranks": "1 = best; lower-is-better metrics (e.g. MAD) rank ascending; ties get the average rank",
            "scores": "each run's headline score (summary.json 'score', under the task's denominator)",
            "top_level": "scores, ranks, tau_b, mean_win_rate, benchmark_ranks, pca, paired, rank_ties and mde80 are set a's; "
            "by_set holds them for every set",
            "tau_b": "scipy.stats.kendalltau variant 'b' on the common models' oriented scores, for every pair of "
            "tasks with >= 3 common models; inversions = discordant model pairs counted directly",
            "benchmark_ranking": "models ranked by their mean task rank over the benchmark's tasks (ties averaged), "
            "among the models that have every task",
            "shift": "rank_a - rank_b: positive = the model ranks higher (better) under set b",
            "direction_stability": f"for |shift| >= {MIN_SHIFT}: share of bootstrap resamples in which rank_a - "
            "rank_b has the same sign; null for smaller shifts",
            "peer_gap": "score - mean score of the other models on the task (oriented higher = better), per set; "
            "delta = gap_b - gap_a: the model's move relative to its peers (docs/compare.md, peer gaps)",
            "mean_win_rate": "HELM-style: share of other models beaten per task (tie = 1/2), averaged over tasks",
            "paired": "every pair of models of a task on the questions both have (n): per-question score = the "
            "task's aggregation.reducer over the K repeats; model_a = the better by headline; diff = "
            "mean(score_a - score_b) in the metric's units (negative favours model_a where lower is "
            "better; 'favours' names the model). clustered_by null: the questions are treated as "
            "independent: se = SD(d)/sqrt(n), ci95 = diff -/+ 1.96 se, p_value: exact McNemar on 0/1 "
            "scores, else paired t. clustered_by set (the task's aggregation.by): se = max(CR1 clustered "
            "SE, SD(d)/sqrt(n)) over n_groups groups, ci95 = diff -/+ t(G-1) se, test clustered_t (t on "
            "G-1 df). test null: no test (under two common questions or groups). p_holm: Holm over the "
            "task's pairs; significant = p_holm < 0.05 (docs/statistics.md)",
            "rank_ties": "models next to each other in a task's ranking whose paired difference is not "
            "significant (p_holm >= 0.05, or untestable: fewer than two common questions)",
            "mde80": "per task: (z_0.975 + z_0.80) * RMS of its pairs' SD(d) / sqrt(fewest common questions); "
            "clustered pairs: the RMS of their own mde80, (t_0.975 + t_0.80 on G-1 df) * se",
        },
        "scores": an_a["scores"],
        "ranks": an_a["ranks"],
        "tau_b": an_a["tau_b"],
        "mean_win_rate": an_a["mean_win_rate"],
        "benchmark_ranks": an_a["benchmark_ranks"],
        "pca": an_a["pca"],
        "pca_by_benchmark": an_a["pca_by_benchmark"],
        "tasks": an_a["tasks"],
        "paired": an_a["paired"],
        "rank_ties": an_a["rank_ties"],
        "mde80": an_a["mde80"],
        "by_set": {"a": an_a},
        "comparison": None,
        "rank_shift": [],
        "spearman": [],
        "missing": [],
        "bootstrap": None,
        "notes": list(set_a.notes),
    }
    if set_b is not None:
        an_b = _with_pairs(set_b, analyse_set(set_b, seed, permutations))
        doc["sets"]["b"] = _set_meta(set_b, "b", pb)
        doc["by_set"]["b"] = an_b
        doc["notes"] += set_b.notes
        cmp = compare_sets(set_a, set_b, an_a, an_b, n_resamples, seed)
        doc["comparison"] = {"a": set_a.label, "b": set_b.label, "by": "pipelines" if pipelines else "run sets"}
        doc["label_a"], doc["label_b"] = set_a.label, set_b.label
        doc["rank_shift"], doc["spearman"] = cmp["rank_shift"], cmp["spearman"]
        doc["missing"], doc["bootstrap"] = cmp["missing"], cmp["bootstrap"]
        doc["min_shift_for_stability"] = cmp["min_shift_for_stability"]
        doc["notes"] += cmp["notes"]
    run_analyses(AnalysisContext(set_a, set_b, doc, n_resamples, seed, permutations, options or {}))
    return doc


def parse_pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition("~")
    if not sep or not a.strip() or not b.strip():
        raise CompareError(f"--similar {text!r}: expected TASK~TASK, e.g. cti_bench.vsp~athenabench.vsp")
    return a.strip(), b.strip()


def mark_similar(doc: CompareDocument, pairs: list[tuple[str, str]]) -> None:
    """Mark the tau-b rows of declared similar task pairs (``similar: true``) in place."""
    if not pairs:
        return
    wanted = {frozenset(p) for p in pairs}
    known = set(doc.get("scores", {}))
    for a, b in pairs:
        missing = [t for t in (a, b) if t not in known]
        if missing:
            hint = did_you_mean(missing[0], known)
            raise CompareError(
                f"--similar {a}~{b}: no scores for {', '.join(missing)} in these runs{hint}; "
                f"tasks: {', '.join(sorted(known))}"
            )
    tables = [doc.get("tau_b", [])] + [s.get("tau_b", []) for s in doc.get("by_set", {}).values()]
    for rows in tables:
        for row in rows:
            row["similar"] = frozenset((row["task_a"], row["task_b"])) in wanted
    doc["similar_pairs"] = [list(p) for p in pairs]
