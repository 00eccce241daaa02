"""The terminal summary: one table per benchmark, benchmark scores, gate verdicts."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from tabulate import tabulate

from pytest_benchaudit.aggregate.intervals import METHOD_TEXT
from pytest_benchaudit.aggregate.results import model_rankings, reason_text, variant_deltas
from pytest_benchaudit.aggregate.summary_documents import (
    BenchmarkScore,
    ModelRankings,
    TaskResult,
    UsageRow,
    VariantDelta,
)
from pytest_benchaudit.common.safe_text import printable
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordRow
from pytest_benchaudit.report.gates import GateVerdict
from pytest_benchaudit.scoring.evaluate import failure_message
from pytest_benchaudit.scoring.metrics import invalid_credit_line

if TYPE_CHECKING:  # audit.audit_documents imports the audit package (scipy): the summary's start-up does without it
    from pytest_benchaudit.audit.audit_documents import UpstreamAttributionRow

__all__ = [
    "render_summary",
    "render_variant_deltas",
    "render_layer_attribution",
    "render_answers",
    "AnswerList",
    "render_usage",
    "fit_columns",
    "metric_unit",
    "interval_legend",
    "shown_interval",
    "CLUSTERED_MARK",
    "WIDTH",
]


WIDTH = 120  # every line of the summary fits this many columns

# Error-type metrics (lower is better) are printed in their own unit, never as a percentage.
_UNITS = {"cvss_abs_diff_cti": "MAD", "cvss_abs_diff": "MAD", "cvss_abs_error": "MAE"}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _num(value: float | None, lower_is_better: bool, metric: str) -> str:
    if value is None:
        return "—"
    # Error-type metrics (MAD) are shown as they are; accuracy-type ones in percent.
    return f"{value:.3f}" if lower_is_better else _pct(value)


def _subset_notes(bench: str, rows: list[TaskResult], cards: Cards) -> str:
    """A line per task scored on fewer questions than it has (``-k``, ``--lf``, ``--limit``), so a
    subset never reads as the benchmark's score."""
    notes = []
    for r in rows:
        key = f"{bench}.{r['task']}" + (f"|{r['variant']}" if r["variant"] else "")
        card = cards.get(key) or cards.get(f"{bench}.{r['task']}")
        total = card.get("questions_total") if card else None
        asked = r.get("n_questions") or r["n"]  # with repeats, n counts records (questions x K)
        if isinstance(total, int) and asked < total:
            notes.append(
                f"subset: {r['task']}{' | ' + r['variant'] if r['variant'] else ''} {r['model']}: "
                f"{asked:,} of {total:,} questions (-k, --lf or --limit): not the full task's score"
            )
    return "".join("\n" + line for line in dict.fromkeys(notes))


def metric_unit(metric: str, lower_is_better: bool) -> str:
    """The unit a score of ``metric`` is printed in: ``%``, or the error metric's own (``MAD``)."""
    return _UNITS.get(metric, metric) if lower_is_better else "%"


def _value(value: float | None, lower_is_better: bool, metric: str) -> str:
    """A score with its unit: ``12.4%``, ``1.234 MAD``."""
    if value is None:
        return "—"
    if lower_is_better:
        return f"{value:.3f} {metric_unit(metric, True)}"
    return f"{100 * value:.1f}%"


CLUSTERED_MARK = "‡"  # an interval clustered by aggregation.by (the legend under the tables says so)


def shown_interval(r: TaskResult) -> tuple[list[float] | None, bool]:
    """The 95% interval the tables show for a row, and whether it is clustered: the clustered one when the
    task groups its questions (``aggregation.by``), which contains the plain one (aggregate/intervals.py)
    and is the one a ``ci_low`` / ``ci_high`` gate reads; else ``ci95``."""
    if r.get("clustered_by") and r.get("n_groups") is not None:
        return r.get("ci95_clustered"), True
    if "clustered_by" not in r and r.get("ci95_clustered"):  # a row from before the field: its clustered one
        return r.get("ci95_clustered"), True
    return r.get("ci95"), False


def _interval_cell(r: TaskResult, num: Callable[[float], str]) -> str:
    ci, clustered = shown_interval(r)
    return ("—" if not ci else f"{num(ci[0])}–{num(ci[1])}") + (CLUSTERED_MARK if clustered else "")


def interval_legend(rows: Iterable[TaskResult]) -> str:
    """What the "95% CI" column holds for ``rows``, in words: the methods of the plain intervals shown,
    and per grouping the clustered ones (``‡``).  Empty without an interval."""
    plain: dict[str, None] = {}
    grouped: dict[str, dict[str, None]] = {}
    for r in rows:
        ci, clustered = shown_interval(r)
        if clustered:
            groups = r.get("n_groups") or 0
            method = (
                METHOD_TEXT.get(str(r.get("ci95_clustered_method")), "as recorded")
                if ci
                else "none: fewer than 2 groups"
                if groups < 2
                else "none: no spread to measure"
            )
            key = f"{r.get('clustered_by')} ({r.get('n_groups')} groups)"
            grouped.setdefault(key, {})[method] = None
        elif ci:
            plain[METHOD_TEXT.get(str(r.get("ci95_method")), "as recorded")] = None
    parts = []
    if plain:
        parts.append("over the questions as independent: " + ", ".join(plain))
    for key, methods in grouped.items():
        parts.append(
            f"{CLUSTERED_MARK} clustered by {key}: "
            + ", ".join(methods)
            + ", t with G-1 df, never narrower than the plain interval"
        )
    return "" if not parts else "95% CI " + "; ".join(parts) + " (docs/statistics.md)"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def fit_columns(rows: list[list[Any]], headers: list[str], keep: int = 1, width: int = WIDTH) -> str:
    """A table whose lines fit ``width``: when too wide, its columns after the first ``keep``
    are split over several tables, each repeating the ``keep`` key columns."""
    text = _table(rows, headers)
    if max(map(len, text.splitlines()), default=0) <= width or len(headers) <= keep + 1:
        return text
    chunks: list[list[int]] = []
    current: list[int] = []
    for col in range(keep, len(headers)):
        trial = list(range(keep)) + current + [col]
        part = _table([[r[i] for i in trial] for r in rows], [headers[i] for i in trial])
        if current and max(map(len, part.splitlines())) > width:
            chunks.append(current)
            current = [col]
        else:
            current.append(col)
    chunks.append(current)
    out = []
    for chunk in chunks:
        cols = list(range(keep)) + chunk
        out.append(_table([[r[i] for i in cols] for r in rows], [headers[i] for i in cols]))
    return "\n\n".join(out)


def render_summary(
    results: list[TaskResult], benchmarks: list[BenchmarkScore], cards: Cards, verdicts: list[GateVerdict]
) -> str:
    """Human-readable summary, every line at most :data:`WIDTH` columns.

    Per benchmark: one row per task x model (x variant) with the score over all items and over
    valid answers (``*`` marks the headline, the pipeline's ``scoring.denominator``), the invalid
    rate and the headline's 95% CI; accuracy-type metrics in percent, error metrics (MAD) in
    their own unit.  Rows with invalid answers get a second table: where they failed (the
    per-stage rates) and why (the invalid reasons).
    """
    blocks: list[str] = []
    by_bench: dict[str, list[TaskResult]] = {}
    layered = _is_layered(cards)  # --pipelines: every row names its layer, the base's too
    for r in results:
        by_bench.setdefault(r["benchmark"], []).append(r)
    for bench, rows in by_bench.items():
        table: list[list[str]] = []
        invalid_rows: list[list[str]] = []
        for r in rows:
            lib, metric = r["lower_is_better"], r["metric"]
            total, valid = _value(r["score_total"], lib, metric), _value(r["score_valid"], lib, metric)
            if r["denominator"] == "valid":
                valid += "*"
            else:
                total += "*"
            name = _cut(
                r["task"] + (f" | {r['pipeline']}" if layered else f" | {r['variant']}" if r["variant"] else ""), 28
            )
            model = _cut(r["model"], 20)
            table.append(
                [
                    name,
                    model,
                    f"{r['n']:,}",
                    f"{r['n_valid']:,}",
                    f"{r['n_correct']:,}",
                    total,
                    valid,
                    _value(r["invalid_rate"], False, ""),
                    _interval_cell(r, partial(_num, lower_is_better=lib, metric=metric)),
                ]
            )
            if r["invalid_rate"]:
                invalid_rows.append(
                    [
                        name,
                        model,
                        _pct(r["stage_rates"]["inference_ok"]),
                        _pct(r["stage_rates"]["extraction_ok"]),
                        _cut(", ".join(f"{k} {v}" for k, v in sorted(r["invalid_reasons"].items())), 56),
                    ]
                )
        headers = ["task", "model", "n", "valid", "correct", "score/all", "score/valid", "invalid", "95% CI"]
        first = rows[0]
        card = cards.get(f"{bench}.{first['task']}")
        card_overrides = card.get("overrides") if card else None
        overrides = f", overrides {card_overrides}" if card_overrides else ""
        card_hash = card.get("hash", first["pipeline_hash"]) if card else first["pipeline_hash"]
        layers = list(dict.fromkeys(r["pipeline"] for r in rows))
        title = _cut(
            f"{bench} — pipeline '{first['pipeline']}' (card {card_hash}" + overrides + ")"
            if not layered
            else f"{bench} — pipelines {', '.join(repr(x) for x in layers)} (one row per layer)" + overrides,
            WIDTH,
        )
        text = title + "\n" + fit_columns(table, headers, keep=2) + _subset_notes(bench, rows, cards)
        if invalid_rows:
            text += "\n\n" + fit_columns(
                invalid_rows, ["task", "model", "inference ok %", "extraction ok %", "invalid reasons"], keep=2
            )
        text += _render_repeats(rows, layered)
        blocks.append(text)
    if by_bench:
        legend = interval_legend(results)
        blocks.append(
            "* headline (the pipeline's scoring.denominator); error metrics (MAD, MAE) in their own "
            "unit, lower is better\n"
            + textwrap.fill(invalid_credit_line(results), WIDTH)
            + ("\n" + textwrap.fill(legend, WIDTH) if legend else "")
        )
    counterfactuals = render_variant_deltas(variant_deltas(results, cards))
    if counterfactuals:
        blocks.append(counterfactuals)
    multi = [b for b in benchmarks if len(b["tasks"]) > 1]
    if multi:
        table = [
            [
                b["benchmark"],
                _cut(b["model"] + (f" | {b['variant']}" if b["variant"] else ""), 36),
                b["method"] or "—",
                _pct(b["score"]),
                _cut(b["note"] or "", 50),
            ]
            for b in multi
        ]
        blocks.append(
            "benchmark scores\n" + fit_columns(table, ["benchmark", "model", "aggregation", "score %", "note"])
        )
    rankings = model_rankings(results)
    if rankings:
        blocks.append(_render_rankings(rankings))
    if verdicts:
        lines = [
            textwrap.fill(
                f"  {'PASS' if v.passed else 'FAIL'}  {v.gate.text}   {v.detail}", WIDTH, subsequent_indent=" " * 8
            )
            for v in verdicts
        ]
        blocks.append("gates (they decide the exit status)\n" + "\n".join(lines))
    return "\n\n".join(b for b in blocks if b)


def _render_repeats(rows: list[TaskResult], layered: bool) -> str:
    """The error bars of rows whose questions were asked more than once (inference.repeats), as a
    table of their own under the benchmark's (docs/statistics.md): the reducer, the headline's
    standard error over questions (clustered by aggregation.by when set), the SD of the headline
    across repeats, and the share of questions whose verdicts all agree.  Empty when none was."""
    table: list[list[str]] = []
    for r in rows:
        if r.get("repeats", 1) <= 1:
            continue
        lib, metric = r["lower_is_better"], r["metric"]

        def num(v: float | None) -> str:
            return "—" if v is None else f"{v:.3f}" if lib else f"{100 * v:.1f}"  # noqa: B023 - called within this iteration

        name = _cut(
            r["task"] + (f" | {r['pipeline']}" if layered else f" | {r['variant']}" if r["variant"] else ""), 28
        )
        agreement = r.get("retest_agreement")
        table.append(
            [
                name,
                _cut(r["model"], 20),
                f"{r.get('n_questions') or 0:,}×{r['repeats']}",
                r.get("reducer", "mean"),
                _value(r["score"], lib, metric),
                num(r.get("se")),
                num(r.get("se_clustered")),
                num(r.get("sampling_sd")),
                "—" if agreement is None else f"{100 * agreement:.1f}%",
                _interval_cell(r, num),
            ]
        )
    if not table:
        return ""
    unit = "pp" if not rows[0]["lower_is_better"] else metric_unit(rows[0]["metric"], True)
    title = textwrap.fill(
        "repeats: headline = the reducer per question, then the mean; se over questions; sampling "
        "sd = one SD of the headline across repeats (about 2 runs in 3 land within ±1 sd of the "
        f"mean) ({unit}); 95% CI as in the table above",
        WIDTH,
    )
    return (
        "\n\n"
        + title
        + "\n"
        + fit_columns(
            table,
            ["task", "model", "q×K", "reducer", "score", "se", "se clust", "sampling sd", "retest agree", "95% CI"],
            keep=2,
        )
    )


def _rank_text(rank: float) -> str:
    """A rank as an integer (``2``), or with its fraction when tied (``1.5``)."""
    return str(int(rank)) if float(rank).is_integer() else f"{rank:g}"


def _render_rankings(rankings: ModelRankings) -> str:
    """Ranks per task (1 = best, direction-aware) and Kendall tau-b between tasks."""
    ranks = rankings["ranks"]
    models = sorted({m for by_model in ranks.values() for m in by_model})
    table = [
        [key, *[("—" if m not in by_model else _rank_text(by_model[m])) for m in models]]
        for key, by_model in ranks.items()
    ]
    text = "model ranks per task (1 = best; ties share the average rank)\n" + fit_columns(
        table, ["task", *[_cut(m, 16) for m in models]]
    )
    if rankings["tau_b"]:
        rows: list[list[Any]] = [
            [
                r["task_a"],
                r["task_b"],
                "—" if r["tau"] is None else f"{r['tau']:.3f}",
                "—" if r["p_value"] is None else f"{r['p_value']:.3g}",
                r["inversions"],
                r["n_models"],
            ]
            for r in rankings["tau_b"]
        ]
        text += "\n\nKendall tau-b between tasks (each rests on few models)\n" + fit_columns(
            rows, ["task a", "task b", "tau-b", "p", "inversions", "models"], keep=2
        )
    return text


def _delta(row: VariantDelta) -> str:
    if row["delta"] is None:
        return "—"
    if row["lower_is_better"]:
        # An error metric: the change in its own unit, and whether that is better or worse.
        word = "" if row["better"] is None else (" better" if row["better"] else " worse")
        return f"{row['delta']:+.3f} {metric_unit(row['metric'], True)}{word}"
    return f"{row['delta_pp']:+.1f}"


def _is_layered(cards: Cards) -> bool:
    """True for a ``--pipelines`` run: some card is a layer variant of the base layer."""
    return any(_variant_kind(c) == "layer" for c in cards.values() if isinstance(c, dict))


def _variant_kind(card: PipelineCard) -> str | None:
    variant = card.get("variant")
    return variant.get("kind") if variant else None


def render_variant_deltas(rows: list[VariantDelta]) -> str:
    """The "single-field counterfactuals" table: each variant against its base, and what moved it."""
    if not rows:
        return ""
    table: list[list[str]] = []
    for r in rows:
        lib = r["lower_is_better"]
        moved = "—" if r["moved_by"] is None else r["moved_by"]
        changes = r.get("invalid_reason_changes")
        if r["moved_by"] in ("inference", "extraction") and changes:
            moved += f": {reason_text(changes, limit=2)}"
        elif r["moved_by"] in ("inference", "extraction", "scoring") and r["moved_by_detail"]:
            moved += f": {r['moved_by_detail']}"
        elif r["moved_by"] == "none" and r["same_as_base"]:
            moved += " (same as base)"
        table.append(
            [
                _cut(f"{r['benchmark']}.{r['task']}", 24),
                _cut(r["model"], 16),
                _cut(r["variant"] + (" (= base)" if r["same_as_base"] else ""), 28),
                f"{_num(r['score'], lib, r['metric'])} vs {_num(r['base_score'], lib, r['metric'])}",
                _delta(r),
                f"{_pct(r['invalid_rate'])} vs {_pct(r['base_invalid_rate'])}",
                _cut(moved, 34),
            ]
        )
    title = "single-field counterfactuals (each variant changes one field of the base pipeline)"
    if all(r.get("kind") == "layer" for r in rows):
        title = "layers against the base layer (--pipelines: the first layer listed is the base)"
    headers = ["task", "model", "variant", "score vs base", "Δ pp", "invalid % vs base", "moved by"]
    if all(r["lower_is_better"] for r in rows):
        headers[4] = "Δ (metric unit)"
    elif any(r["lower_is_better"] for r in rows):
        headers[4] = "Δ pp (error metrics: own unit)"
    return title + "\n" + fit_columns(table, headers, keep=3)


def render_usage(rows: list[UsageRow], prices_date: str | None = None) -> str:
    """Tokens per model and task, with the cost where the price table knows the model."""
    if not any(r["prompt_tokens"] or r["completion_tokens"] for r in rows):
        return ""
    table: list[list[Any]] = [
        [
            r["model"],
            f"{r['benchmark']}.{r['task']}",
            r["items"],
            r["prompt_tokens"],
            r["completion_tokens"],
            "—" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}",
        ]
        for r in rows
    ]
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    if priced and len(rows) > 1:
        table.append(
            [
                "total",
                "",
                sum(r["items"] for r in rows),
                sum(r["prompt_tokens"] for r in rows),
                sum(r["completion_tokens"] for r in rows),
                f"{sum(priced):.4f}",
            ]
        )
    head = (
        f"usage (prices of {prices_date}, USD)" if prices_date else "usage (no price table: [tool.benchaudit.prices])"
    )
    return (
        head
        + "\n"
        + tabulate(table, headers=["model", "task", "items", "prompt tokens", "completion tokens", "cost USD"])
    )


class AnswerList:
    """:func:`render_answers`, record by record: :meth:`add` each record in run order, then
    :meth:`render`.  Keeps, per task x model (x variant), a count and the first ``limit`` lines
    (every line when ``limit`` is ``None``), never the records."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.groups: dict[tuple[str, str, str, str], list[str]] = {}
        self.counts: dict[tuple[str, str, str, str], int] = {}

    def add(self, r: RecordRow) -> None:
        if r.get("correct") or self.limit == 0:
            return
        key = (str(r.get("benchmark")), str(r.get("task")), str(r.get("model")), str(r.get("variant") or ""))
        self.counts[key] = self.counts.get(key, 0) + 1
        shown = self.groups.setdefault(key, [])
        if self.limit is None or len(shown) < self.limit:
            # One line each, whatever the answer holds: its control characters are shown escaped.
            # A question asked K times (inference.repeats) lists each repeat apart: name which one.
            label = f"{r.get('question_id')} #{r['repeat']}" if r.get("repeat") else str(r.get("question_id"))
            shown.append(_cut(printable(f"  {label}  {failure_message(r)}"), WIDTH))

    def render(self, total_budget: int | None = None) -> str:
        limit, groups, counts = self.limit, self.groups, self.counts
        if limit == 0 or not groups:
            return ""
        if limit is not None and total_budget is not None and len(groups) * limit > total_budget:
            limit = max(1, total_budget // len(groups))
        title = (
            "every wrong or invalid answer"
            if limit is None
            else f"first wrong or invalid answers per task (up to {limit}; --show-answers all or -v for every one)"
        )
        lines = [title]
        # Base pipelines first, then their variants, each in run order.
        for key, shown in sorted(groups.items(), key=lambda kv: (kv[0][:3], kv[0][3] != "")):
            bench, task, model, variant = key
            shown = shown if limit is None else shown[:limit]
            more = counts[key] - len(shown)
            tail = f" ({more:,} more in records.jsonl)" if more > 0 else ""
            lines.append(
                f"{bench}.{task} [{model}{'|' + variant if variant else ''}]: {counts[key]:,} not correct{tail}"
            )
            lines.extend(shown)
        return "\n".join(lines)


def render_answers(records: Iterable[RecordRow], limit: int | None, total_budget: int | None = None) -> str:
    """The first ``limit`` wrong or invalid answers of each task x model (x variant), one line each.

    ``limit=None`` lists every one.  With ``total_budget`` (the default listing), a run with many
    groups lists fewer per group, so that about ``total_budget`` answers are listed in all (at
    least one per group).  Each group's header says how many were not correct and how many are
    not listed.  Lines are cut to :data:`WIDTH`; records come in run order (see :class:`AnswerList`).
    """
    answers = AnswerList(limit)
    for r in records:
        answers.add(r)
    return answers.render(total_budget)


def render_layer_attribution(rows: list[UpstreamAttributionRow], base: str, target: str) -> str:
    """``benchaudit audit`` on a ``--pipelines`` run: per task x model, base -> target split into the
    downstream part (re-scored) and the upstream part (regenerated; the differing fields together)."""
    if not rows:
        return ""

    def part(r: UpstreamAttributionRow, name: Literal["downstream", "upstream", "total"]) -> str:
        value, pp = (
            (r["downstream_delta"], r["downstream_pp"])
            if name == "downstream"
            else (r["upstream_delta"], r["upstream_pp"])
            if name == "upstream"
            else (r["total_delta"], r["total_pp"])
        )
        if value is None:
            return "—"
        return f"{value:+.3f}" if r["lower_is_better"] else f"{pp:+.1f}"

    table = [
        [
            _cut(r["task"], 28),
            _cut(r["model"], 16),
            f"{_num(r['base_score'], r['lower_is_better'], r['metric'])} -> "
            f"{_num(r['target_score'], r['lower_is_better'], r['metric'])}",
            part(r, "downstream"),
            part(r, "upstream"),
            part(r, "total"),
            _cut(
                ", ".join(r["upstream_fields"])
                or ("— (no base-layer result)" if r["base_score"] is None else "none (same generations)"),
                40,
            ),
        ]
        for r in rows
    ]
    return (
        f"From {base} to {target}: downstream fields re-scored from the {base} outputs, upstream fields\n"
        f"from the {target} generations (pp; error metrics in their own unit)\n"
        + fit_columns(
            table, ["task", "model", "score", "downstream", "upstream", "total", "upstream fields (together)"], keep=2
        )
    )
