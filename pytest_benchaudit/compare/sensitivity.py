"""Generation against extraction sensitivity (``benchaudit compare BASE... --sensitivity RUN...``).

Which moves a benchmark's model ranking more: a change that needs new generations (an upstream
field: dataset, prompt, inference) or one that re-scores the stored outputs (extraction, scoring,
denominator)?  Each run given to ``--sensitivity`` is classified against the base set (set a):

- **regenerated** (``upstream``): some question it shares with the base has a different raw output,
  or its records carry another upstream hash (the hash of the dataset, prompt and inference fields);
- **re-scored** (``downstream``): same upstream hash and the same raw output for every shared
  question (what ``benchaudit rescore`` and ``sweep`` write).

A re-scored run's ``scope`` says which downstream fields its cards change against the base's:
``extraction`` when every field that differs is an ``extraction.*`` field (what the paper's
extraction sensitivity changes: how the answer is read, nothing else), ``downstream`` otherwise
(scoring or aggregation fields too, or no field named: the cards do not say what moved).

The regenerated runs form one run set, the extraction-only re-scored runs another and every other
re-scored run a third; each is compared with the base as ``compare`` compares two sets (benchmark
ranking by mean task rank over the tasks both have, among the models both score on all of them;
Spearman rho with a 95% percentile CI from the paired bootstrap over questions).  Per benchmark:
``rho_gen`` (regenerated), ``rho_ext`` (the paper's rho_ext: extraction fields only) and
``rho_downstream`` (every downstream field at once: extraction, scoring, aggregation); 1 = the change
kept the ranking, lower = it reordered the models.  A benchmark without runs of one kind has that
rho null, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import JsonValue

from pytest_benchaudit.compare.analysis_registry import Analysis, AnalysisContext, HtmlKit, HtmlSection
from pytest_benchaudit.compare.compare_documents import (
    CompareDocument,
    OneSetAnalysis,
    RunClass,
    SensitivityPart,
    SensitivityRow,
    SpearmanRow,
)
from pytest_benchaudit.compare.oneset import analyse_set
from pytest_benchaudit.compare.runsets import CompareError, LoadedRun, RunSet, load_run_set
from pytest_benchaudit.compare.twosets import compare_sets
from pytest_benchaudit.pipeline.record_documents import Cards

__all__ = [
    "classify_runs",
    "sensitivity_table",
    "render_sensitivity",
    "sensitivity_html",
    "SensitivityRequest",
    "ANALYSIS",
    "COLUMNS",
]

KINDS = {"upstream": "regenerated (upstream change)", "downstream": "re-scored (downstream change)"}
#: The run sets of the table: (short name of its rho, kind, scope, what it is).
COLUMNS = (
    ("gen", "upstream", None, "regenerated (upstream change)"),
    ("ext", "downstream", "extraction", "re-scored changing extraction fields only (the paper's rho_ext)"),
    (
        "downstream",
        "downstream",
        "downstream",
        "re-scored changing every downstream field (extraction, scoring, aggregation)",
    ),
)


def _upstream_fields(
    base_cards: Cards,
    cards: Cards,
    key: str,
    stages: tuple[str, ...] = ("dataset", "prompt", "inference"),
    both: bool = False,
) -> list[str]:
    """Names of the fields of ``stages`` (default: dataset/prompt/inference) whose value differs between
    two cards of a task; with ``both``, only fields that both cards name (a card written before a field
    existed does not name it, which says nothing about a change)."""
    a = _fields(base_cards, key)
    b = _fields(cards, key)
    names = set(a) & set(b) if both else set(a) | set(b)
    return sorted(f for f in names if f.split(".", 1)[0] in stages and a.get(f) != b.get(f))


def _fields(cards: Cards, key: str) -> dict[str, JsonValue]:
    card = cards.get(key)
    return card.get("fields", {}) if card else {}


def classify_runs(base: RunSet, base_cards: Cards, runs: list[LoadedRun]) -> list[RunClass]:
    """One row per run: its kind (upstream / downstream) and the evidence."""
    raw: dict[tuple[str, str, str], str | None] = {}
    upstream: dict[tuple[str, str], set[str]] = {}
    for (key, model), recs in base.items.items():
        for r in recs:
            raw[(key, model, str(r["question_id"]))] = r.get("raw_output")
            upstream.setdefault((key, model), set()).add(str(r.get("upstream_hash")))
    rows: list[RunClass] = []
    for run in runs:
        shared = differ = 0
        hashes_differ: set[str] = set()
        keys: set[str] = set()
        for r in run.records:
            key = f"{r['benchmark']}.{r['task']}"
            q = (key, r["model"], str(r["question_id"]))
            if q not in raw:
                continue
            shared += 1
            keys.add(key)
            differ += r.get("raw_output") != raw[q]
            if str(r.get("upstream_hash")) not in upstream.get((key, r["model"]), set()):
                hashes_differ.add(key)
        if not shared:
            raise CompareError(f"--sensitivity {run.path}: shares no (task, model, question) with the base runs")
        kind = "upstream" if differ or hashes_differ else "downstream"
        fields = sorted(
            {
                f
                for key in hashes_differ
                for f in _upstream_fields(base_cards, run.meta.get("pipeline_cards") or {}, key)
            }
        )
        down = sorted(
            {
                f
                for key in keys
                for f in _upstream_fields(
                    base_cards,
                    run.meta.get("pipeline_cards") or {},
                    key,
                    ("extraction", "scoring", "aggregation"),
                    both=True,
                )
            }
        )
        scope = None
        if kind == "downstream":
            scope = "extraction" if down and all(f.startswith("extraction.") for f in down) else "downstream"
        rows.append(
            {
                "run": str(run.path),
                "kind": kind,
                "scope": scope,
                "shared_items": shared,
                "raw_outputs_differ": differ,
                "upstream_hash_differs": sorted(hashes_differ),
                "upstream_fields_differ": fields,
                "downstream_fields_differ": down,
                "pipelines": sorted({r["pipeline"] for r in run.records}),
            }
        )
    return rows


def sensitivity_table(
    base: RunSet,
    an_base: OneSetAnalysis,
    base_cards: Cards,
    runs: list[LoadedRun],
    n_resamples: int = 5000,
    seed: int = 0,
    permutations: int = 1000,
) -> SensitivityPart:
    """compare.json's ``sensitivity``: run classes, and per benchmark rho_gen, rho_ext (extraction fields
    only) and rho_downstream (every downstream field) with CIs."""
    classes = classify_runs(base, base_cards, runs)
    by_column: dict[str, dict[str, SpearmanRow]] = {}
    notes: list[str] = []
    for short, kind, scope, _what in COLUMNS:
        chosen = [run for run, c in zip(runs, classes) if c["kind"] == kind and c["scope"] == scope]
        if not chosen:
            continue
        rs = load_run_set(f"{base.label}~{short}", chosen)
        cmp = compare_sets(base, rs, an_base, analyse_set(rs, seed, permutations), n_resamples, seed)
        by_column[short] = {r["benchmark"]: r for r in cmp["spearman"]}
        notes += [f"{short}: {n}" for n in cmp["notes"]]
        notes += [f"{short}: {m['model']} ({m['benchmark']}): {m['reason']}" for m in cmp["missing"]]
    benches = sorted({b for rows in by_column.values() for b in rows} | {k.split(".", 1)[0] for k in an_base["scores"]})
    table: list[SensitivityRow] = []
    for bench in benches:
        cells: dict[str, _Cell] = {}
        for short, kind, _scope, what in COLUMNS:
            sp = by_column.get(short, {}).get(bench)
            why = why_no_rho(sp, what, upstream=kind == "upstream")
            cells[short] = _Cell(
                sp["rho"] if sp else None,
                sp["ci95"] if sp else None,
                sp["n_models"] if sp else 0,
                sp["tasks"] if sp else [],
                why,
            )
        row = _row(bench, cells)
        g, e = row["rho_gen"], row["rho_ext"]
        row["generation_moves_more"] = None if g is None or e is None else bool(g < e)
        table.append(row)
    return {
        "runs": classes,
        "benchmarks": table,
        "n_resamples": n_resamples,
        "seed": seed,
        "notes": notes,
        "columns": {f"rho_{short}": what for short, _k, _s, what in COLUMNS},
        "how": "runs classified against the base (set a) by raw outputs and upstream hash, re-scored runs by "
        "the downstream fields their cards change (extraction only: rho_ext, the paper's; any other: "
        "rho_downstream); per column, Spearman rho between the base benchmark ranking (mean task rank) "
        "and the changed one, 95% percentile CI from the paired bootstrap over questions; "
        "generation_moves_more compares rho_gen with rho_ext",
    }


def why_no_rho(row: SpearmanRow | None, what: str, upstream: bool) -> str | None:
    """Why a sensitivity cell has no rho (None when it has one): no run of the column's kind for the
    benchmark, fewer than 3 models in both rankings (Spearman's rho of 2 points is +-1 by construction),
    or a ranking with every model tied (rho is undefined)."""
    if row is None:
        return f"no run {what} of this benchmark" + (": needs new generations" if upstream else "")
    if row["rho"] is not None:
        return None
    if row["n_models"] < 3:
        return f"fewer than 3 models to rank ({row['n_models']} in both)"
    return "rho undefined: every model tied in one of the two rankings"


class _Cell(NamedTuple):
    """One column (gen, ext, downstream) of a benchmark's sensitivity row."""

    rho: float | None
    ci95: list[float] | None
    n_models: int
    tasks: list[str]
    why_no: str | None


def _row(bench: str, cells: dict[str, _Cell]) -> SensitivityRow:
    """The row of ``cells`` (by column, :data:`COLUMNS`), its keys in the order compare.json has them."""
    row: SensitivityRow = {"benchmark": bench}
    gen, ext, down = cells["gen"], cells["ext"], cells["downstream"]
    row["rho_gen"], row["ci95_gen"], row["n_models_gen"], row["tasks_gen"] = gen.rho, gen.ci95, gen.n_models, gen.tasks
    if gen.why_no is not None:
        row["why_no_gen"] = gen.why_no
    row["rho_ext"], row["ci95_ext"], row["n_models_ext"], row["tasks_ext"] = ext.rho, ext.ci95, ext.n_models, ext.tasks
    if ext.why_no is not None:
        row["why_no_ext"] = ext.why_no
    row["rho_downstream"], row["ci95_downstream"] = down.rho, down.ci95
    row["n_models_downstream"], row["tasks_downstream"] = down.n_models, down.tasks
    if down.why_no is not None:
        row["why_no_downstream"] = down.why_no
    return row


def _cells(row: SensitivityRow) -> dict[str, _Cell]:
    """A row's columns (a document of an older version may lack some: 0 models, no rho)."""
    return {
        "gen": _Cell(
            row.get("rho_gen"),
            row.get("ci95_gen"),
            row.get("n_models_gen", 0),
            row.get("tasks_gen", []),
            row.get("why_no_gen"),
        ),
        "ext": _Cell(
            row.get("rho_ext"),
            row.get("ci95_ext"),
            row.get("n_models_ext", 0),
            row.get("tasks_ext", []),
            row.get("why_no_ext"),
        ),
        "downstream": _Cell(
            row.get("rho_downstream"),
            row.get("ci95_downstream"),
            row.get("n_models_downstream", 0),
            row.get("tasks_downstream", []),
            row.get("why_no_downstream"),
        ),
    }


def render_sensitivity(sens: SensitivityPart) -> str:
    """The sensitivity table for the terminal."""
    from tabulate import tabulate

    def ci(x: list[float] | None) -> str:
        return f"[{x[0]:.2f}, {x[1]:.2f}]" if x else "–"

    def rho(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}"

    shorts = [short for short, _k, _s, _w in COLUMNS]
    rows = [
        [
            r["benchmark"],
            *(
                x
                for cell in (_cells(r)[short] for short in shorts)
                for x in (rho(cell.rho), ci(cell.ci95), cell.n_models)
            ),
        ]
        for r in sens["benchmarks"]
    ]
    out = [
        "Sensitivity: Spearman rho of each benchmark ranking, base vs regenerated (gen), vs re-scored with "
        "extraction fields only (ext, the paper's rho_ext) and vs re-scored with every downstream field "
        f"(downstream); paired bootstrap, {sens['n_resamples']} resamples",
        tabulate(
            rows,
            headers=["benchmark", *(h for short in shorts for h in (f"rho_{short}", "95% CI", "models"))],
            tablefmt="simple",
            disable_numparse=True,
        ),
    ]
    counts = {k: sum(c["kind"] == k for c in sens["runs"]) for k in KINDS}
    ext = sum(c.get("scope") == "extraction" for c in sens["runs"])
    out.append(
        f"runs: {counts['upstream']} regenerated, {counts['downstream']} re-scored ({ext} changing "
        "extraction fields only)"
    )
    for r in sens["benchmarks"]:
        cells = _cells(r)
        for short in shorts:
            if cells[short].why_no:
                out.append(f"  {r['benchmark']}: no rho_{short}: {cells[short].why_no}")
    return "\n".join(out)


def sensitivity_html(sens: Any, _doc: CompareDocument, kit: HtmlKit) -> str:
    """The report's section: one ρ column (with CI and models) per run set the table has: ρ_gen (regenerated),
    ρ_ext (re-scored, extraction fields only) and, where the document has it, ρ_downstream (every downstream
    field); ``columns`` names them (older documents: gen and ext)."""
    if not isinstance(sens, dict) or not sens.get("benchmarks"):
        return ""
    columns = [k[len("rho_") :] for k in (sens.get("columns") or {"rho_gen": "", "rho_ext": ""})]
    rows = []
    for r in sens["benchmarks"]:
        why = "; ".join(str(r[f"why_no_{c}"]) for c in columns if r.get(f"why_no_{c}"))
        more = r.get("generation_moves_more")
        cells = [
            x
            for c in columns
            for x in (kit.fmt_corr(r.get(f"rho_{c}")), kit.fmt_ci(r.get(f"ci95_{c}")), r.get(f"n_models_{c}", 0))
        ]
        rows.append([r["benchmark"], *cells, "—" if more is None else ("generation" if more else "extraction"), why])
    runs = sens.get("runs") or []
    n_gen = sum(r.get("kind") == "upstream" for r in runs)
    warns = [
        f"{r['benchmark']}: " + kit.small_sample(r.get(f"n_models_{c}"), f"ρ_{c}")
        for r in sens["benchmarks"]
        for c in columns
        if r.get(f"n_models_{c}") and kit.small_sample(r.get(f"n_models_{c}"), f"ρ_{c}")
    ]
    what = "; ".join(f"ρ_{k[len('rho_') :]}: {v}" for k, v in (sens.get("columns") or {}).items() if v)
    return "".join(
        [
            kit.note(
                f"Spearman ρ between the base ranking and the ranking under regenerated runs (ρ_gen, "
                f"{n_gen} runs) and re-scored runs ({len(runs) - n_gen} runs); 95% CI from the paired "
                f"bootstrap over questions ({sens.get('n_resamples', '—')} resamples). 1 = the change "
                "kept the order." + (f" {what}." if what else "") + " Moves more: generation when "
                "ρ_gen < ρ_ext."
            ),
            kit.table(
                ["benchmark", *[h for c in columns for h in (f"ρ_{c}", "95% CI", "models")], "moves more", "missing"],
                rows,
            ),
            *[kit.warn(w) for w in warns],
        ]
    )


@dataclass(frozen=True)
class SensitivityRequest:
    """The options of the sensitivity analysis (``options["sensitivity"]``; ``compare --sensitivity RUN...``):
    the changed runs, and the base runs' pipeline cards (``run.json`` ``pipeline_cards``, merged)."""

    runs: list[LoadedRun]
    base_cards: Cards


def _compute(ctx: AnalysisContext) -> SensitivityPart:
    request = ctx.options["sensitivity"]
    if not isinstance(request, SensitivityRequest):
        raise TypeError(f"options['sensitivity'] is a {type(request).__name__}; expected a SensitivityRequest")
    return sensitivity_table(
        ctx.set_a,
        ctx.doc["by_set"]["a"],
        request.base_cards,
        request.runs,
        n_resamples=ctx.n_resamples,
        seed=ctx.seed,
        permutations=ctx.permutations,
    )


ANALYSIS: Analysis[SensitivityPart] = Analysis(
    name="sensitivity",
    compute=_compute,
    text=render_sensitivity,
    on_request=True,
    html=HtmlSection("sensitivity", "Generation against extraction sensitivity", sensitivity_html, nav="Sensitivity"),
    summary="rho_gen / rho_ext / rho_downstream: how far regenerated and re-scored runs reorder the benchmark ranking",
)
