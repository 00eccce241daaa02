"""The multiverse in HTML: its verdict (the report's first screen) and its section, with the curves.

:func:`multiverse_html` gives the two parts ``benchaudit audit`` puts into its report (the verdict at the
top of the report's verdict block, its first screen; the section among the others:
:func:`pytest_benchaudit.report.html.render_html`'s ``first`` and ``extra_sections``);
:func:`write_multiverse_html` writes ``benchaudit multiverse``'s own self-contained page from the same parts.  Every string is escaped by the report's helpers
(:mod:`pytest_benchaudit.report.html.format`); plots are matplotlib PNGs drawn with mathtext off.

The specification curve (Simonsohn, Simmons & Nelson 2020), one per task: the specifications on the
x axis, sorted by their mean score over the models; above, each model's score in each (one line per
model); beneath, the indicator panel: a row per field value, a mark where the specification uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_benchaudit.multiverse.mv_documents import ModelRow, MultiverseDocument, PairRow, SpecRow, VarianceRow
from pytest_benchaudit.multiverse.mv_verdict import least_robust
from pytest_benchaudit.report.html.format import CSP, CSS, esc, fmt, fmt_rank, fmt_share, note, short, table
from pytest_benchaudit.report.html.plots import colors, figure, img, rc

__all__ = ["ANCHOR", "multiverse_html", "spec_curve", "write_multiverse_html"]

ANCHOR = "multiverse"
MAX_CURVE_SPECS = 400  # beyond this many specifications a curve shows an even subset (the table has them all)


def _verdict(doc: MultiverseDocument) -> str:
    """Which model orderings survive each benchmark's multiverse: one sentence per benchmark."""
    if not doc["verdicts"]:
        return ""
    items = "".join(f'<p class="sentence">{esc(v["sentence"])}</p>' for v in doc["verdicts"])
    return (
        '<div id="mv-verdict"><p><strong>Across every defensible pipeline (the multiverse, '
        f'<a href="#{ANCHOR}">below</a>):</strong></p>{items}</div>'
    )


def spec_curve(task: str, specs: Sequence[SpecRow], lower_is_better: bool) -> str:
    """The specification curve of one task as an embedded PNG ("" without two specifications)."""
    if len(specs) < 2:
        return ""
    models = sorted({m for s in specs for m in s["scores"]})

    def mean(s: SpecRow) -> float:
        vals = [v for v in s["scores"].values() if v is not None]
        return sum(vals) / len(vals) if vals else float("nan")

    ordered = sorted(specs, key=lambda s: (mean(s), s["spec"]), reverse=not lower_is_better)
    if len(ordered) > MAX_CURVE_SPECS:
        step = len(ordered) / MAX_CURVE_SPECS
        ordered = [ordered[int(i * step)] for i in range(MAX_CURVE_SPECS)]
    fields = [f for f in ordered[0]["fields"] if len({repr(s["fields"][f]) for s in ordered}) > 1]
    rows = [(f, v) for f in fields for v in sorted({repr(s["fields"][f]) for s in ordered})]
    xs = list(range(len(ordered)))
    with rc():
        fig = figure(min(16.0, 9.0 + 0.05 * len(ordered)), 3.4 + 0.22 * len(rows))
        grid = fig.add_gridspec(2, 1, height_ratios=[3.0, max(1.0, 0.22 * len(rows))])
        top = fig.add_subplot(grid[0])
        for model, color in zip(models, colors(len(models))):
            ys = [s["scores"].get(model) for s in ordered]
            top.plot(
                xs,
                [float("nan") if y is None else y for y in ys],
                marker="o",
                ms=3,
                lw=1,
                color=color,
                label=short(model),
            )
        top.set_ylabel("score" + (" (lower is better)" if lower_is_better else ""))
        top.set_title(f"{task}: {len(specs)} specifications, best first")
        top.set_xticks([])
        top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        bottom = fig.add_subplot(grid[1], sharex=top)
        for k, (f, v) in enumerate(rows):
            hits = [i for i, s in enumerate(ordered) if repr(s["fields"][f]) == v]
            bottom.scatter(hits, [k] * len(hits), marker="s", s=10, color="#333")
        bottom.set_yticks(range(len(rows)), [short(f"{f} = {v}") for f, v in rows], fontsize=7)
        bottom.invert_yaxis()
        bottom.set_xlabel("specification (sorted by the mean score of the models)")
        return img(
            fig,
            f"specification curve of {task}",
            "Each model's score in each specification (above) and the field values of each specification "
            "(beneath); the specifications are sorted by their mean score over the models.",
        )


def _models_table(rows: Sequence[ModelRow]) -> str:
    return table(
        ["model", "median", "min", "max", "rank across specs", "rank 95% (questions × specs)"],
        [
            [
                r["model"],
                fmt(r["median"]),
                fmt(r["min"]),
                fmt(r["max"]),
                f"{fmt_rank(r['rank_min'])}–{fmt_rank(r['rank_max'])}",
                "—" if r["rank_ci95"] is None else f"{fmt_rank(r['rank_ci95'][0])}–{fmt_rank(r['rank_ci95'][1])}",
            ]
            for r in sorted(rows, key=lambda r: (r["rank_min"] is None, r["rank_min"] or 0, r["model"]))
        ],
    )


def _pairs_table(rows: Sequence[PairRow]) -> str:
    return table(
        ["A", "B", "specs", "A better", "B better", "significant (A / B)", "order", "flipped by"],
        [
            [
                r["model_a"],
                r["model_b"],
                r["n_specs"],
                fmt_share(r["a_better"]),
                fmt_share(r["b_better"]),
                f"{fmt_share(r['significant_a'])} / {fmt_share(r['significant_b'])}",
                r["order"],
                ", ".join(f"{f['field']} {fmt_share(f['share'])}" for f in r["flip_fields"]) or "—",
            ]
            for r in rows
        ],
    )


def _variance_text(row: VarianceRow | None) -> str:
    if row is None:
        return ""
    if row["total_ss"] == 0:
        return note(f"Variance: {row['note']}.")
    parts = [f"{f['field']} {fmt_share(f['share'])}" for f in row["fields"]]
    parts.append(f"higher-order interactions {fmt_share(row['higher_order'])}")
    exact = "" if row["exact"] else " (estimated on a sample of the factorial)"
    return note(
        f"Share of the score variance across specifications (SD {row['sd']:.3g}) each field explains (main "
        f"effect and half of each two-way interaction, all models pooled){exact}: " + "; ".join(parts) + "."
    )


def multiverse_html(doc: MultiverseDocument) -> tuple[str, str]:
    """(the verdict: a block for the top of the report's verdict, the multiverse section) of ``doc`` as HTML ("" for
    a part with nothing to show)."""
    parts = []
    for space in doc["spaces"]:
        key = f"{space['benchmark']}.{space['task']}"
        models = [r for r in doc["models"] if r["task"] == key]
        pairs = [r for r in doc["pairs"] if r["task"] == key]
        pooled = next((r for r in doc["variance"] if r["task"] == key and r["model"] is None), None)
        specs = [s for s in doc["specifications"] if s["task"] == key]
        sized = f"{space['size']} specifications" + (
            f", a seeded sample of {space['enumerated']} (seed {space['sample_seed']})" if space["sampled"] else ""
        )
        fields = "; ".join(
            f"{f['field']}: {', '.join(str(v['value']) for v in f['values'])}"
            for f in space["fields"]
            if len(f["values"]) > 1
        )
        weak = least_robust(pairs, len(pairs))
        parts.append(
            f"<h3>{esc(key)}</h3>"
            + note(f"Space ({space['source']}): {sized}. Varied: {fields or 'nothing'}.")
            + _variance_text(pooled)
            + spec_curve(key, specs, bool(models and models[0]["lower_is_better"]))
            + _models_table(models)
            + (
                ("<h4>Pairs whose order is not the same in every specification</h4>" + _pairs_table(weak))
                if weak
                else note("Every pair of models keeps its order in every specification." if pairs else "")
            )
        )
    for skip in doc["skipped"]:
        parts.append(note(f"{skip['task']} left out: {skip['reason']}."))
    section = ""
    if parts:
        section = (
            f'<section id="{ANCHOR}"><h2>Multiverse</h2>'
            + note(
                "Each task scored under every specification of its space (docs/multiverse.md): the "
                "distribution of each model's score, its rank across specifications and its 95% rank "
                "interval over questions and specifications, and the pairs whose order depends on the "
                "pipeline."
            )
            + "".join(parts)
            + "</section>"
        )
    return _verdict(doc), section


def write_multiverse_html(doc: MultiverseDocument, path: Path) -> Path:
    """``benchaudit multiverse``'s self-contained page (no script, no external resource)."""
    verdict, section = multiverse_html(doc)
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        f"<title>benchaudit multiverse</title><style>{CSS}</style></head>\n<body>\n"
        "<h1>benchaudit multiverse</h1>\n"
        + (
            f'<section id="verdict"><h2>Which model orderings survive the multiverse</h2>{verdict}</section>'
            if verdict
            else ""
        )
        + section
        + "\n</body></html>\n"
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
