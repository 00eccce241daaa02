"""A self-contained HTML report of a ``benchaudit compare`` document.

:func:`write_html` writes one file a reviewer opens offline: inline CSS, no script, no
external reference; plots are matplotlib PNGs (Agg canvas, no pyplot state) embedded as
base64 ``data:`` URIs.  Model names, task keys, variants and every other string come from
model outputs and user configuration, so they are untrusted: each one is passed through
:func:`html.escape` before it reaches the page, and matplotlib draws them with mathtext
off (a ``$`` in a model name is text, not a formula).  A Content-Security-Policy meta tag
forbids scripts and any load other than inline styles and ``data:`` images, as a second
line of defence.

Sections (each present only when its data is):

* scores and ranks per task (models x task keys);
* Kendall tau-b between tasks (``tau_b``), Spearman rho with its CI (``spearman``) and
  rank shifts between two pipelines (``rank_shift``);
* a bump chart: each model's rank under pipeline A and B per benchmark when
  ``rank_shift`` is there, else its rank across the tasks;
* per-field score deltas of single-field counterfactuals (``sweeps``: rows of
  :func:`pytest_benchaudit.aggregate.results.variant_deltas`);
* invalid rates per model and task (``runs``: summary result rows);
* any other key of the document (``pca``, ``win_rate``, ...) as a generic table.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any, Iterable

__all__ = ["write_html", "render_html"]

#: Keys of the compare document that have their own section.
_KNOWN = {"scores", "ranks", "tau_b", "rank_shift", "spearman"}

#: Longest label drawn on a plot (tables show the full string).
_LABEL_MAX = 40

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px;color:#1b1b1b;background:#fff;max-width:1400px}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1em;margin-top:1.2em}
p.note{color:#555;font-size:.9em;margin:.3em 0}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;max-width:32em;overflow-wrap:break-word}
th{background:#f1f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#fafafa}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.85em}
pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:.85em}
.wrap{overflow-x:auto;max-width:100%}
.up{color:#1a7f37}.down{color:#cf222e}
"""

# No script at all; images only from data: URIs; styles only inline.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


# --------------------------------------------------------------------------- formatting

def _e(value: Any) -> str:
    """Any value as escaped text (quotes too: safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value: Any) -> str:
    """A value as display text (not yet escaped)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e4):
            return f"{value:.3g}"
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def _cell(value: Any) -> str:
    cls = ' class="num"' if _is_num(value) else ""
    return f"<td{cls}>{_e(_fmt(value))}</td>"


def _table(headers: list[Any], rows: Iterable[list[Any]], *, raw_cols: set[int] | None = None) -> str:
    """A table; every header and cell is escaped (``raw_cols``: cells already rendered HTML)."""
    raw_cols = raw_cols or set()
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(f"<td>{c}</td>" if i in raw_cols else _cell(c) for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _short(label: Any) -> str:
    text = str(label)
    return text if len(text) <= _LABEL_MAX else text[: _LABEL_MAX - 1] + "…"


# --------------------------------------------------------------------------- plots

def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig, alt: str, caption: str) -> str:
    data = _png(fig)
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_e(alt)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _rc():
    import matplotlib

    # Untrusted labels: never parse "$...$" as mathtext, never hand text to TeX.
    return matplotlib.rc_context({"text.parse_math": False, "text.usetex": False,
                                  "font.size": 9, "axes.titlesize": 10})


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _bump_pipelines(shifts: list[dict[str, Any]], label_a: str, label_b: str) -> str:
    by_bench: dict[str, list[dict[str, Any]]] = {}
    for row in shifts:
        if _is_num(row.get("rank_a")) and _is_num(row.get("rank_b")):
            by_bench.setdefault(str(row.get("benchmark", "")), []).append(row)
    if not by_bench:
        return ""
    models = sorted({str(r.get("model")) for rows in by_bench.values() for r in rows})
    color = dict(zip(models, _colors(len(models))))
    n = len(by_bench)
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    max_rank = max(max(r["rank_a"], r["rank_b"]) for rows in by_bench.values() for r in rows)
    with _rc():
        fig = _figure(6.8 * cols, max(2.6, 0.42 * max_rank + 1.3) * nrows)
        for k, (bench, rows) in enumerate(sorted(by_bench.items())):
            ax = fig.add_subplot(nrows, cols, k + 1)
            right = ax.twinx()
            for r in rows:
                m = str(r.get("model"))
                ax.plot([0, 1], [r["rank_a"], r["rank_b"]], "-o", color=color[m], lw=2.2, ms=7)
            for axis, key in ((ax, "rank_a"), (right, "rank_b")):
                names: dict[float, list[str]] = {}
                for r in rows:
                    names.setdefault(r[key], []).append(_short(r.get("model")))
                ticks = sorted(names)
                axis.set_yticks(ticks, [f"{t:g}. {', '.join(names[t])}" if axis is ax else
                                        f"{', '.join(names[t])} ({t:g})" for t in ticks], fontsize=8)
                axis.set_ylim(max_rank + 0.5, 0.5)
                axis.tick_params(axis="y", length=0)
                for side in ("top", "left", "right"):
                    axis.spines[side].set_visible(False)
            ax.set_xlim(-0.12, 1.12)
            ax.set_xticks([0, 1], [_short(label_a), _short(label_b)])
            ax.set_title(_short(bench))
        fig.suptitle(f"Rank shift: {_short(label_a)} → {_short(label_b)}")
        return _img(fig, "rank shift bump chart",
                    f"Each model's rank under pipeline {label_a} (left) and {label_b} (right), per benchmark.")


def _bump_tasks(ranks: dict[str, dict[str, Any]]) -> str:
    tasks = [t for t, by_model in ranks.items() if isinstance(by_model, dict)
             and any(_is_num(v) for v in by_model.values())]
    if not tasks:
        return ""
    models = sorted({str(m) for t in tasks for m, v in ranks[t].items() if _is_num(v)})
    color = dict(zip(models, _colors(len(models))))
    max_rank = max(v for t in tasks for v in ranks[t].values() if _is_num(v))
    with _rc():
        fig = _figure(max(6.0, 1.3 * len(tasks) + 3.5), max(3.0, 0.4 * max_rank + 1.5))
        ax = fig.add_subplot(1, 1, 1)
        for m in models:
            xs = [i for i, t in enumerate(tasks) if _is_num(ranks[t].get(m))]
            ys = [ranks[tasks[i]][m] for i in xs]
            ax.plot(xs, ys, "-o", color=color[m], lw=2, ms=6, label=_short(m))
        ax.set_xticks(range(len(tasks)), [_short(t) for t in tasks], rotation=20, ha="right")
        ax.set_xlim(-0.3, len(tasks) - 0.7)
        fig.legend(loc="outside right upper", fontsize=8, title="model")
        ax.set_ylim(max_rank + 0.5, 0.5)
        ax.set_yticks(range(1, int(math.ceil(max_rank)) + 1))
        ax.set_ylabel("rank (1 = best)")
        ax.set_title("Model ranks across tasks")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        return _img(fig, "rank bump chart across tasks", "Each model's rank on each task (1 = best).")


def _sweep_value(row: dict[str, Any]) -> tuple[float | None, str]:
    if _is_num(row.get("delta_pp")):
        return float(row["delta_pp"]), "pp"
    if _is_num(row.get("delta")):
        return float(row["delta"]), str(row.get("unit") or row.get("metric") or "metric unit")
    return None, ""


def _field_of(row: dict[str, Any]) -> str:
    if row.get("field"):
        return str(row["field"])
    variant = str(row.get("variant") or "")
    return variant.split("=", 1)[0] if "=" in variant else (variant or "variant")


_STAGE_COLORS = {"inference": "#d62728", "extraction": "#ff7f0e", "scoring": "#1f77b4", "none": "#9e9e9e"}


def _sweep_plot(sweeps: list[dict[str, Any]]) -> str:
    by_field: dict[str, list[tuple[str, float, str, str]]] = {}
    for row in sweeps:
        value, unit = _sweep_value(row)
        if value is None:
            continue
        task = ".".join(str(p) for p in (row.get("benchmark"), row.get("task")) if p)
        label = f"{task} · {row.get('model')} · {row.get('variant')}"
        by_field.setdefault(_field_of(row), []).append((label, value, unit, str(row.get("moved_by"))))
    if not by_field:
        return ""
    fields = sorted(by_field)
    heights = [max(1.2, 0.32 * len(by_field[f]) + 0.9) for f in fields]
    from matplotlib.patches import Patch

    with _rc():
        fig = _figure(9.0, sum(heights) + 0.6)
        grid = fig.add_gridspec(len(fields), 1, height_ratios=heights)
        for k, f in enumerate(fields):
            ax = fig.add_subplot(grid[k, 0])
            rows = by_field[f]
            ys = list(range(len(rows)))
            ax.barh(ys, [r[1] for r in rows], color=[_STAGE_COLORS.get(r[3], "#8c564b") for r in rows])
            ax.set_yticks(ys, [_short(r[0]) + ("" if r[2] == "pp" else f" ({_short(r[2])})") for r in rows])
            ax.invert_yaxis()
            ax.axvline(0, color="#333", lw=0.8)
            units = {r[2] for r in rows}
            ax.set_xlabel("Δ score, " + ("percentage points" if units == {"pp"} else "pp or the metric's unit"))
            ax.set_title(f"field: {_short(f)}")
            for y, r in zip(ys, rows):
                ax.annotate(f"{r[1]:+.1f}" if r[2] == "pp" else f"{r[1]:+.3g}", (r[1], y),
                            xytext=(3 if r[1] >= 0 else -3, 0), textcoords="offset points",
                            ha="left" if r[1] >= 0 else "right", va="center", fontsize=8)
            lo, hi = ax.get_xlim()
            pad = 0.15 * (hi - lo)
            ax.set_xlim(lo - pad, hi + pad)
        stages = sorted({r[3] for rows in by_field.values() for r in rows})
        fig.legend(handles=[Patch(color=_STAGE_COLORS.get(s, "#8c564b"), label=f"moved by {_short(s)}") for s in stages],
                   loc="outside lower center", ncols=max(1, len(stages)), fontsize=8)
        fig.suptitle("Per-field score deltas (variant − base)")
        return _img(fig, "per-field score deltas", "Change of the headline score under each single-field variant, "
                    "coloured by the stage that moved it.")


def _invalid_plot(runs: list[dict[str, Any]]) -> str:
    cells: dict[tuple[str, str], float] = {}
    for row in runs:
        if not _is_num(row.get("invalid_rate")):
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
    with _rc():
        fig = _figure(max(5.5, 1.2 * len(tasks) + 3.0), max(2.5, 0.45 * len(models) + 1.6))
        ax = fig.add_subplot(1, 1, 1)
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="Reds", vmin=0, vmax=max(0.05, float(np.nanmax(grid))),
                       aspect="auto")
        ax.set_xticks(range(len(tasks)), [_short(t) for t in tasks], rotation=25, ha="right")
        ax.set_yticks(range(len(models)), [_short(m) for m in models])
        hi = float(np.nanmax(grid)) or 1.0
        for i in range(len(models)):
            for j in range(len(tasks)):
                if not math.isnan(grid[i, j]):
                    ax.text(j, i, f"{100 * grid[i, j]:.1f}%", ha="center", va="center", fontsize=8,
                            color="white" if grid[i, j] > 0.6 * hi else "black")
        fig.colorbar(im, ax=ax, label="invalid rate")
        ax.set_title("Invalid rate per model and task")
        return _img(fig, "invalid rates per model and task", "Share of items without a scorable answer.")


# --------------------------------------------------------------------------- sections

def _matrix(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    tasks = [t for t, v in data.items() if isinstance(v, dict)]
    models: list[str] = []
    for t in tasks:
        for m in data[t]:
            if m not in models:
                models.append(m)
    return tasks, models


def _matrix_table(data: dict[str, Any], models: list[str] | None = None) -> str:
    tasks, found = _matrix(data)
    models = models or found
    rows = [[m] + [data[t].get(m) for t in tasks] for m in models]
    return _table(["model"] + tasks, rows)


def _model_order(ranks: dict[str, Any], scores: dict[str, Any]) -> list[str]:
    _, models = _matrix(ranks if ranks else scores)
    for extra in _matrix(scores)[1]:
        if extra not in models:
            models.append(extra)

    def mean_rank(m: str) -> float:
        values = [v[m] for v in ranks.values() if isinstance(v, dict) and _is_num(v.get(m))]
        return sum(values) / len(values) if values else math.inf

    return sorted(models, key=lambda m: (mean_rank(m), str(m)))


def _rows_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    extra = [k for r in rows if isinstance(r, dict) for k in r if k not in columns]
    cols = columns + list(dict.fromkeys(extra))
    return _table(cols, [[r.get(c) for c in cols] for r in rows if isinstance(r, dict)])


def _shift_table(shifts: list[dict[str, Any]]) -> str:
    cols = ["benchmark", "model", "rank_a", "rank_b", "shift", "direction_stability"]
    extra = list(dict.fromkeys(k for r in shifts if isinstance(r, dict) for k in r if k not in cols))
    rows = []
    for r in shifts:
        if not isinstance(r, dict):
            continue
        shift = r.get("shift")
        if _is_num(shift) and shift:
            # The arrow reads the ranks, not the sign of ``shift``: rank_b < rank_a means moved up.
            up = _is_num(r.get("rank_a")) and _is_num(r.get("rank_b")) and r["rank_b"] < r["rank_a"]
            arrow = f'<span class="{"up" if up else "down"}">{"▲" if up else "▼"} {_e(_fmt(shift))}</span>'
        else:
            arrow = _e(_fmt(shift))
        rows.append([r.get("benchmark"), r.get("model"), r.get("rank_a"), r.get("rank_b"), arrow,
                     r.get("direction_stability")] + [r.get(k) for k in extra])
    return _table(cols + extra, rows, raw_cols={4})


def _generic(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return _rows_table(value, [])
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        cols = list(dict.fromkeys(k for v in value.values() for k in v))
        return _table([""] + cols, [[k] + [v.get(c) for c in cols] for k, v in value.items()])
    if isinstance(value, dict) and value and not any(isinstance(v, (dict, list)) for v in value.values()):
        return _table(["key", "value"], [[k, v] for k, v in value.items()])
    text = json.dumps(value, indent=2, default=str, ensure_ascii=False)
    if len(text) > 20000:
        text = text[:20000] + "\n…"
    return f"<pre>{_e(text)}</pre>"


def _sweep_table(sweeps: list[dict[str, Any]]) -> str:
    cols = ["benchmark", "task", "model", "variant", "field", "value", "base_score", "score", "delta_pp", "delta",
            "unit", "invalid_rate", "base_invalid_rate", "moved_by", "moved_by_detail"]
    present = [c for c in cols if any(isinstance(r, dict) and c in r for r in sweeps)]
    return _table(present, [[r.get(c) for c in present] for r in sweeps if isinstance(r, dict)])


def _runs_table(runs: list[dict[str, Any]]) -> str:
    cols = ["benchmark", "task", "model", "variant", "pipeline", "n", "n_valid", "score", "invalid_rate",
            "invalid_reasons"]
    present = [c for c in cols if any(isinstance(r, dict) and c in r for r in runs)]
    return _table(present, [[r.get(c) for c in present] for r in runs if isinstance(r, dict)])


def render_html(compare_doc: dict[str, Any], *, sweeps: list[dict[str, Any]] | None = None,
                runs: list[dict[str, Any]] | None = None, title: str = "benchaudit compare report") -> str:
    """The report as an HTML string (see :func:`write_html`)."""
    doc = compare_doc or {}
    scores = doc.get("scores") or {}
    ranks = doc.get("ranks") or {}
    tau_b = doc.get("tau_b") or []
    shifts = doc.get("rank_shift") or []
    spearman = doc.get("spearman") or []
    sweeps = [r for r in (sweeps or []) if isinstance(r, dict)]
    runs = [r for r in (runs or []) if isinstance(r, dict)]
    label_a = str(doc.get("pipeline_a") or doc.get("label_a") or "A")
    label_b = str(doc.get("pipeline_b") or doc.get("label_b") or "B")

    parts: list[str] = [f"<h1>{_e(title)}</h1>"]
    meta = [[k, v] for k, v in doc.items() if k not in _KNOWN and not isinstance(v, (dict, list))]
    if meta:
        parts.append(_table(["", ""], meta))
    parts.append('<p class="note">Offline, self-contained report: no script, no external resource. '
                 "Every name and string below is shown as text.</p>")

    plot = _bump_pipelines(shifts, label_a, label_b) if shifts else ""
    if not plot and ranks:
        plot = _bump_tasks(ranks)

    models = _model_order(ranks, scores) if (ranks or scores) else []
    if scores:
        parts.append("<h2>Scores per task</h2>")
        parts.append(_matrix_table(scores, models))
    if ranks:
        parts.append("<h2>Ranks per task</h2>")
        parts.append('<p class="note">1 = best; models ordered by mean rank.</p>')
        parts.append(_matrix_table(ranks, models))
    if plot:
        parts.append("<h2>Rank shift</h2>" + plot)
    if shifts:
        parts.append(f"<h2>Rank shifts between pipelines {_e(label_a)} and {_e(label_b)}</h2>")
        parts.append(_shift_table(shifts))
    if tau_b:
        parts.append("<h2>Kendall τ-b between tasks</h2>")
        parts.append(_rows_table(tau_b, ["task_a", "task_b", "tau", "p_value", "inversions", "n_models"]))
    if spearman:
        parts.append("<h2>Spearman ρ</h2>")
        parts.append(_rows_table(spearman, ["benchmark", "rho", "ci95"]))
    if sweeps:
        parts.append("<h2>Per-field score deltas</h2>")
        parts.append(_sweep_plot(sweeps))
        parts.append(_sweep_table(sweeps))
    if runs:
        parts.append("<h2>Invalid rates</h2>")
        parts.append(_invalid_plot(runs))
        parts.append(_runs_table(runs))
    for key, value in doc.items():
        if key in _KNOWN or not isinstance(value, (dict, list)) or not value:
            continue
        parts.append(f"<h2>{_e(key)}</h2>")
        parts.append(_generic(value))

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_e(_CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def write_html(compare_doc: dict[str, Any], path: Path, *, sweeps: list[dict[str, Any]] | None = None,
               runs: list[dict[str, Any]] | None = None) -> Path:
    """Write the compare document (plus optional sweep deltas and run summary rows) as one
    self-contained HTML file at ``path``; returns the path.

    ``sweeps``: rows of :func:`pytest_benchaudit.aggregate.results.variant_deltas` (task, model,
    variant, ``delta_pp`` or ``delta``, ``moved_by``).  ``runs``: summary result rows
    (task, model, ``invalid_rate``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(compare_doc, sweeps=sweeps, runs=runs), encoding="utf-8")
    return path
