"""Plots of the analysis sections: the tau-b heatmap, the PCA scree plot (with Horn's parallel-analysis
threshold) and biplot; each returns ``""`` when its data is missing.  (The task-similarity scatter is
:func:`.kit.scatter_plot`, which the registered analyses draw with.)"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.summary_documents import TauRow
from pytest_benchaudit.compare.compare_documents import PcaResult
from pytest_benchaudit.report.html.format import is_num, short
from pytest_benchaudit.report.html.plots import colors, figure, img, rc

__all__ = ["LabelStyle", "tau_heatmap", "scree_plot", "biplot", "biplot_figure", "place_labels", "text_box"]


class LabelStyle(TypedDict, total=False):
    """The text properties :func:`place_labels` hands matplotlib's ``annotate`` for one label."""

    fontsize: float
    fontweight: str
    color: str


def tau_heatmap(rows: Sequence[TauRow], title: str = "Kendall τ-b between tasks") -> str:
    """Tasks x tasks, coloured by tau-b (diverging, -1..1); pairs without a tau left blank."""
    import numpy as np

    pairs = [(r["task_a"], r["task_b"], float(tau)) for r in rows if (tau := r.get("tau")) is not None and is_num(tau)]
    if not pairs:
        return ""
    tasks = sorted({a for a, _b, _tau in pairs} | {b for _a, b, _tau in pairs})
    idx = {t: i for i, t in enumerate(tasks)}
    grid = np.full((len(tasks), len(tasks)), np.nan)
    for task_a, task_b, tau_b in pairs:
        i, j = idx[task_a], idx[task_b]
        grid[i, j] = grid[j, i] = tau_b
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
                        ax.text(
                            j,
                            i,
                            f"{grid[i, j]:.2f}",
                            ha="center",
                            va="center",
                            fontsize=7,
                            color="white" if abs(grid[i, j]) > 0.6 else "black",
                        )
        fig.colorbar(im, ax=ax, label="τ-b", shrink=0.8)
        ax.set_title(title)
        return img(
            fig,
            "tau-b heatmap",
            "Kendall τ-b of every pair of tasks on their common models (blank: fewer than 3 common models).",
        )


def scree_plot(pca: PcaResult, title: str) -> str:
    """Eigenvalues per component against the parallel-analysis 95th-percentile threshold."""
    ev = pca.get("eigenvalues") or []
    pa = pca.get("parallel_analysis")
    thr = (pa.get("threshold") if pa else None) or []
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
        return img(
            fig,
            f"PCA scree plot {title}",
            "Eigenvalues of the task correlation matrix, with the share of "
            "variance; a component is retained while its eigenvalue is above the dashed parallel-analysis line.",
        )


#: Offsets (pixels) tried for a label, nearest first: 16 directions at growing distances.
_RINGS = (7, 13, 21, 32, 46, 64, 86, 112, 140)
_DIRECTIONS = tuple(
    (round(math.cos(k * math.pi / 8), 3), round(math.sin(k * math.pi / 8), 3))
    for k in (2, 0, 4, 6, 14, 10, 8, 12, 1, 3, 5, 7, 9, 11, 13, 15)
)


def _overlap(a: Any, b: Any) -> float:
    """Area shared by two display-space boxes (0 when apart)."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0.0) * max(h, 0.0)


def place_labels(
    fig: Any, ax: Any, items: list[tuple[float, float, str, LabelStyle]], obstacles: list[tuple[float, float]]
) -> list[Any]:
    """Annotate each (x, y, text, style) at the nearest offset where its box overlaps no label placed before
    it, no point of ``obstacles`` and stays inside the axes; where none is free, the least-overlapping one.

    Greedy and deterministic (items in the given order); the figure's layout is frozen first, so the
    boxes measured are the boxes drawn.  Returns the annotations."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    dots = [ax.transData.transform((x, y)) for x, y in obstacles]
    taken = [Bbox.from_extents(px - 4, py - 4, px + 4, py + 4) for px, py in dots]
    placed = []
    for x, y, text, style in items:
        ann = ax.annotate(text, (x, y), xytext=(0, 0), textcoords="offset pixels", ha="center", va="center", **style)
        best: tuple[float, tuple[float, float]] | None = None
        for r in _RINGS:
            for dx, dy in _DIRECTIONS:
                off = (dx * r, dy * r)
                ann.set_position(off)
                box = text_box(ann, renderer)
                outside = (
                    max(frame.x0 - box.x0, 0)
                    + max(box.x1 - frame.x1, 0)
                    + max(frame.y0 - box.y0, 0)
                    + max(box.y1 - frame.y1, 0)
                )
                cost = sum(_overlap(box, t) for t in taken) + 1000.0 * outside
                if best is None or cost < best[0]:
                    best = (cost, off)
                if cost == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None
        ann.remove()
        far = (best[1][0] ** 2 + best[1][1] ** 2) ** 0.5 > _RINGS[1] + 1
        # A label pushed away from its point keeps a thin leader line back to it.
        ann = ax.annotate(
            text,
            (x, y),
            xytext=best[1],
            textcoords="offset pixels",
            ha="center",
            va="center",
            **(
                {"arrowprops": {"arrowstyle": "-", "color": "#999", "lw": 0.6, "shrinkA": 0, "shrinkB": 3}}
                if far
                else {}
            ),
            **style,
        )
        taken.append(text_box(ann, renderer))
        placed.append(ann)
    return placed


def text_box(ann: Any, renderer: Any) -> Any:
    """An annotation's text box in display space, without its leader line (which may cross others)."""
    from matplotlib.text import Text

    ann.update_positions(renderer)  # what Annotation.get_window_extent does before adding the arrow's box
    return Text.get_window_extent(ann, renderer)


def biplot_figure(pca: PcaResult, title: str) -> Any:
    """The biplot's Figure (see :func:`biplot`), or None when the PCA has fewer than two components.

    Models are numbered points (the legend names them), tasks are loading arrows; every label is
    placed by :func:`place_labels`, so none overlaps another label or a point."""
    coords = pca.get("model_coordinates") or {}
    loadings = pca.get("loadings") or {}
    share = pca.get("variance_explained") or []
    if not coords or len(share) < 2:
        return None
    from matplotlib.lines import Line2D

    models = sorted(coords)
    xs = [coords[m][0] for m in models]
    ys = [coords[m][1] for m in models]
    reach = max(max(abs(v) for v in xs + ys), 1e-9)
    palette = colors(len(models))
    fig = figure(7.6, 5.2)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(xs, ys, color=palette, s=30, zorder=3)
    tips = []
    benches = {str(t).partition(".")[0] for t in loadings}
    for task, row in loadings.items():
        if len(benches) == 1 and "." in str(task):  # one benchmark's PCA: its name is in the title
            task = str(task).partition(".")[2]
        lx, ly = row[0] * reach, row[1] * reach  # loadings are correlations: scaled to the point cloud
        ax.annotate("", (lx, ly), (0, 0), arrowprops={"arrowstyle": "->", "color": "#d62728", "lw": 1.2})
        tips.append((lx, ly, short(task)))
    # Arrows do not widen the axes: fit points and arrow tips, with room for their labels.
    all_x, all_y = xs + [t[0] for t in tips], ys + [t[1] for t in tips]
    pad_x = 0.15 * (max(all_x) - min(all_x) or 1)
    pad_y = 0.15 * (max(all_y) - min(all_y) or 1)
    ax.set_xlim(min(all_x) - pad_x, max(all_x) + pad_x)
    ax.set_ylim(min(all_y) - pad_y, max(all_y) + pad_y)
    ax.axhline(0, color="#bbb", lw=0.6)
    ax.axvline(0, color="#bbb", lw=0.6)
    ax.set_xlabel(f"PC1 ({100 * share[0]:.0f}%)")
    ax.set_ylabel(f"PC2 ({100 * share[1]:.0f}%)")
    ax.set_title(short(title))
    handles = [
        Line2D([], [], marker="o", ls="", color=c, label=f"{k}  {short(m)}")
        for k, (m, c) in enumerate(zip(models, palette), 1)
    ]
    fig.legend(
        handles=handles,
        loc="outside right upper",
        fontsize=7,
        title="models",
        title_fontsize=8,
        handletextpad=0.3,
        ncols=1 if len(models) <= 24 else 2,
    )
    items = [(x, y, str(k), LabelStyle(fontsize=8, fontweight="bold")) for k, (x, y) in enumerate(zip(xs, ys), 1)]
    items += [(lx, ly, text, LabelStyle(fontsize=7, color="#d62728")) for lx, ly, text in tips]
    place_labels(fig, ax, items, list(zip(xs, ys)))
    return fig


def biplot(pca: PcaResult, title: str) -> str:
    """Models (numbered points, named in the legend) and tasks (loading arrows) on the first two components."""
    with rc():
        fig = biplot_figure(pca, title)
        if fig is None:
            return ""
        return img(
            fig,
            f"PCA biplot {title}",
            "Models on the first two components (numbered points, named in the "
            "legend) and each task's loadings (red arrows: its correlation with PC1 and PC2, scaled to the "
            "points). Models close together rank alike across the tasks.",
        )
