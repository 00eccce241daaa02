"""Plots of the run and pipeline sections: rank bump charts, per-field score deltas, invalid rates.

matplotlib on an Agg canvas (no pyplot state), PNGs embedded as base64 ``data:`` URIs; labels drawn
with mathtext off (a ``$`` in a model name is text, not a formula).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from pytest_benchaudit.compare.compare_documents import RankShiftRow
from pytest_benchaudit.report.html.format import esc, is_num, short
from pytest_benchaudit.report.html.sweeps import SweepRow

__all__ = ["figure", "img", "rc", "colors", "bump_pipelines", "bump_tasks", "sweep_plot", "sweep_plots", "invalid_plot"]


def figure(width: float, height: float) -> Any:
    """A matplotlib Figure on an Agg canvas (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def img(fig: Any, alt: str, caption: str) -> str:
    """The figure as an embedded PNG with its alt text and caption (both escaped)."""
    data = _png(fig)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def rc() -> AbstractContextManager[Any]:
    import matplotlib

    # Untrusted labels: never parse "$...$" as mathtext, never hand text to TeX.
    return matplotlib.rc_context({"text.parse_math": False, "text.usetex": False, "font.size": 9, "axes.titlesize": 10})


def colors(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def bump_pipelines(shifts: Sequence[RankShiftRow], label_a: str, label_b: str) -> str:
    by_bench: dict[str, list[RankShiftRow]] = {}
    for row in shifts:
        if is_num(row.get("rank_a")) and is_num(row.get("rank_b")):
            by_bench.setdefault(str(row.get("benchmark", "")), []).append(row)
    if not by_bench:
        return ""
    models = sorted({str(r.get("model")) for rows in by_bench.values() for r in rows})
    color = dict(zip(models, colors(len(models))))
    n = len(by_bench)
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    max_rank = max(max(r["rank_a"], r["rank_b"]) for rows in by_bench.values() for r in rows)
    with rc():
        fig = figure(6.8 * cols, max(2.6, 0.42 * max_rank + 1.3) * nrows)
        for k, (bench, rows) in enumerate(sorted(by_bench.items())):
            ax = fig.add_subplot(nrows, cols, k + 1)
            right = ax.twinx()
            for r in rows:
                m = str(r.get("model"))
                ax.plot([0, 1], [r["rank_a"], r["rank_b"]], "-o", color=color[m], lw=2.2, ms=7)
            for axis, under_a in ((ax, True), (right, False)):
                names: dict[float, list[str]] = {}
                for r in rows:
                    names.setdefault(r["rank_a"] if under_a else r["rank_b"], []).append(short(r.get("model")))
                ticks = sorted(names)
                axis.set_yticks(
                    ticks,
                    [
                        f"{t:g}. {', '.join(names[t])}" if axis is ax else f"{', '.join(names[t])} ({t:g})"
                        for t in ticks
                    ],
                    fontsize=8,
                )
                axis.set_ylim(max_rank + 0.5, 0.5)
                axis.tick_params(axis="y", length=0)
                for side in ("top", "left", "right"):
                    axis.spines[side].set_visible(False)
            ax.set_xlim(-0.12, 1.12)
            ax.set_xticks([0, 1], [short(label_a), short(label_b)])
            ax.set_title(short(bench))
        fig.suptitle(f"Rank shift: {short(label_a)} → {short(label_b)}")
        return img(
            fig,
            "rank shift bump chart",
            f"Each model's rank under pipeline {label_a} (left) and {label_b} (right), per benchmark.",
        )


def bump_tasks(ranks: dict[str, dict[str, float]]) -> str:
    tasks = [
        t for t, by_model in ranks.items() if isinstance(by_model, dict) and any(is_num(v) for v in by_model.values())
    ]
    if not tasks:
        return ""
    models = sorted({str(m) for t in tasks for m, v in ranks[t].items() if is_num(v)})
    color = dict(zip(models, colors(len(models))))
    max_rank = max(v for t in tasks for v in ranks[t].values() if is_num(v))
    with rc():
        fig = figure(max(6.0, 1.3 * len(tasks) + 3.5), max(3.0, 0.4 * max_rank + 1.5))
        ax = fig.add_subplot(1, 1, 1)
        for m in models:
            xs = [i for i, t in enumerate(tasks) if is_num(ranks[t].get(m))]
            ys = [ranks[tasks[i]][m] for i in xs]
            ax.plot(xs, ys, "-o", color=color[m], lw=2, ms=6, label=short(m))
        ax.set_xticks(range(len(tasks)), [short(t) for t in tasks], rotation=20, ha="right")
        ax.set_xlim(-0.3, len(tasks) - 0.7)
        fig.legend(loc="outside right upper", fontsize=8, title="model")
        ax.set_ylim(max_rank + 0.5, 0.5)
        ax.set_yticks(range(1, int(math.ceil(max_rank)) + 1))
        ax.set_ylabel("rank (1 = best)")
        ax.set_title("Model ranks across tasks")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        return img(fig, "rank bump chart across tasks", "Each model's rank on each task (1 = best).")


def _sweep_value(row: SweepRow) -> tuple[float | None, str]:
    pp, delta = row.get("delta_pp"), row.get("delta")
    if pp is not None and is_num(pp):
        return float(pp), "pp"
    if delta is not None and is_num(delta):
        return float(delta), str(row.get("unit") or row.get("metric") or "metric unit")
    return None, ""


def _field_of(row: SweepRow) -> str:
    if row.get("field"):
        return str(row["field"])
    variant = str(row.get("variant") or "")
    return variant.split("=", 1)[0] if "=" in variant else (variant or "variant")


_STAGE_COLORS = {"inference": "#d62728", "extraction": "#ff7f0e", "scoring": "#1f77b4", "none": "#9e9e9e"}


def sweep_plots(sweeps: Sequence[SweepRow]) -> list[str]:
    """One bar chart per unit: percentage points apart from each error metric's own unit (a MAD's points are
    not percentage points, so they never share an axis); percentage points first."""
    by_unit: dict[str, list[SweepRow]] = {}
    for row in sweeps:
        value, unit = _sweep_value(row)
        if value is not None:
            by_unit.setdefault(unit, []).append(row)
    return [sweep_plot(by_unit[u], u) for u in sorted(by_unit, key=lambda u: (u != "pp", u))]


def sweep_plot(sweeps: Sequence[SweepRow], unit: str = "pp") -> str:
    """The rows in ``unit`` (see :func:`sweep_plots`), one panel per field."""
    by_field: dict[str, list[tuple[str, float, str]]] = {}
    for row in sweeps:
        value, row_unit = _sweep_value(row)
        if value is None or row_unit != unit:
            continue
        task = ".".join(str(p) for p in (row.get("benchmark"), row.get("task")) if p)
        # The panel names the field: a bar needs only the value it was set to.
        setting = row.get("value") if row.get("value") is not None else row.get("variant")
        label = f"{task} · {row.get('model')} · ={setting}"
        by_field.setdefault(_field_of(row), []).append((label, value, str(row.get("moved_by"))))
    if not by_field:
        return ""
    fields = sorted(by_field)
    heights = [max(1.2, 0.32 * len(by_field[f]) + 0.9) for f in fields]
    axis = "percentage points" if unit == "pp" else short(unit)
    from matplotlib.patches import Patch

    with rc():
        fig = figure(9.0, sum(heights) + 0.6)
        grid = fig.add_gridspec(len(fields), 1, height_ratios=heights)
        for k, f in enumerate(fields):
            ax = fig.add_subplot(grid[k, 0])
            rows = by_field[f]
            ys = list(range(len(rows)))
            ax.barh(ys, [r[1] for r in rows], color=[_STAGE_COLORS.get(r[2], "#8c564b") for r in rows])
            ax.set_yticks(ys, [short(r[0]) for r in rows])
            ax.invert_yaxis()
            ax.axvline(0, color="#333", lw=0.8)
            ax.set_xlabel(f"Δ score, {axis}")
            ax.set_title(f"field: {short(f)}")
            for y, r in zip(ys, rows):
                ax.annotate(
                    f"{r[1]:+.1f}" if unit == "pp" else f"{r[1]:+.3g}",
                    (r[1], y),
                    xytext=(3 if r[1] >= 0 else -3, 0),
                    textcoords="offset points",
                    ha="left" if r[1] >= 0 else "right",
                    va="center",
                    fontsize=8,
                )
            lo, hi = ax.get_xlim()
            pad = 0.15 * (hi - lo)
            ax.set_xlim(lo - pad, hi + pad)
        stages = sorted({r[2] for rows in by_field.values() for r in rows})
        fig.legend(
            handles=[Patch(color=_STAGE_COLORS.get(s, "#8c564b"), label=f"moved by {short(s)}") for s in stages],
            loc="outside lower center",
            ncols=max(1, len(stages)),
            fontsize=8,
        )
        fig.suptitle(f"Per-field score deltas (variant − base), in {axis}")
        return img(
            fig,
            f"per-field score deltas ({axis})",
            f"Change of the headline score under each single-field "
            f"variant, in {axis}, coloured by the stage that moved it.",
        )


def invalid_plot(runs: Sequence[Mapping[str, Any]]) -> str:
    cells: dict[tuple[str, str], float] = {}
    for row in runs:
        if not is_num(row.get("invalid_rate")):
            continue
        task = ".".join(str(p) for p in (row.get("benchmark"), row.get("task")) if p)
        if row.get("variant"):
            task += f" | {row['variant']}"
        cells[(str(row.get("model")), task)] = float(row["invalid_rate"])
    if not cells:
        return ""
    models = sorted({m for m, _ in cells})
    tasks = sorted({t for _, t in cells})
    import numpy as np

    grid = np.full((len(models), len(tasks)), np.nan)
    for (m, t), v in cells.items():
        grid[models.index(m), tasks.index(t)] = v
    with rc():
        fig = figure(max(5.5, 1.2 * len(tasks) + 3.0), max(2.5, 0.45 * len(models) + 1.6))
        ax = fig.add_subplot(1, 1, 1)
        im = ax.imshow(
            np.ma.masked_invalid(grid), cmap="Reds", vmin=0, vmax=max(0.05, float(np.nanmax(grid))), aspect="auto"
        )
        ax.set_xticks(range(len(tasks)), [short(t) for t in tasks], rotation=25, ha="right")
        ax.set_yticks(range(len(models)), [short(m) for m in models])
        hi = float(np.nanmax(grid)) or 1.0
        for i in range(len(models)):
            for j in range(len(tasks)):
                if not math.isnan(grid[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{100 * grid[i, j]:.1f}%",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if grid[i, j] > 0.6 * hi else "black",
                    )
        fig.colorbar(im, ax=ax, label="invalid rate")
        ax.set_title("Invalid rate per model and task")
        return img(fig, "invalid rates per model and task", "Share of items without a scorable answer.")
