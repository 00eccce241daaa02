"""Plots of the analysis sections: the tau-b heatmap, the PCA scree plot (with Horn's parallel-analysis
threshold) and biplot, and the task-similarity scatter.  Each returns ``""`` when its data is missing."""

from __future__ import annotations

import math
from typing import Any

from pytest_benchaudit.report.html.format import is_num, short
from pytest_benchaudit.report.html.plots import colors, figure, img, rc

__all__ = ["tau_heatmap", "scree_plot", "biplot", "similarity_scatter"]


def tau_heatmap(rows: list[dict[str, Any]], title: str = "Kendall τ-b between tasks") -> str:
    """Tasks x tasks, coloured by tau-b (diverging, -1..1); pairs without a tau left blank."""
    import numpy as np

    rows = [r for r in rows if is_num(r.get("tau"))]
    if not rows:
        return ""
    tasks = sorted({r["task_a"] for r in rows} | {r["task_b"] for r in rows})
    idx = {t: i for i, t in enumerate(tasks)}
    grid = np.full((len(tasks), len(tasks)), np.nan)
    for r in rows:
        i, j = idx[r["task_a"]], idx[r["task_b"]]
        grid[i, j] = grid[j, i] = float(r["tau"])
    np.fill_diagonal(grid, 1.0)
    n = len(tasks)
    with rc():
        fig = figure(max(4.5, 0.62 * n + 2.6), max(3.6, 0.55 * n + 1.6))
        ax = fig.add_subplot(1, 1, 1)
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="RdBu", vmin=-1, vmax=1)
        ax.set_xticks(range(n), [short(t) for t in tasks], rotation=40, ha="right", fontsize=8)
        ax.set_yticks(range(n), [short(t) for t in tasks], fontsize=8)
        if n <= 16:
            for i in range(n):
                for j in range(n):
                    if i != j and not math.isnan(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                                color="white" if abs(grid[i, j]) > 0.6 else "black")
        fig.colorbar(im, ax=ax, label="τ-b", shrink=0.8)
        ax.set_title(title)
        return img(fig, "tau-b heatmap", "Kendall τ-b of every pair of tasks on their common models "
                   "(blank: fewer than 3 common models).")


def scree_plot(pca: dict[str, Any], title: str) -> str:
    """Eigenvalues per component against the parallel-analysis 95th-percentile threshold."""
    ev = pca.get("eigenvalues") or []
    thr = (pca.get("parallel_analysis") or {}).get("threshold") or []
    if not ev:
        return ""
    ks = list(range(1, len(ev) + 1))
    with rc():
        fig = figure(5.2, 3.4)
        ax = fig.add_subplot(1, 1, 1)
        ax.plot(ks, ev, "-o", color="#1f77b4", lw=2, label="observed eigenvalue")
        if len(thr) == len(ev):
            ax.plot(ks, thr, "--s", color="#d62728", lw=1.5, ms=4, label="parallel analysis (95th pct. of nulls)")
        ax.axhline(1.0, color="#999", lw=0.8, ls=":")
        for k, v, share in zip(ks, ev, pca.get("variance_explained") or []):
            ax.annotate(f"{100 * share:.0f}%", (k, v), xytext=(4, 4), textcoords="offset points", fontsize=8)
        ax.set_xticks(ks)
        ax.set_xlabel("component")
        ax.set_ylabel("eigenvalue")
        ax.set_title(short(title))
        ax.legend(fontsize=8)
        return img(fig, f"PCA scree plot {title}", "Eigenvalues of the task correlation matrix, with the share of "
                   "variance; a component is retained while its eigenvalue is above the dashed parallel-analysis line.")


def biplot(pca: dict[str, Any], title: str) -> str:
    """Models (points) and tasks (loading arrows) on the first two components."""
    coords = pca.get("model_coordinates") or {}
    loadings = pca.get("loadings") or {}
    share = pca.get("variance_explained") or []
    if not coords or len(share) < 2:
        return ""
    models = sorted(coords)
    xs = [coords[m][0] for m in models]
    ys = [coords[m][1] for m in models]
    reach = max(max(abs(v) for v in xs + ys), 1e-9)
    with rc():
        fig = figure(6.4, 5.0)
        ax = fig.add_subplot(1, 1, 1)
        for m, x, y, c in zip(models, xs, ys, colors(len(models))):
            ax.scatter([x], [y], color=c, s=36, zorder=3)
            ax.annotate(short(m), (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7)
        tips_x, tips_y = list(xs), list(ys)
        for task, row in loadings.items():
            lx, ly = row[0] * reach, row[1] * reach  # loadings are correlations: scaled to the point cloud
            ax.annotate("", (lx, ly), (0, 0), arrowprops={"arrowstyle": "->", "color": "#d62728", "lw": 1.2})
            ax.text(lx * 1.08, ly * 1.08, short(task), color="#d62728", fontsize=7, ha="center", va="center")
            tips_x.append(lx * 1.15)
            tips_y.append(ly * 1.15)
        # Arrows do not widen the axes: fit points, arrow tips and their labels.
        pad_x = 0.08 * (max(tips_x) - min(tips_x) or 1)
        pad_y = 0.08 * (max(tips_y) - min(tips_y) or 1)
        ax.set_xlim(min(tips_x) - pad_x, max(tips_x) + pad_x)
        ax.set_ylim(min(tips_y) - pad_y, max(tips_y) + pad_y)
        ax.axhline(0, color="#bbb", lw=0.6)
        ax.axvline(0, color="#bbb", lw=0.6)
        ax.set_xlabel(f"PC1 ({100 * share[0]:.0f}%)")
        ax.set_ylabel(f"PC2 ({100 * share[1]:.0f}%)")
        ax.set_title(short(title))
        return img(fig, f"PCA biplot {title}", "Models on the first two components (points) and each task's "
                   "loadings (arrows, scaled to the points).")


def similarity_scatter(sim: dict[str, Any]) -> str:
    """Cosine similarity of each task pair against its tau-b, with the least-squares line."""
    pairs = [p for p in sim.get("pairs") or [] if is_num(p.get("similarity")) and is_num(p.get("tau_b"))]
    if not pairs:
        return ""
    xs = [float(p["similarity"]) for p in pairs]
    ys = [float(p["tau_b"]) for p in pairs]
    with rc():
        fig = figure(5.6, 4.0)
        ax = fig.add_subplot(1, 1, 1)
        ax.scatter(xs, ys, s=26, color="#1f77b4", alpha=0.8)
        if len(pairs) >= 3 and max(xs) > min(xs):
            import numpy as np

            slope, icept = np.polyfit(xs, ys, 1)
            line = np.linspace(min(xs), max(xs), 10)
            ax.plot(line, slope * line + icept, color="#d62728", lw=1.2)
        r = sim.get("pearson_r")
        ax.set_xlabel("cosine similarity of the task texts")
        ax.set_ylabel("Kendall τ-b of the tasks' rankings")
        ax.set_title(f"Similarity vs ranking agreement ({len(pairs)} pairs" + (f", r = {r:.2f})" if is_num(r) else ")"))
        return img(fig, "similarity scatter", "Each point is a pair of tasks with at least 3 common models.")
