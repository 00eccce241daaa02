"""The report's first screen: one verdict per benchmark, built from the documents' fields.

A benchmark's author asks: is my benchmark's score pipeline-dependent, by how much, why, and what
do I fix?  :func:`verdicts` answers from the compare document (set a against set b), the per-field
deltas (``sweeps``: single-field variants, re-scored) and the diagnose findings, never from their
display strings, so the answer follows the numbers as they change:

* ``largest_move``: the largest change of one model's score on one task between the two sets, in
  percentage points on share metrics (0..1, higher = better); ``largest_metric_move`` the same on
  error metrics (e.g. a MAD), in the metric's own unit (never mixed with points);
* ``rank``: Spearman rho between the two sets' benchmark rankings with its CI, and the models whose
  rank moves by ``min_shift_for_stability`` (3) or more; a small-sample flag under
  :data:`SMALL_SAMPLE` models;
* ``causes``: per pipeline field, its largest effect (a single-field re-score, or a diagnose
  finding's effect), largest first, with the field to fix and the command that reproduces it.

Everything here is pure: dicts in, dicts out; :func:`verdict_section` renders them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any, NotRequired

from typing_extensions import TypedDict

from pytest_benchaudit.compare.compare_documents import CompareDocument, TaskInfo
from pytest_benchaudit.diagnose.finding_documents import FindingRow
from pytest_benchaudit.report.html.causes import (
    MATERIAL_PP,
    Cause,
    MetricCause,
    field_causes,
    metric_causes,
    unit_of,
    value_text,
)
from pytest_benchaudit.report.html.format import esc, fmt_ci, fmt_corr, fmt_pp, is_num, note, table
from pytest_benchaudit.report.html.sweeps import SweepRow

# Cause, MetricCause and MATERIAL_PP are .causes' (re-exported: importable from here as before).
__all__ = [
    "SMALL_SAMPLE",
    "MATERIAL_PP",
    "TOP_CAUSES",
    "Cause",
    "MetricCause",
    "MetricMove",
    "Mover",
    "PpMove",
    "RankVerdict",
    "Verdict",
    "benchmark_of",
    "verdicts",
    "verdict_section",
    "causes_section",
    "small_sample_note",
]

#: Below this many models a rank correlation or a PCA is too rough to read as more than a description.
SMALL_SAMPLE = 8
#: Causes shown on the first screen (the rest are in the evidence below).
TOP_CAUSES = 3


# The verdict's own rows (never written as JSON; dicts so that a test reads them key by key).
class PpMove(TypedDict):
    """One model's move on one share-metric task between the sets, in percentage points."""

    model: str
    task: str
    a: float
    b: float
    pp: float


class MetricMove(TypedDict):
    """One model's move on one error-metric task, in the metric's own unit."""

    model: str
    task: str
    a: float
    b: float
    delta: float
    unit: str
    lower_is_better: bool


class Mover(TypedDict):
    model: str
    shift: float


class RankVerdict(TypedDict):
    """Spearman rho of a benchmark's two rankings and the models moving ``min_shift`` ranks or more."""

    rho: float | None
    ci95: list[float] | None
    n_models: int
    min_shift: int
    movers: list[Mover]
    small_sample: bool


class Verdict(TypedDict):
    """One benchmark's verdict (:func:`verdicts`)."""

    benchmark: str
    largest_move: PpMove | None
    largest_metric_move: MetricMove | None
    rank: RankVerdict | None
    causes: list[Cause]
    metric_causes: list[MetricCause]
    metric_differs: list[str]
    dependent: NotRequired[bool | None]
    sentence: NotRequired[str]


def benchmark_of(task_key: Any) -> str:
    """The benchmark of a compare task key ``<benchmark>.<task>``."""
    return str(task_key).partition(".")[0]


def small_sample_note(n_models: Any, what: str) -> str:
    """A warning line when ``what`` rests on fewer than :data:`SMALL_SAMPLE` models, else ``""``."""
    if not is_num(n_models) or n_models >= SMALL_SAMPLE:
        return ""
    return (
        f"Small sample: {what} rests on {int(n_models)} models (fewer than {SMALL_SAMPLE}); one model more or "
        "less can change it: read it as a description of these models, not of the benchmark."
    )


def _share_task(info: TaskInfo | None, values: list[float]) -> bool:
    return not (info and info.get("lower_is_better")) and all(0 <= v <= 1 for v in values)


def _metric_of(info: TaskInfo | None) -> tuple[list[str] | None, bool | None]:
    """What a task's scores are: its metrics and direction (``None`` each when the set does not say)."""
    return (info.get("metrics"), info.get("lower_is_better")) if info else (None, None)


def _moves(doc: CompareDocument, bench: str) -> tuple[PpMove | None, MetricMove | None, list[str]]:
    """The largest set-b-minus-set-a move of one model on one task: (in pp, in a metric's unit), and the
    tasks left out because the two sets score them with different metrics (their scores do not compare)."""
    by_set = doc.get("by_set") or {}
    side_a, side_b = by_set.get("a"), by_set.get("b")
    a = (side_a.get("scores") if side_a else None) or {}
    b = (side_b.get("scores") if side_b else None) or {}
    best_pp: PpMove | None = None
    best_metric: MetricMove | None = None
    differ: list[str] = []
    for task in sorted(set(a) & set(b)):
        if benchmark_of(task) != bench or not isinstance(a[task], dict) or not isinstance(b[task], dict):
            continue
        info_a = ((side_a.get("tasks") if side_a else None) or {}).get(task)
        info_b = ((side_b.get("tasks") if side_b else None) or {}).get(task)
        if _metric_of(info_a) != _metric_of(info_b):
            differ.append(task)
            continue
        values = [float(v) for s in (a[task], b[task]) for v in s.values() if is_num(v)]
        share = _share_task(info_a, values)
        for model in sorted(set(a[task]) & set(b[task])):
            va, vb = a[task][model], b[task][model]
            if not (is_num(va) and is_num(vb)):
                continue
            if share:
                pp_move = PpMove(model=model, task=task, a=float(va), b=float(vb), pp=100 * (float(vb) - float(va)))
                if best_pp is None or abs(pp_move["pp"]) > abs(best_pp["pp"]):
                    best_pp = pp_move
            else:
                move = MetricMove(
                    model=model,
                    task=task,
                    a=float(va),
                    b=float(vb),
                    delta=float(vb) - float(va),
                    unit=unit_of(info_a),
                    lower_is_better=bool(info_a and info_a.get("lower_is_better")),
                )
                if best_metric is None or abs(move["delta"]) > abs(best_metric["delta"]):
                    best_metric = move
    return best_pp, best_metric, differ


def _rank(doc: CompareDocument, bench: str) -> RankVerdict | None:
    rho = next((r for r in doc.get("spearman") or [] if isinstance(r, dict) and r.get("benchmark") == bench), None)
    shifts = [r for r in doc.get("rank_shift") or [] if isinstance(r, dict) and r.get("benchmark") == bench]
    if rho is None and not shifts:
        return None
    least = doc.get("min_shift_for_stability", 3)
    movers = sorted(
        (r for r in shifts if is_num(r.get("shift")) and abs(r["shift"]) >= least),
        key=lambda r: (-abs(r["shift"]), str(r.get("model"))),
    )
    n_models = rho.get("n_models", len(shifts)) if rho else len(shifts)
    return RankVerdict(
        rho=rho.get("rho") if rho else None,
        ci95=rho.get("ci95") if rho else None,
        n_models=n_models,
        min_shift=least,
        movers=[Mover(model=r["model"], shift=r["shift"]) for r in movers],
        small_sample=is_num(n_models) and n_models < SMALL_SAMPLE,
    )


def _run_paths(doc: CompareDocument, findings: Sequence[FindingRow]) -> dict[tuple[str, str], str]:
    """(benchmark, model) -> the run directory of set a, from the findings' run names and set a's paths."""
    set_a = (doc.get("sets") or {}).get("a")
    paths = [str(p) for p in (set_a.get("runs") if set_a else None) or []]
    by_name = {p.rstrip("/").rsplit("/", 1)[-1]: p for p in paths}
    out: dict[tuple[str, str], str] = {}
    for f in findings:
        run = str(f.get("run") or "")
        if run and f.get("model") not in (None, "*"):
            out.setdefault((str(f.get("benchmark")), str(f.get("model"))), by_name.get(run, run))
    return out


def _short(cause: Cause | MetricCause) -> str:
    """The cause's command with its run directory written ``RUN`` (the full one is in the causes section)."""
    command = str(cause.get("command") or "")
    run = cause.get("run")
    return command.replace(shlex.quote(run), "RUN", 1) if run else command


def _benchmarks(doc: CompareDocument, sweeps: Sequence[SweepRow], findings: Sequence[FindingRow]) -> list[str]:
    names: set[str] = set()
    for an in (doc.get("by_set") or {}).values():
        if isinstance(an, dict):
            names |= {benchmark_of(t) for t in (an.get("scores") or {})}
    names |= {str(r["benchmark"]) for r in doc.get("spearman") or [] if isinstance(r, dict) and r.get("benchmark")}
    names |= {str(r["benchmark"]) for r in sweeps if r.get("benchmark")}
    names |= {str(f["benchmark"]) for f in findings if f.get("benchmark")}
    return sorted(names)


def verdicts(
    doc: CompareDocument, sweeps: Sequence[SweepRow] | None = None, findings: Sequence[FindingRow] | None = None
) -> list[Verdict]:
    """One verdict per benchmark (sorted by name): largest moves, rank stability, causes, a sentence.

    A benchmark with nothing compared and nothing attributed gets no verdict."""
    sweeps = [r for r in sweeps or [] if isinstance(r, dict)]
    findings = [f for f in findings or [] if isinstance(f, dict)]
    runs = _run_paths(doc, findings)
    set_a = (doc.get("by_set") or {}).get("a")
    tasks = {**((set_a.get("tasks") if set_a else None) or {}), **(doc.get("tasks") or {})}
    out = []
    for bench in _benchmarks(doc, sweeps, findings):
        move, metric_move, differ = _moves(doc, bench)
        rank = _rank(doc, bench)
        causes = field_causes(bench, sweeps, findings, runs)
        in_units = metric_causes(bench, sweeps, findings, runs, tasks)
        if move is None and metric_move is None and rank is None and not causes and not in_units:
            continue
        v = Verdict(
            benchmark=bench,
            largest_move=move,
            largest_metric_move=metric_move,
            rank=rank,
            causes=causes,
            metric_causes=in_units,
            metric_differs=differ,
        )
        v["dependent"] = _dependent(v)
        v["sentence"] = _sentence(doc, v)
        out.append(v)
    return out


def _dependent(v: Verdict) -> bool | None:
    """Pipeline-dependent: a score moves by MATERIAL_PP or more (between the sets or under one field), or a
    model moves ``min_shift`` ranks or more; ``None`` when nothing was measured.  An error metric's move has
    no threshold in its own unit: it is shown, not judged."""
    sizes = [abs(v["largest_move"]["pp"])] if v["largest_move"] else []
    sizes += [abs(c["pp"]) for c in v["causes"]]
    moved_rank = bool(v["rank"] and v["rank"]["movers"])
    if not sizes and v["rank"] is None:
        return None
    return max(sizes, default=0.0) >= MATERIAL_PP or moved_rank


def _task_key(bench: str, task: Any) -> str:
    """A cause's task as the compare document keys it (``bench.task``); a sweep row names the task alone."""
    text = str(task or "")
    return text if "." in text else f"{bench}.{text}"


def _short_task(key: str) -> str:
    return key.partition(".")[2] or key


def _sentence(doc: CompareDocument, v: Verdict) -> str:
    """The verdict in one sentence.  The move and the causes are measured on different things, and the
    sentence says so where that shows: the move compares the sets on the tasks both score with one
    metric (a task whose metric differs between them is named as left out), a cause changes one field
    alone on the base's outputs (on any task, those left out of the move included), so a cause can be
    larger than the move: on a task the move leaves out, or where the sets' other changes offset it."""
    a, b = str(doc.get("label_a") or "a"), str(doc.get("label_b") or "b")
    parts = []
    move = v["largest_move"]
    top = v["causes"][0] if v["causes"] else None
    left_out = [_short_task(t) for t in v["metric_differs"]]
    scope = (
        f" on the tasks both score with one metric ({', '.join(left_out)} left out: "
        f"{'its metric differs' if len(left_out) == 1 else 'their metrics differ'} between the sets)"
        if left_out
        else ""
    )
    if v["dependent"] is None:
        head = "not compared"
    elif v["dependent"]:
        head = "pipeline-dependent"
    else:
        head = f"not pipeline-dependent beyond {MATERIAL_PP:g} pp"
    if move:
        parts.append(f"{a} → {b} moves a score by up to {fmt_pp(move['pp'])} pp{scope}")
    elif top:
        parts.append(f"one field moves a score by up to {fmt_pp(top['pp'])} pp")
    rank = v["rank"]
    if rank:
        held = "the ranking changes" if rank["movers"] else "the ranking holds"
        rho = f"ρ = {fmt_corr(rank['rho'])}" if is_num(rank.get("rho")) else "ρ not computed"
        parts.append(
            f"{held} ({rho}; {len(rank['movers'])} of {rank['n_models']} models move {rank['min_shift']}+ ranks)"
        )
    if top:
        key = _task_key(v["benchmark"], top.get("task"))
        where = f" on {_short_task(key)}" if top.get("task") else ""
        why = ""
        if move and key in v["metric_differs"]:
            why = ", a task the move above leaves out"
        elif move and round(abs(top["pp"]), 1) > round(abs(move["pp"]), 1):  # as the sentence shows them
            why = ", more than the move between the sets: their other changes offset it"
        parts.append(f"largest cause {top['field']}, changed alone ({fmt_pp(top['pp'])} pp{where}{why})")
    # An error metric's move is named in the sentence when it is material: MATERIAL_PP per cent of its base.
    material = [
        m
        for m in v["metric_causes"]
        if is_num(m.get("base")) and m["base"] and abs(m["delta"] / m["base"]) >= MATERIAL_PP / 100
    ]
    if material:
        m = material[0]
        parts.append(f"{m['field']} moves {m['unit']} by {m['delta']:+.3g} (from {m['base']:.3g})")
    return f"{v['benchmark']} is {head}" + (": " + "; ".join(parts) if parts else "") + "."


def _where(row: PpMove | MetricMove | Cause | MetricCause) -> str:
    task = str(row.get("task") or "")
    model = "every model" if row.get("model") == "*" else row.get("model")  # a finding on the whole task
    return f"{model} · {task.partition('.')[2] if '.' in task else task}"


def _verdict_table(doc: CompareDocument, v: Verdict) -> str:
    rows: list[list[Any]] = []
    move = v["largest_move"]
    differ = ", ".join(t.partition(".")[2] or t for t in v["metric_differs"])
    if move:
        rows.append(
            [
                "largest move",
                f"{fmt_pp(move['pp'])} pp",
                _where(move),
                f"{100 * move['a']:.1f} → {100 * move['b']:.1f}",
                "",
            ]
        )
    metric = v["largest_metric_move"]
    if metric:
        size = f"{metric['delta']:+.3g}" if metric["delta"] else "0 (no move)"
        rows.append(
            [
                "largest move, metric unit",
                f"{size} {metric['unit']}",
                _where(metric),
                f"{metric['a']:.3f} → {metric['b']:.3f}" + (" (↓ better)" if metric["lower_is_better"] else ""),
                "",
            ]
        )
    if differ:
        rows.append(["not compared", "—", differ, "the metric differs between the sets", ""])
    rank = v["rank"]
    if rank:
        movers = ", ".join(f"{m['model']} ({m['shift']:+g})" for m in rank["movers"]) or "none"
        rows.append(
            [
                "rank stability",
                f"ρ = {fmt_corr(rank['rho'])} {fmt_ci(rank['ci95'])}",
                f"{rank['n_models']} models" + (" (few)" if rank["small_sample"] else ""),
                f"{rank['min_shift']}+ ranks: {movers}",
                "",
            ]
        )
    for k, c in enumerate(v["causes"][:TOP_CAUSES], 1):
        fix = c["field"] + (f"={value_text(c['value'])}" if c.get("value") is not None else "")
        more = f" +{c['n_moved'] - 1} more" if c["n_moved"] > 1 else ""
        rows.append(
            [
                f"cause {k}",
                f"{fmt_pp(c['pp'])} pp",
                _where(c) + more,
                fix,
                f'<code title="{esc(c["command"])}">{esc(_short(c))}</code>' if c.get("command") else "—",
            ]
        )
    for mc in v["metric_causes"][:1]:
        fix = mc["field"] + (f"={value_text(mc['value'])}" if mc.get("value") is not None else "")
        rows.append(
            [
                "cause, metric unit",
                f"{mc['delta']:+.3g} {mc['unit']}",
                _where(mc),
                fix + (" (↓ better)" if mc["lower_is_better"] else ""),
                f'<code title="{esc(mc["command"])}">{esc(_short(mc))}</code>' if mc.get("command") else "—",
            ]
        )
    if not rows:
        return ""
    return table(["", "size", "where", "field to fix / detail", "reproduce"], rows, raw_cols={4})


def causes_section(
    doc: CompareDocument, sweeps: Sequence[SweepRow] | None = None, findings: Sequence[FindingRow] | None = None
) -> str:
    """Every cause of every verdict, largest first, with the full command (its run directory spelled out)."""
    rows = [
        [
            v["benchmark"],
            c["field"] + (f"={value_text(c['value'])}" if c.get("value") is not None else ""),
            f"{fmt_pp(c['pp'])} pp",
            _where(c),
            c["n_moved"],
            c["source"],
            f"<code>{esc(c['command'])}</code>" if c.get("command") else "—",
        ]
        for v in verdicts(doc, sweeps, findings)
        for c in v["causes"]
    ]
    rows += [
        [
            v["benchmark"],
            c["field"] + (f"={value_text(c['value'])}" if c.get("value") is not None else ""),
            f"{c['delta']:+.3g} {c['unit']}",
            _where(c),
            "—",
            "re-score",
            f"<code>{esc(c['command'])}</code>" if c.get("command") else "—",
        ]
        for v in verdicts(doc, sweeps, findings)
        for c in v["metric_causes"]
    ]
    if not rows:
        return ""
    return (
        '<section id="causes"><h2>Causes, largest first</h2>'
        + table(
            [
                "benchmark",
                "field to fix",
                "largest effect",
                "where",
                f"moves ≥ {MATERIAL_PP:g} pp",
                "from",
                "reproduce",
            ],
            rows,
            raw_cols={6},
        )
        + note(
            "One row per pipeline field: its largest effect on one model x task, in percentage points "
            f"(a single-field re-score, or a diagnose finding's effect), then the error metrics' moves in their "
            f"own unit (e.g. a MAD's CVSS points, after the pp rows); 'moves ≥ {MATERIAL_PP:g} pp': how many "
            "model x task cells it moves that much. 'from': re-score = the field-by-field attribution, else "
            "the diagnose failure mode (its command re-runs diagnose, which re-scores it)."
        )
        + "</section>"
    )


def verdict_section(
    doc: CompareDocument,
    sweeps: Sequence[SweepRow] | None = None,
    findings: Sequence[FindingRow] | None = None,
    lead: str = "",
) -> str:
    """The verdict block (``<section id="verdict">``), or ``""`` when there is nothing to judge.

    ``lead``: HTML shown first inside the block (``benchaudit audit``: which model orderings survive the
    multiverse, :mod:`pytest_benchaudit.multiverse.mv_html`); with nothing to judge, the block holds it alone."""
    found = verdicts(doc, sweeps, findings)
    if not found:
        return f'<section id="verdict"><h2>Verdict per benchmark</h2>{lead}</section>' if lead else ""
    blocks = []
    for v in found:
        warn = small_sample_note((v["rank"] or {}).get("n_models"), "the rank correlation") if v["rank"] else ""
        blocks.append(
            f'<div class="verdict" data-benchmark="{esc(v["benchmark"])}">'
            f'<p class="sentence"><strong>{esc(v["sentence"])}</strong></p>'
            + _verdict_table(doc, v)
            + (f'<p class="warn">{esc(warn)}</p>' if warn else "")
            + "</div>"
        )
    a, b = str(doc.get("label_a") or "a"), str(doc.get("label_b") or "b")
    return (
        '<section id="verdict"><h2>Verdict per benchmark</h2>'
        + lead
        + "".join(blocks)
        + note(
            f"Move: {b} minus {a}, one model on one task, in percentage points (share metrics) or in the "
            "metric's own unit (error metrics, e.g. a MAD). ρ: Spearman correlation of the two benchmark "
            "rankings, 95% CI (paired bootstrap). Cause: one pipeline field and its largest effect "
            f"(single-field re-score or diagnose finding). Pipeline-dependent: a move of {MATERIAL_PP:g} pp or "
            "more, or a model moving 3+ ranks. RUN: that model's run directory (full commands under Causes); "
            "MODEL@URL: its endpoint (an upstream field needs new generations)."
        )
        + "</section>"
    )
