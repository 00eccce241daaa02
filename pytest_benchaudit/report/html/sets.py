"""Sections on the compared run sets: scores and ranks of each set (labelled), rank shifts with
Spearman rho, Kendall tau-b (heatmap and table) and the PCA (scree plot and biplot).

Each function takes the compare document and returns the section's HTML, or ``""`` when the
document has nothing for it.
"""

from __future__ import annotations

import math

from pytest_benchaudit.compare.compare_documents import CompareDocument, PcaResult, RankTie, SetAnalysis
from pytest_benchaudit.report.html.analysis_plots import biplot, scree_plot, tau_heatmap
from pytest_benchaudit.report.html.format import (
    esc,
    fmt_ci,
    fmt_corr,
    fmt_p,
    fmt_rank,
    fmt_score,
    fmt_share,
    is_num,
    note,
    table,
)
from pytest_benchaudit.report.html.plots import bump_pipelines, bump_tasks
from pytest_benchaudit.report.html.verdict import benchmark_of, small_sample_note

__all__ = [
    "set_views",
    "section",
    "caption",
    "share_task",
    "benchmark_groups",
    "win_rates",
    "scores_section",
    "ranks_section",
    "rank_cell",
    "TIE_LEGEND",
    "shift_section",
    "tau_section",
    "pca_section",
]

#: The rank table's legend line for ``≈`` (shown when a set has a rank tie).
TIE_LEGEND = (
    "≈ = not significantly behind the model ranked just above it on that task: their paired difference "
    "on the same questions is not significant (Holm-adjusted p ≥ 0.05, or untestable); hover over the "
    "rank for the pair and its p. Paired differences lists the pairs."
)


def section(anchor: str, heading: str, *parts: str) -> str:
    body = "".join(p for p in parts if p)
    return f'<section id="{esc(anchor)}"><h2>{esc(heading)}</h2>{body}</section>'


def set_views(doc: CompareDocument) -> list[tuple[str, str, SetAnalysis]]:
    """(side, label, analysis) per compared set; a bare document (scores/ranks at the top) is set a."""
    by_set = doc.get("by_set") or {}
    if by_set:
        sets = doc.get("sets") or {}
        return [
            (side, str((meta.get("label") if (meta := sets.get(side)) else None) or an.get("label") or side), an)
            for side, an in by_set.items()
            if isinstance(an, dict)
        ]
    if doc.get("scores") or doc.get("ranks"):
        label = str(doc.get("label_a") or "a")
        # Set a's analysis is the document's top level (pipelines, runs and models are under sets/by_set).
        view = SetAnalysis(
            label=label,
            pipelines=[],
            runs=[],
            models=[],
            tasks=doc.get("tasks") or {},
            scores=doc.get("scores") or {},
            ranks=doc.get("ranks") or {},
            tau_b=doc.get("tau_b") or [],
            mean_win_rate=doc.get("mean_win_rate") or {},
            benchmark_ranks=doc.get("benchmark_ranks") or {},
            pca=doc.get("pca") or PcaResult(),
            pca_by_benchmark=doc.get("pca_by_benchmark") or {},
            paired=doc.get("paired") or [],
            rank_ties=doc.get("rank_ties") or [],
            mde80=doc.get("mde80") or {},
        )
        return [("a", label, view)]
    return []


def caption(side: str, label: str, an: SetAnalysis) -> str:
    """A set's heading: its side, label and pipelines."""
    pipes = ", ".join(map(str, an.get("pipelines") or []))
    return f"<h3>Set {esc(side)}: {esc(label)}" + (f" (pipeline {esc(pipes)})" if pipes else "") + "</h3>"


def _tasks(matrix: dict[str, dict[str, float]]) -> list[str]:
    return [t for t, v in (matrix or {}).items() if isinstance(v, dict)]


def _models(scores: dict[str, dict[str, float]], ranks: dict[str, dict[str, float]]) -> list[str]:
    """Models ordered by mean task rank (best first), then by name."""
    models = sorted({str(m) for t in _tasks(scores) + _tasks(ranks) for m in (scores.get(t) or ranks.get(t) or {})})

    def mean_rank(m: str) -> float:
        values = [v[m] for v in ranks.values() if isinstance(v, dict) and is_num(v.get(m))]
        return sum(values) / len(values) if values else math.inf

    return sorted(models, key=lambda m: (mean_rank(m), m))


def share_task(an: SetAnalysis, task: str) -> bool:
    """A share metric (higher is better, every score in [0, 1]): printed in percent."""
    info = (an.get("tasks") or {}).get(task)
    values = [v for v in ((an.get("scores") or {}).get(task) or {}).values() if is_num(v)]
    return not (info and info.get("lower_is_better")) and all(0 <= v <= 1 for v in values)


def _short_task(task: str, bench: str) -> str:
    """A task key without its benchmark prefix, inside that benchmark's table."""
    return task[len(bench) + 1 :] if task.startswith(bench + ".") else task


def _task_head(an: SetAnalysis, task: str, share: bool, bench: str = "") -> str:
    info = (an.get("tasks") or {}).get(task)
    return _short_task(task, bench) + (" (%)" if share else "") + (" ↓" if info and info.get("lower_is_better") else "")


def benchmark_groups(an: SetAnalysis) -> list[tuple[str, list[str], list[str]]]:
    """(benchmark, its tasks, its models best first) per benchmark of one set.

    Benchmarks are scored on disjoint model sets, so each gets its own table: a model appears
    only beside the tasks it ran, and nothing is averaged across models that never met."""
    scores, ranks = an.get("scores") or {}, an.get("ranks") or {}
    tasks = list(dict.fromkeys(_tasks(scores) + _tasks(ranks)))
    groups: dict[str, list[str]] = {}
    for t in tasks:
        groups.setdefault(benchmark_of(t), []).append(t)
    out = []
    for bench, ts in groups.items():
        out.append(
            (bench, ts, _models({t: scores[t] for t in ts if t in scores}, {t: ranks[t] for t in ts if t in ranks}))
        )
    return out


def win_rates(ranks: dict[str, dict[str, float]], tasks: list[str]) -> dict[str, float]:
    """Mean win rate over ``tasks``, among the models ranked on each task only.

    On a task with n ranked models, a model of (average, direction-aware) rank r beats n - r of
    the n - 1 others, a tie counting one half: its win rate there is (n - r) / (n - 1).  A model's
    mean is over the tasks it has; a task with a single model gives no win rate."""
    per_model: dict[str, list[float]] = {}
    for t in tasks:
        row = {m: float(r) for m, r in (ranks.get(t) or {}).items() if is_num(r)}
        n = len(row)
        if n < 2:
            continue
        for m, r in row.items():
            per_model.setdefault(str(m), []).append((n - r) / (n - 1))
    return {m: sum(v) / len(v) for m, v in per_model.items()}


def scores_section(doc: CompareDocument) -> str:
    parts = []
    for side, label, an in set_views(doc):
        scores = an.get("scores") or {}
        if not _tasks(scores):
            continue
        parts.append(caption(side, label, an))
        for bench, tasks, models in benchmark_groups(an):
            tasks = [t for t in tasks if t in scores]
            if not tasks:
                continue
            share = {t: share_task(an, t) for t in tasks}
            wr = win_rates(an.get("ranks") or {}, tasks)
            rows = [
                [m, *[fmt_score(scores[t].get(m), share[t]) for t in tasks]] + ([fmt_share(wr.get(m))] if wr else [])
                for m in models
            ]
            heads = ["model", *[_task_head(an, t, share[t], bench) for t in tasks]] + (["mean win rate"] if wr else [])
            parts.append(f"<h4>{esc(bench)}: {len(models)} models x {len(tasks)} tasks</h4>" + table(heads, rows))
    if not parts:
        return ""
    return section(
        "scores",
        "Scores per task",
        note(
            "Each run's headline score under its task's denominator, one "
            "table per benchmark (each benchmark's models apart). (%) = a share metric in percent, ↓ = lower "
            "is better (e.g. a MAD, in its own unit). Models best first by mean rank. Mean win rate: on each "
            "task, the share of the other models on that task that this model beats (a tie = ½), averaged "
            "over the benchmark's tasks it has."
        ),
        *parts,
    )


def rank_cell(rank: float | None, tie: RankTie | None) -> str:
    """A rank as HTML: the rank, and for a rank tie (a compare.json ``rank_ties`` row whose ``worse`` is this
    model) ``≈`` with a tooltip naming the pair and its Holm-adjusted p."""
    text = esc(fmt_rank(rank))
    if tie is None:
        return text
    p = tie.get("p_holm")
    why = f"p Holm = {fmt_p(p)}" if is_num(p) else "untestable: fewer than two common questions"
    tip = f"not significantly behind {tie.get('better')} ({why}, {tie.get('n', '—')} common questions)"
    return f'<span class="tie" title="{esc(tip)}">{text} ≈</span>'


def ranks_section(doc: CompareDocument) -> str:
    parts = []
    for side, label, an in set_views(doc):
        ranks = an.get("ranks") or {}
        if not _tasks(ranks):
            continue
        bench_ranks = an.get("benchmark_ranks") or {}
        # (task, model) -> the rank tie with the model ranked just above it (compare.json rank_ties).
        ties = {(str(t.get("task")), str(t.get("worse"))): t for t in an.get("rank_ties") or [] if isinstance(t, dict)}
        parts.append(caption(side, label, an))
        for bench, tasks, models in benchmark_groups(an):
            tasks = [t for t in tasks if t in ranks]
            if not tasks:
                continue
            overall = bench_ranks.get(bench) or {}
            rows = []
            for m in models:
                row = [m, *[rank_cell(ranks[t].get(m), ties.get((t, m))) for t in tasks]]
                if overall:
                    e = overall.get(m)
                    row.append(f"{fmt_rank(e['rank'])} (mean {e['mean_task_rank']:.2f})" if e else "—")
                rows.append(row)
            heads = ["model", *[_short_task(t, bench) for t in tasks]] + (["benchmark rank"] if overall else [])
            parts.append(f"<h4>{esc(bench)}</h4>" + table(heads, rows, raw_cols=set(range(1, len(tasks) + 1))))
        if ties:
            parts.append(note(TIE_LEGEND))
    if not parts:
        return ""
    return section(
        "ranks",
        "Ranks per task",
        note(
            "1 = best, direction-aware; tied models share the average rank "
            "(e.g. 2.5). Benchmark rank: models ordered by their mean task rank (in brackets), among the "
            "models that have every task of the benchmark."
        ),
        *parts,
    )


def shift_section(doc: CompareDocument) -> str:
    shifts = [r for r in doc.get("rank_shift") or [] if isinstance(r, dict)]
    spearman = [r for r in doc.get("spearman") or [] if isinstance(r, dict)]
    label_a = str(doc.get("label_a") or "a")
    label_b = str(doc.get("label_b") or "b")
    if not shifts and not spearman:
        ranks = doc.get("ranks") or {}
        plot = bump_tasks(ranks) if ranks else ""
        return section("bump", "Ranks across tasks", plot) if plot else ""
    rows = []
    for r in sorted(shifts, key=lambda r: (str(r.get("benchmark")), -abs(r.get("shift") or 0), str(r.get("model")))):
        shift = r.get("shift")
        if is_num(shift) and shift:
            up = is_num(r.get("rank_a")) and is_num(r.get("rank_b")) and r["rank_b"] < r["rank_a"]
            arrow = f'<span class="{"up" if up else "down"}">{"▲" if up else "▼"} {esc(fmt_rank(abs(shift)))}</span>'
        else:
            arrow = "0"
        stab = r.get("direction_stability")
        rows.append(
            [
                r.get("benchmark"),
                r.get("model"),
                fmt_rank(r.get("rank_a")),
                fmt_rank(r.get("rank_b")),
                arrow,
                fmt_share(stab, 0) if is_num(stab) else "—",
            ]
        )
    sp_rows = [
        [
            r.get("benchmark"),
            fmt_corr(r.get("rho")),
            fmt_ci(r.get("ci95")),
            fmt_p(r.get("p_value")),
            r.get("n_models", "—"),
            len(r.get("tasks") or []),
        ]
        for r in spearman
    ]
    warns = [
        f"{r.get('benchmark')}: " + small_sample_note(r.get("n_models"), "Spearman ρ")
        for r in spearman
        if small_sample_note(r.get("n_models"), "Spearman ρ")
    ]
    return section(
        "shift",
        f"Rank shifts between {label_a} and {label_b}",
        bump_pipelines(shifts, label_a, label_b),
        table(
            ["benchmark", "model", f"rank ({label_a})", f"rank ({label_b})", "shift", "direction stability"],
            rows,
            raw_cols={4},
        )
        if rows
        else "",
        note(
            "▲ = the model ranks higher under the second set. Direction stability (for shifts of "
            f"{doc.get('min_shift_for_stability', 3)} or more): share of bootstrap resamples keeping the sign."
        ),
        "<h3>Spearman ρ between the two rankings</h3>"
        + table(["benchmark", "Spearman ρ", "95% CI (paired bootstrap)", "p", "models", "tasks"], sp_rows)
        + note(
            "ρ: Spearman correlation of each benchmark's ranking (by mean task rank) under the two sets; 1 = the "
            "same order. CI: 2.5th and 97.5th percentiles of ρ over bootstrap resamples of the questions, paired "
            "across sets; p: scipy's test of ρ = 0."
        )
        + "".join(f'<p class="warn">{esc(w)}</p>' for w in warns)
        if sp_rows
        else "",
    )


def tau_section(doc: CompareDocument) -> str:
    parts = []
    for side, label, an in set_views(doc):
        rows = [r for r in an.get("tau_b") or [] if isinstance(r, dict)]
        if not rows:
            continue
        body = [
            [
                r.get("task_a"),
                r.get("task_b"),
                fmt_corr(r.get("tau")),
                fmt_p(r.get("p_value")),
                r.get("inversions", "—"),
                r.get("n_models", "—"),
                "yes" if r.get("similar") else "",
            ]
            for r in rows
        ]
        few = sorted({int(r["n_models"]) for r in rows if is_num(r.get("n_models"))})
        warn = small_sample_note(few[0], f"τ-b of the pairs with {few[0]} common models") if few else ""
        parts.append(
            caption(side, label, an)
            + tau_heatmap(rows, f"Kendall τ-b, set {side} ({label})")
            + table(["task a", "task b", "τ-b", "p", "inversions", "models", "declared similar"], body)
            + (f'<p class="warn">{esc(warn)}</p>' if warn else "")
        )
    if not parts:
        return ""
    return section(
        "tau",
        "Kendall τ-b between tasks",
        note(
            "Agreement of two tasks' model rankings on their common "
            "models (1 = same order, −1 = reversed); inversions = model pairs ordered oppositely; p: scipy's "
            "test of τ = 0; models: the models both tasks have."
        ),
        *parts,
    )


def _pca_block(title: str, pca: PcaResult | None) -> str:
    if not isinstance(pca, dict) or "variance_explained" not in pca:
        reason = (pca or {}).get("skipped") if isinstance(pca, dict) else None
        return f"<h3>{esc(title)}</h3>" + note(f"PCA skipped: {reason}") if reason else ""
    pa = pca.get("parallel_analysis")
    thr = (pa.get("threshold") if pa else None) or []
    retained = pa.get("n_components", 0) if pa else 0
    rows = [
        [
            k + 1,
            f"{ev:.2f}",
            fmt_share(share),
            fmt_share(cum),
            f"{thr[k]:.2f}" if k < len(thr) else "—",
            "yes" if k < retained else "no",
        ]
        for k, (ev, share, cum) in enumerate(zip(pca["eigenvalues"], pca["variance_explained"], pca["cumulative"]))
    ]
    left = pca.get("models_left_out") or []
    n_models, n_tasks = len(pca.get("models") or []), len(pca.get("columns") or [])
    warn = small_sample_note(n_models, f"this PCA ({n_models} models x {n_tasks} tasks)")
    return (
        f"<h3>{esc(title)}</h3>"
        + (f'<p class="warn">{esc(warn)}</p>' if warn else "")
        + note(
            f"{len(pca.get('models') or [])} models x {len(pca.get('columns') or [])} "
            f"tasks, standardized; parallel analysis retains {pa.get('n_components', '—') if pa else '—'} component(s) "
            f"({pa.get('n_permutations', '—') if pa else '—'} permuted matrices)."
            + (f" Left out (a task missing): {', '.join(map(str, left))}." if left else "")
        )
        + scree_plot(pca, title)
        + biplot(pca, title)
        + table(["component", "eigenvalue", "variance", "cumulative", "parallel-analysis threshold", "retained"], rows)
        + note(
            "Eigenvalue: variance carried by the component (the tasks' correlation matrix; the values sum to "
            "the number of tasks). Variance: its share. Threshold: the 95th percentile of that eigenvalue over "
            "matrices with each column permuted (Horn's parallel analysis); retained while above it."
        )
    )


def pca_section(doc: CompareDocument) -> str:
    pca = doc.get("pca")
    by_bench = doc.get("pca_by_benchmark") or {}
    blocks = []
    if isinstance(pca, dict) and ("variance_explained" in pca or not by_bench):
        blocks.append(_pca_block("all tasks", pca))
    for bench, p in sorted(by_bench.items()):
        blocks.append(_pca_block(bench, p))
    blocks = [b for b in blocks if b]
    if not blocks:
        return ""
    return section(
        "pca",
        "Principal components of the score matrix",
        note(
            "Models x tasks, scores oriented higher = better, columns standardized (set a). One dominant "
            "component means the tasks rank models alike."
        ),
        *blocks,
    )
