"""``benchaudit compare``: how model rankings agree across tasks, and move between pipelines.

    benchaudit compare RUN... [--pipelines A,B] [--against RUN...] --out DIR [--html PATH]
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
- ``missing``: models left out of a comparison and why.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from pytest_benchaudit.common.errors import BenchauditError, RunDirError, cli_exit_code
from pytest_benchaudit.aggregate import stats
from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.audit.offline import OfflineError, load_run
from pytest_benchaudit.common.progress import iterate

__all__ = ["CompareError", "add_compare_parser", "run_compare", "build_compare", "load_run_set", "expand_runs",
           "render_compare", "COMPARE_VERSION"]

COMPARE_VERSION = "benchaudit.compare/1"
MIN_SHIFT = 3


class CompareError(BenchauditError):
    """The runs cannot be compared as asked; the message says why."""


# --------------------------------------------------------------------------- loading


@dataclass
class LoadedRun:
    path: Path
    meta: dict[str, Any]
    records: list[dict[str, Any]]  # base records only
    n_variant_records: int = 0


@dataclass
class RunSet:
    """The results and per-item records of one side of a comparison."""

    label: str
    pipelines: list[str]
    runs: list[str]
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # task key -> model -> result
    items: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)  # (task key, model) -> records
    notes: list[str] = field(default_factory=list)


def expand_runs(paths: Iterable[Path]) -> list[Path]:
    """Run directories named, or found one level under a folder named; in order, without repeats."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / "run.json").is_file():
            found = [p]
        elif p.is_dir():
            found = sorted(c for c in p.iterdir() if (c / "run.json").is_file())
            if not found:
                raise CompareError(f"{p}: neither a run directory (no run.json) nor a folder of run directories")
        else:
            raise CompareError(f"{p}: not found")
        out += [f for f in found if f.resolve() not in {o.resolve() for o in out}]
    return out


def _load(paths: Iterable[Path]) -> list[LoadedRun]:
    runs = []
    for path in iterate(expand_runs(paths), label="load", unit="runs"):
        try:
            meta, records = load_run(path, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr),
                                     require_records=True)
        except OfflineError as err:
            raise CompareError(str(err)) from None
        base = [r for r in records if not r.get("variant")]
        runs.append(LoadedRun(path, meta, base, len(records) - len(base)))
    return runs


def load_run_set(label: str, runs: list[LoadedRun], pipeline: str | None = None) -> RunSet:
    """One side of the comparison: the runs' base records (under ``pipeline`` if given), summarized per run."""
    seen_pipelines = sorted({r["pipeline"] for run in runs for r in run.records})
    if pipeline is not None and pipeline not in seen_pipelines:
        raise CompareError(f"no records under pipeline {pipeline!r} in the runs of set {label!r}; "
                           f"they hold: {', '.join(seen_pipelines) or 'no records'}")
    rs = RunSet(label, [], [])
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    for run in runs:
        recs = [r for r in run.records if pipeline is None or r["pipeline"] == pipeline]
        if not recs:
            continue
        if run.n_variant_records:
            rs.notes.append(f"{run.path}: {run.n_variant_records} variant records (--vary) left out; base records compared")
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in recs:
            groups[(f"{r['benchmark']}.{r['task']}", r["model"])].append(r)
        for (key, model), group in groups.items():
            pipes = sorted({r["pipeline"] for r in group})
            if len(pipes) > 1:
                raise CompareError(f"{run.path}: {key} of {model!r} is scored under several pipelines "
                                   f"({', '.join(pipes)}); choose two with --pipelines A,B")
            if (key, model) in owner:
                first_path, first_pipe = owner[(key, model)]
                if first_pipe != pipes[0]:
                    raise CompareError(f"{key} of {model!r} is scored under several pipelines ({first_pipe} in "
                                       f"{first_path}, {pipes[0]} in {run.path}); choose two with --pipelines A,B "
                                       "(or give the second set with --against)")
                raise CompareError(f"{key} of {model!r} appears in two runs of set {label!r}: {first_path} "
                                   f"and {run.path}; give one run per model and task")
            owner[(key, model)] = (str(run.path), pipes[0])
            rs.items[(key, model)] = group
        for res in summarize(recs, run.meta.get("pipeline_cards") or {}):
            rs.results.setdefault(f"{res['benchmark']}.{res['task']}", {})[res["model"]] = res
        rs.runs.append(str(run.path))
        for p in sorted({r["pipeline"] for r in recs}):
            if p not in rs.pipelines:
                rs.pipelines.append(p)
    if not rs.results:
        raise CompareError(f"set {label!r}: no records to compare")
    return rs


# --------------------------------------------------------------------------- one set


def _f(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _task_info(rs: RunSet) -> dict[str, dict[str, Any]]:
    """Per task key: metric(s), direction, whether it can be ranked, n models, n questions."""
    info: dict[str, dict[str, Any]] = {}
    for key in sorted(rs.results):
        by_model = rs.results[key]
        directions = {r["lower_is_better"] for r in by_model.values()}
        metrics = sorted({r["metric"] for r in by_model.values()})
        no_score = sorted(m for m, r in by_model.items() if r["score"] is None)
        entry = {"metrics": metrics, "lower_is_better": directions.pop() if len(directions) == 1 else None,
                 "n_models": len(by_model) - len(no_score),
                 "n_questions": sorted({r["n"] for r in by_model.values()}),
                 "denominators": sorted({r["denominator"] for r in by_model.values()})}
        if entry["lower_is_better"] is None:
            rs.notes.append(f"{rs.label}: {key} mixes higher- and lower-is-better metrics across models "
                            f"({', '.join(metrics)}): not ranked")
        if no_score:
            rs.notes.append(f"{rs.label}: {key} has no headline score for {', '.join(no_score)} "
                            "(denominator unspecified): left out of its ranking")
        info[key] = entry
    return info


def _scores(rs: RunSet, info: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {key: {m: float(r["score"]) for m, r in sorted(rs.results[key].items()) if r["score"] is not None}
            for key in info if info[key]["lower_is_better"] is not None}


def task_ranks(scores: dict[str, dict[str, float]], lib: dict[str, bool]) -> dict[str, dict[str, float]]:
    """{task key: {model: rank}}: 1 = best, direction-aware (``lib``: lower is better), ties averaged."""
    out = {}
    for key, by_model in scores.items():
        models = list(by_model)
        ranks = stats.rank_scores([by_model[m] for m in models], lib[key]) if models else []
        out[key] = {m: float(r) for m, r in zip(models, ranks)}
    return out


def tau_b_table(scores: dict[str, dict[str, float]], lib: dict[str, bool]) -> list[dict[str, Any]]:
    """Kendall tau-b and inversions for every pair of tasks scored on at least 3 common models."""
    keys = sorted(scores)
    rows = []
    for i, ka in enumerate(keys):
        for kb in keys[i + 1:]:
            common = sorted(set(scores[ka]) & set(scores[kb]))
            if len(common) < 3:
                continue
            xa = stats.orient([scores[ka][m] for m in common], lib[ka])
            xb = stats.orient([scores[kb][m] for m in common], lib[kb])
            rows.append({"task_a": ka, "task_b": kb, **stats.kendall_tau_b(xa, xb)})
    return rows


def _benchmark_ranks(ranks: dict[str, dict[str, float]]) -> dict[str, dict[str, dict[str, float]]]:
    by_bench: dict[str, list[str]] = defaultdict(list)
    for key in ranks:
        by_bench[key.split(".", 1)[0]].append(key)
    out = {}
    for bench, keys in sorted(by_bench.items()):
        models = sorted(set.intersection(*(set(ranks[k]) for k in keys)))
        if not models:
            continue
        # Ranks among the models that have every task, so a missing model does not shift the others.
        sub = {k: {m: ranks[k][m] for m in models} for k in keys}
        per_task = [stats.rank_scores([sub[k][m] for m in models], lower_is_better=True) for k in keys]  # re-rank among these
        mean, rank = stats.mean_rank_ranking(per_task)
        out[bench] = {m: {"mean_task_rank": float(mr), "rank": float(r)} for m, mr, r in zip(models, mean, rank)}
    return out


def _pca(scores: dict[str, dict[str, float]], lib: dict[str, bool], seed: int, permutations: int) -> dict[str, Any]:
    keys = sorted(scores)
    if not keys:
        return {"skipped": "no ranked tasks"}
    models = sorted(set.intersection(*(set(scores[k]) for k in keys)))
    left_out = sorted(set().union(*(set(scores[k]) for k in keys)) - set(models))
    matrix = np.array([[stats.orient(scores[k][m], lib[k]) for k in keys] for m in models], dtype=float)
    if len(models) < 3:
        return {"skipped": f"{len(models)} models score on every task; PCA needs at least 3", "models_left_out": left_out}
    sd = matrix.std(axis=0, ddof=1)
    constant = [k for k, s in zip(keys, sd) if not s > 0]
    if constant:
        keep = [i for i, s in enumerate(sd) if s > 0]
        keys = [keys[i] for i in keep]
        matrix = matrix[:, keep]
    if len(keys) < 2:
        return {"skipped": "fewer than two tasks vary across models", "constant_tasks": constant}
    p = stats.pca(matrix)
    pa = stats.parallel_analysis(matrix, n_permutations=permutations, seed=seed)
    return {
        "rows": "models", "columns": keys, "models": models, "models_left_out": left_out, "constant_tasks": constant,
        "orientation": "scores negated for lower-is-better tasks (higher = better), columns standardized",
        "eigenvalues": [float(v) for v in p["eigenvalues"]],
        "variance_explained": [float(v) for v in p["variance_explained"]],
        "cumulative": [float(v) for v in p["cumulative"]],
        "loadings": {k: [float(v) for v in row] for k, row in zip(keys, p["loadings"])},
        "parallel_analysis": {"threshold": [float(v) for v in pa["threshold"]], "n_components": pa["n_components"],
                              "n_permutations": pa["n_permutations"], "quantile": pa["quantile"], "seed": pa["seed"],
                              "rule": "leading components whose eigenvalue exceeds the 95th percentile of the "
                                      "eigenvalues of column-permuted matrices"},
    }


def analyse_set(rs: RunSet, seed: int = 0, permutations: int = 1000) -> dict[str, Any]:
    """scores, ranks, tau_b, mean_win_rate, benchmark_ranks, pca and task info of one run set."""
    info = _task_info(rs)
    lib = {k: bool(v["lower_is_better"]) for k, v in info.items() if v["lower_is_better"] is not None}
    scores = _scores(rs, info)
    ranks = task_ranks(scores, lib)
    return {
        "label": rs.label, "pipelines": rs.pipelines, "runs": rs.runs,
        "models": sorted({m for by_model in rs.results.values() for m in by_model}),
        "tasks": info, "scores": scores, "ranks": ranks, "tau_b": tau_b_table(scores, lib),
        "mean_win_rate": stats.mean_win_rate(scores, lib),
        "benchmark_ranks": _benchmark_ranks(ranks),
        "pca": _pca(scores, lib, seed, permutations),
    }


# --------------------------------------------------------------------------- two sets


def _task_items(rs: RunSet, key: str, models: list[str], qids: list[str], lower_is_better: bool) -> stats.TaskItems:
    scores = np.empty((len(models), len(qids)))
    valid = np.empty((len(models), len(qids)), dtype=bool)
    use_valid = np.empty(len(models), dtype=bool)
    for i, m in enumerate(models):
        by_q = {str(r["question_id"]): r for r in rs.items[(key, m)]}
        scores[i] = [float(by_q[q]["score"]) for q in qids]
        valid[i] = [bool(by_q[q]["valid"]) for q in qids]
        use_valid[i] = rs.results[key][m]["denominator"] == "valid"
    return stats.TaskItems(scores, valid, use_valid, lower_is_better)


def compare_sets(a: RunSet, b: RunSet, an_a: dict[str, Any], an_b: dict[str, Any], n_resamples: int,
                 seed: int) -> dict[str, Any]:
    """rank_shift, spearman, missing and bootstrap details for set A vs set B."""
    shifts: list[dict[str, Any]] = []
    spearman: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    notes: list[str] = []
    questions: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    benches = sorted({k.split(".", 1)[0] for k in an_a["scores"]} | {k.split(".", 1)[0] for k in an_b["scores"]})
    for bench in iterate(benches, label="bootstrap", unit="benchmarks"):
        ka = {k for k in an_a["scores"] if k.startswith(bench + ".")}
        kb = {k for k in an_b["scores"] if k.startswith(bench + ".")}
        keys = sorted(ka & kb)
        for k in sorted(ka ^ kb):
            notes.append(f"{bench}: task {k} is only in set {'a' if k in ka else 'b'}; the comparison uses "
                         f"the tasks both sets have")
        if not keys:
            notes.append(f"{bench}: no task in both sets; not compared")
            continue
        has_all = {side: {m for m in an["models"] if all(m in an["scores"][k] for k in keys)}
                   for side, an in (("a", an_a), ("b", an_b))}
        models = sorted(has_all["a"] & has_all["b"])
        everyone = set().union(*({m for k in keys for m in an["scores"][k]} for an in (an_a, an_b)))
        for m in sorted(everyone - set(models)):
            gaps = {side: [k for k in keys if m not in an["scores"][k]] for side, an in (("a", an_a), ("b", an_b))}
            where = [s for s in ("a", "b") if gaps[s]]
            missing.append({"benchmark": bench, "model": m, "missing_from": where,
                            "tasks": {s: gaps[s] for s in where},
                            "reason": "; ".join(f"no score in set {s} ({(a if s == 'a' else b).label}) for "
                                                f"{', '.join(gaps[s]) if len(gaps[s]) < len(keys) else 'any task'}"
                                                for s in where) + ": left out of rank_shift and spearman"})
        if len(models) < 2:
            notes.append(f"{bench}: {len(models)} model(s) in both sets with every task; nothing to compare")
            continue
        items_a, items_b = [], []
        for k in keys:
            order = [str(r["question_id"]) for r in a.items[(k, models[0])]]
            common = set(order)
            for rs in (a, b):
                for m in models:
                    common &= {str(r["question_id"]) for r in rs.items[(k, m)]}
            qids = [q for q in dict.fromkeys(order) if q in common]
            n_max = max(len(rs.items[(k, m)]) for rs in (a, b) for m in models)
            questions[k] = {"n_common": len(qids), "n_max": n_max}
            if len(qids) < n_max:
                notes.append(f"{k}: the bootstrap resamples the {len(qids)} questions every compared model has "
                             f"in both sets (a model has up to {n_max})")
            if not qids:
                raise CompareError(f"{k}: no question is common to every compared model in both sets")
            lib_a = bool(an_a["tasks"][k]["lower_is_better"])
            lib_b = bool(an_b["tasks"][k]["lower_is_better"])
            items_a.append(_task_items(a, k, models, qids, lib_a))
            items_b.append(_task_items(b, k, models, qids, lib_b))
        boot = stats.paired_bootstrap(items_a, items_b, n_resamples=n_resamples, seed=seed)
        shift = boot["rank_a"] - boot["rank_b"]
        stability = stats.direction_stability(shift, boot["boot_rank_a"], boot["boot_rank_b"], MIN_SHIFT)
        for i, m in enumerate(models):
            shifts.append({"benchmark": bench, "model": m, "rank_a": float(boot["rank_a"][i]),
                           "rank_b": float(boot["rank_b"][i]), "shift": float(shift[i]),
                           "direction_stability": stability[i],
                           "mean_task_rank_a": float(boot["mean_rank_a"][i]),
                           "mean_task_rank_b": float(boot["mean_rank_b"][i])})
        finite = np.isfinite(boot["boot_rho"])
        rho = boot["rho"]
        ci = stats.percentile_ci(boot["boot_rho"]) if len(models) >= 3 else None
        spearman.append({"benchmark": bench, "rho": rho if len(models) >= 3 else None, "ci95": ci,
                         "n_models": len(models), "tasks": keys, "n_resamples": n_resamples,
                         "n_resamples_defined": int(finite.sum()),
                         "p_value": _f(_scipy_spearman_p(boot["rank_a"], boot["rank_b"])) if len(models) >= 3 else None})
        if len(models) < 3:
            notes.append(f"{bench}: only {len(models)} models to rank: rho not reported")
    seconds = time.perf_counter() - t0
    return {"rank_shift": shifts, "spearman": spearman, "missing": missing, "notes": notes,
            "bootstrap": {"unit": "question", "n_resamples": n_resamples, "seed": seed, "paired": True,
                          "interval": "percentile, 2.5% and 97.5%", "seconds": seconds, "questions": questions,
                          "how": "per task, one (resamples x questions) index array drawn over the questions every "
                                 "compared model has in both sets, shared by all models and both sets; task scores "
                                 "recomputed from per-item score and valid under each model's denominator; ranked "
                                 "per task (direction-aware, ties averaged), benchmark ranking by mean task rank"},
            "min_shift_for_stability": MIN_SHIFT}


def _scipy_spearman_p(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(spearmanr(x, y).pvalue)


# --------------------------------------------------------------------------- document


def _set_meta(rs: RunSet, side: str, pipeline: str | None) -> dict[str, Any]:
    return {"key": side, "label": rs.label, "pipeline_filter": pipeline, "pipelines": rs.pipelines, "runs": rs.runs}


def build_compare(runs_a: list[LoadedRun], runs_b: list[LoadedRun] | None = None, pipelines: tuple[str, str] | None = None,
                  n_resamples: int = 5000, seed: int = 0, permutations: int = 1000) -> dict[str, Any]:
    """The compare document (what ``compare.json`` holds) of one or two run sets."""
    pa, pb = pipelines if pipelines else (None, None)
    if runs_b is None and pipelines is not None:
        runs_b = runs_a
    label_a = pa or "a"
    label_b = pb or "b"
    set_a = load_run_set(label_a, runs_a, pa)
    set_b = load_run_set(label_b, runs_b, pb) if runs_b is not None else None
    if set_b is not None and pa is None:
        # --against without --pipelines: name each side by its pipeline when that says something.
        if len(set_a.pipelines) == 1 and len(set_b.pipelines) == 1 and set_a.pipelines != set_b.pipelines:
            set_a.label, set_b.label = set_a.pipelines[0], set_b.pipelines[0]
    an_a = analyse_set(set_a, seed, permutations)
    doc: dict[str, Any] = {
        "version": COMPARE_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "sets": {"a": _set_meta(set_a, "a", pa)},
        "conventions": {
            "task_key": "<benchmark>.<task>",
            "ranks": "1 = best; lower-is-better metrics (e.g. MAD) rank ascending; ties get the average rank",
            "scores": "each run's headline score (summary.json 'score', under the task's denominator)",
            "top_level": "scores, ranks, tau_b, mean_win_rate, benchmark_ranks and pca are set a's; "
                         "by_set holds them for every set",
            "tau_b": "scipy.stats.kendalltau variant 'b' on the common models' oriented scores, for every pair of "
                     "tasks with >= 3 common models; inversions = discordant model pairs counted directly",
            "benchmark_ranking": "models ranked by their mean task rank over the benchmark's tasks (ties averaged), "
                                 "among the models that have every task",
            "shift": "rank_a - rank_b: positive = the model ranks higher (better) under set b",
            "direction_stability": f"for |shift| >= {MIN_SHIFT}: share of bootstrap resamples in which rank_a - "
                                   "rank_b has the same sign; null for smaller shifts",
            "mean_win_rate": "HELM-style: share of other models beaten per task (tie = 1/2), averaged over tasks",
        },
        "scores": an_a["scores"], "ranks": an_a["ranks"], "tau_b": an_a["tau_b"],
        "mean_win_rate": an_a["mean_win_rate"], "benchmark_ranks": an_a["benchmark_ranks"], "pca": an_a["pca"],
        "tasks": an_a["tasks"],
        "by_set": {"a": an_a},
        "comparison": None, "rank_shift": [], "spearman": [], "missing": [], "bootstrap": None,
        "notes": list(set_a.notes),
    }
    if set_b is not None:
        an_b = analyse_set(set_b, seed, permutations)
        doc["sets"]["b"] = _set_meta(set_b, "b", pb)
        doc["by_set"]["b"] = an_b
        doc["notes"] += set_b.notes
        cmp = compare_sets(set_a, set_b, an_a, an_b, n_resamples, seed)
        doc["comparison"] = {"a": set_a.label, "b": set_b.label,
                             "by": "pipelines" if pipelines else "run sets"}
        doc["label_a"], doc["label_b"] = set_a.label, set_b.label
        for key in ("rank_shift", "spearman", "missing", "bootstrap"):
            doc[key] = cmp[key]
        doc["min_shift_for_stability"] = cmp["min_shift_for_stability"]
        doc["notes"] += cmp["notes"]
    return doc


# --------------------------------------------------------------------------- terminal


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:g}" if float(x).is_integer() else f"{x:.{digits}f}"
    return str(x)


def render_compare(doc: dict[str, Any]) -> str:
    from tabulate import tabulate

    out: list[str] = []
    for side, an in doc["by_set"].items():
        keys = sorted(an["ranks"])
        models = sorted({m for k in keys for m in an["ranks"][k]})
        bench_ranks = an["benchmark_ranks"]
        benches = sorted(bench_ranks)
        headers = ["model", *[k + (" ↓" if an["tasks"][k]["lower_is_better"] else "") for k in keys],
                   *[f"{b} (mean rank)" for b in benches], "win rate"]
        rows = []
        for m in models:
            row = [m, *[_fmt(an["ranks"][k].get(m), 1) for k in keys]]
            for bnch in benches:
                e = bench_ranks[bnch].get(m)
                row.append(f"{_fmt(e['rank'], 1)} ({e['mean_task_rank']:.2f})" if e else "–")
            row.append(_fmt(an["mean_win_rate"].get(m)))
            rows.append(row)
        rows.sort(key=lambda r: (an["mean_win_rate"].get(r[0]) is None, -(an["mean_win_rate"].get(r[0]) or 0)))
        out.append(f"Per-task ranks, set {side} ({an['label']}: pipelines {', '.join(an['pipelines'])}); "
                   "1 = best, ties averaged, ↓ = lower is better")
        out.append(tabulate(rows, headers=headers, tablefmt="simple"))
        if an["tau_b"]:
            taus = [r["tau"] for r in an["tau_b"] if r["tau"] is not None]
            out.append(f"\nKendall tau-b between tasks, set {side}"
                       + (f" (range {min(taus):.3f} .. {max(taus):.3f})" if taus else ""))
            out.append(tabulate([[r["task_a"], r["task_b"], _fmt(r["tau"]), _fmt(r["p_value"]), r["inversions"],
                                  r["n_models"], "declared similar" if r.get("similar") else ""] for r in an["tau_b"]],
                                headers=["task a", "task b", "tau-b", "p", "inversions", "models", ""],
                                tablefmt="simple"))
        pca = an["pca"]
        if "variance_explained" in pca:
            shares = ", ".join(f"{100 * v:.1f}%" for v in pca["variance_explained"])
            out.append(f"\nPCA ({len(pca['models'])} models x {len(pca['columns'])} tasks, standardized): variance "
                       f"explained {shares}; parallel analysis retains "
                       f"{pca['parallel_analysis']['n_components']} component(s)")
        elif pca.get("skipped"):
            out.append(f"\nPCA skipped: {pca['skipped']}")
        out.append("")
    if doc.get("comparison"):
        c = doc["comparison"]
        out.append(f"Set a = {c['a']}, set b = {c['b']} (by {c['by']}); paired bootstrap over questions, "
                   f"{doc['bootstrap']['n_resamples']} resamples, seed {doc['bootstrap']['seed']} "
                   f"({doc['bootstrap']['seconds']:.2f} s)")
        out.append(tabulate([[s["benchmark"], _fmt(s["rho"]),
                              f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s["ci95"] else "–", s["n_models"],
                              len(s["tasks"])] for s in doc["spearman"]],
                            headers=["benchmark", "Spearman rho", "95% CI", "models", "tasks"], tablefmt="simple"))
        moved = sorted((r for r in doc["rank_shift"] if r["shift"] != 0), key=lambda r: (-abs(r["shift"]), r["model"]))
        if moved:
            out.append("\nRank shifts (shift = rank a - rank b; + = climbs under b; stability for |shift| >= "
                       f"{doc['min_shift_for_stability']})")
            out.append(tabulate([[r["benchmark"], r["model"], _fmt(r["rank_a"], 1), _fmt(r["rank_b"], 1),
                                  f"{r['shift']:+g}", _fmt(r["direction_stability"])] for r in moved],
                                headers=["benchmark", "model", "rank a", "rank b", "shift", "direction stability"],
                                tablefmt="simple"))
        else:
            out.append("\nNo rank shifts.")
        for m in doc["missing"]:
            out.append(f"missing: {m['benchmark']}: {m['model']}: {m['reason']}")
    for note in doc.get("notes", []):
        out.append(f"note: {note}")
    return "\n".join(out)


# --------------------------------------------------------------------------- command line


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``compare`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "compare", help="rank agreement across tasks (Kendall tau-b, win rates, PCA) and rank shifts between two "
                        "pipelines or run sets (Spearman rho, paired bootstrap over questions)",
        description="Compare model rankings across tasks, and between two pipelines (--pipelines A,B) or two run "
                    "sets (--against RUN...). Writes DIR/compare.json and prints the tables.")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                   help="run directories, or folders of run directories (e.g. an import's --report-dir)")
    p.add_argument("--pipelines", metavar="A,B", help="compare the runs' records under pipeline A with those under B")
    p.add_argument("--against", nargs="+", type=Path, metavar="RUN", help="a second run set (set b)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="where compare.json goes")
    p.add_argument("--html", type=Path, metavar="PATH", help="also write an HTML report (if the HTML writer is installed)")
    p.add_argument("--similar", action="append", default=[], metavar="TASK~TASK",
                   help="declare two tasks semantically similar (repeatable), e.g. cti_bench.vsp~athenabench.vsp; "
                        "their tau-b rows are marked, so disagreement between similar tasks stands out")
    p.add_argument("--resamples", type=int, default=5000, help="bootstrap resamples (default 5000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and of parallel analysis (default 0)")
    p.add_argument("--permutations", type=int, default=1000, help="parallel-analysis null matrices (default 1000)")
    return p


def _parse_pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition("~")
    if not sep or not a.strip() or not b.strip():
        raise CompareError(f"--similar {text!r}: expected TASK~TASK, e.g. cti_bench.vsp~athenabench.vsp")
    return a.strip(), b.strip()


def mark_similar(doc: dict[str, Any], pairs: list[tuple[str, str]]) -> None:
    """Mark the tau-b rows of declared similar task pairs (``similar: true``) in place."""
    if not pairs:
        return
    wanted = {frozenset(p) for p in pairs}
    known = set(doc.get("scores", {}))
    for a, b in pairs:
        missing = [t for t in (a, b) if t not in known]
        if missing:
            raise CompareError(f"--similar {a}~{b}: no scores for {', '.join(missing)} in these runs; "
                               f"tasks: {', '.join(sorted(known))}")
    tables = [doc.get("tau_b", [])] + [s.get("tau_b", []) for s in doc.get("by_set", {}).values()]
    for rows in tables:
        for row in rows:
            row["similar"] = frozenset((row["task_a"], row["task_b"])) in wanted
    doc["similar_pairs"] = [list(p) for p in pairs]


def _summary(run_dir: Path) -> dict[str, Any]:
    from pytest_benchaudit.runs.store import read_summary_json

    try:
        return read_summary_json(run_dir)
    except RunDirError:  # optional here: ranks come from the records
        return {}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def run_compare(args: argparse.Namespace) -> int:
    """Run ``benchaudit compare``: 0 when compare.json was written, 2 on bad input."""
    try:
        pipelines = None
        if args.pipelines:
            parts = [p.strip() for p in args.pipelines.split(",")]
            if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
                raise CompareError(f"--pipelines {args.pipelines!r}: give two different pipeline names, A,B")
            pipelines = (parts[0], parts[1])
        if args.resamples < 1 or getattr(args, "permutations", 1000) < 1:
            raise CompareError("--resamples and --permutations must be at least 1")
        runs_a = _load(args.runs)
        runs_b = _load(args.against) if args.against else None
        doc = build_compare(runs_a, runs_b, pipelines, n_resamples=args.resamples, seed=args.seed,
                            permutations=getattr(args, "permutations", 1000))
        mark_similar(doc, [_parse_pair(text) for text in getattr(args, "similar", [])])
    except CompareError as err:
        print(f"benchaudit compare: {err}", file=sys.stderr)
        return 2
    except BenchauditError as err:  # a run directory that is missing, corrupt or empty
        print(f"benchaudit compare: {err}", file=sys.stderr)
        return cli_exit_code(err)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "compare.json"
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=_json_default, allow_nan=False) + "\n",
                   encoding="utf-8")
    tmp.replace(target)
    print(render_compare(doc))
    for m in doc["missing"]:
        print(f"warning: {m['model']} ({m['benchmark']}): {m['reason']}", file=sys.stderr)
    print(f"\ncompare.json: {target}")
    if args.html:
        try:
            import importlib

            html = importlib.import_module("pytest_benchaudit.report.html")
        except ImportError as err:
            print(f"benchaudit compare: --html skipped: the HTML writer (pytest_benchaudit.report.html) is not "
                  f"available ({err}); compare.json was written", file=sys.stderr)
        else:
            # The runs' own summaries give the invalid rates and any --vary deltas to plot.
            summaries = [_summary(run.path) for run in _load(args.runs + (args.against or []))]
            html.write_html(doc, args.html, sweeps=[v for s in summaries for v in s.get("variants", [])],
                            runs=[r for s in summaries for r in s.get("results", []) if not r.get("variant")])
            print(f"HTML report: {args.html}")
    return 0
