"""The terminal summary: one table per benchmark, benchmark scores, gate verdicts."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from pytest_benchaudit.aggregate.results import model_rankings, reason_text, variant_deltas
from pytest_benchaudit.report.gates import GateVerdict

__all__ = ["render_summary", "render_variant_deltas", "render_usage"]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _num(value: float | None, lower_is_better: bool, metric: str) -> str:
    if value is None:
        return "—"
    # Error-type metrics (MAD) are shown as they are; accuracy-type ones in percent.
    return f"{value:.3f}" if lower_is_better else _pct(value)


def _subset_notes(bench: str, rows: list[dict[str, Any]], cards: dict[str, dict[str, Any]]) -> str:
    """A line per task scored on fewer questions than it has (``-k``, ``--lf``, ``--limit``), so a
    subset never reads as the benchmark's score."""
    notes = []
    for r in rows:
        key = f"{bench}.{r['task']}" + (f"|{r['variant']}" if r["variant"] else "")
        total = (cards.get(key) or cards.get(f"{bench}.{r['task']}") or {}).get("questions_total")
        if isinstance(total, int) and r["n"] < total:
            notes.append(f"subset: {r['task']}{' | ' + r['variant'] if r['variant'] else ''} {r['model']}: "
                         f"{r['n']:,} of {total:,} questions (-k, --lf or --limit): not the full task's score")
    return "".join("\n" + line for line in dict.fromkeys(notes))


def render_summary(results: list[dict[str, Any]], benchmarks: list[dict[str, Any]],
                   cards: dict[str, dict[str, Any]], verdicts: list[GateVerdict]) -> str:
    """Human-readable summary. Scores of accuracy-type metrics are shown in percent."""
    blocks: list[str] = []
    by_bench: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_bench.setdefault(r["benchmark"], []).append(r)
    for bench, rows in by_bench.items():
        table = []
        for r in rows:
            lib = r["lower_is_better"]
            ci = r["ci95"]
            table.append([
                r["task"] + (f" | {r['variant']}" if r["variant"] else ""),
                r["model"],
                r["n"], r["n_valid"], r["n_correct"],
                _num(r["score_total"], lib, r["metric"]),
                _num(r["score_valid"], lib, r["metric"]),
                f"{_num(r['score'], lib, r['metric'])} ({r['denominator']})",
                _pct(r["invalid_rate"]),
                "—" if not ci else f"{_num(ci[0], lib, r['metric'])}–{_num(ci[1], lib, r['metric'])}",
                _pct(r["stage_rates"]["inference_ok"]),
                _pct(r["stage_rates"]["extraction_ok"]),
                ", ".join(f"{k} {v}" for k, v in sorted(r["invalid_reasons"].items())) or "",
            ])
        headers = ["task", "model", "n", "valid", "correct", "score/total %", "score/valid %",
                   "headline %", "invalid %", "95% CI", "inference ok %", "extraction ok %", "invalid reasons"]
        first = rows[0]
        card = cards.get(f"{bench}.{first['task']}", {})
        blocks.append(
            f"{bench} — pipeline '{first['pipeline']}' (card {card.get('hash', first['pipeline_hash'])}"
            + (f", overrides {card.get('overrides')}" if card.get("overrides") else "") + ")\n"
            + tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True)
            + _subset_notes(bench, rows, cards)
        )
    counterfactuals = render_variant_deltas(variant_deltas(results, cards))
    if counterfactuals:
        blocks.append(counterfactuals)
    multi = [b for b in benchmarks if len(b["tasks"]) > 1]
    if multi:
        table = [[b["benchmark"], b["model"] + (f" | {b['variant']}" if b["variant"] else ""), b["method"] or "—",
                  _pct(b["score"]), b["note"]] for b in multi]
        blocks.append("benchmark scores\n" + tabulate(table, headers=["benchmark", "model", "aggregation", "score %", "note"],
                                                       tablefmt="simple", disable_numparse=True))
    rankings = model_rankings(results)
    if rankings:
        blocks.append(_render_rankings(rankings))
    if verdicts:
        lines = [f"  {'PASS' if v.passed else 'FAIL'}  {v.gate.text}   {v.detail}" for v in verdicts]
        blocks.append("gates (they decide the exit status)\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def _rank_text(rank: float) -> str:
    """A rank as an integer (``2``), or with its fraction when tied (``1.5``)."""
    return str(int(rank)) if float(rank).is_integer() else f"{rank:g}"


def _render_rankings(rankings: dict[str, Any]) -> str:
    """Ranks per task (1 = best, direction-aware) and Kendall tau-b between tasks."""
    ranks: dict[str, dict[str, float]] = rankings["ranks"]
    models = sorted({m for by_model in ranks.values() for m in by_model})
    table = [[key, *[("—" if m not in by_model else _rank_text(by_model[m])) for m in models]]
             for key, by_model in ranks.items()]
    text = "model ranks per task (1 = best; ties share the average rank)\n" + tabulate(
        table, headers=["task", *models], tablefmt="simple", disable_numparse=True)
    if rankings["tau_b"]:
        rows = [[r["task_a"], r["task_b"], "—" if r["tau"] is None else f"{r['tau']:.3f}",
                 "—" if r["p_value"] is None else f"{r['p_value']:.3g}", r["inversions"], r["n_models"]]
                for r in rankings["tau_b"]]
        text += "\n\nKendall tau-b between tasks (each rests on few models)\n" + tabulate(
            rows, headers=["task a", "task b", "tau-b", "p", "inversions", "models"], tablefmt="simple",
            disable_numparse=True)
    return text


def _delta(row: dict[str, Any]) -> str:
    if row["delta"] is None:
        return "—"
    if row["lower_is_better"]:
        # An error metric: the change in its own unit, and whether that is better or worse.
        word = "" if row["better"] is None else (" better" if row["better"] else " worse")
        return f"{row['delta']:+.3f} {row['metric']}{word}"
    return f"{row['delta_pp']:+.1f}"


def render_variant_deltas(rows: list[dict[str, Any]]) -> str:
    """The "single-field counterfactuals" table: each variant against its base, and what moved it."""
    if not rows:
        return ""
    table = []
    for r in rows:
        lib = r["lower_is_better"]
        moved = "—" if r["moved_by"] is None else r["moved_by"]
        if r["moved_by"] in ("inference", "extraction") and r.get("invalid_reason_changes"):
            moved += f": {reason_text(r['invalid_reason_changes'], limit=2)}"
        elif r["moved_by"] in ("inference", "extraction", "scoring") and r["moved_by_detail"]:
            moved += f": {r['moved_by_detail']}"
        elif r["moved_by"] == "none" and r["same_as_base"]:
            moved += " (same as base)"
        table.append([
            f"{r['benchmark']}.{r['task']}", r["model"],
            r["variant"] + (" (= base)" if r["same_as_base"] else ""),
            f"{_num(r['score'], lib, r['metric'])} vs {_num(r['base_score'], lib, r['metric'])}",
            _delta(r),
            f"{_pct(r['invalid_rate'])} vs {_pct(r['base_invalid_rate'])}",
            moved,
        ])
    title = "single-field counterfactuals (each variant changes one field of the base pipeline)"
    headers = ["task", "model", "variant", "score vs base", "Δ pp", "invalid % vs base", "moved by"]
    if all(r["lower_is_better"] for r in rows):
        headers[4] = "Δ (metric unit)"
    elif any(r["lower_is_better"] for r in rows):
        headers[4] = "Δ pp (error metrics: own unit)"
    return title + "\n" + tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True)


def render_usage(rows: list[dict[str, Any]], prices_date: str | None = None) -> str:
    """Tokens per model and task, with the cost where the price table knows the model."""
    if not any(r["prompt_tokens"] or r["completion_tokens"] for r in rows):
        return ""
    table = [[r["model"], f"{r['benchmark']}.{r['task']}", r["items"], r["prompt_tokens"], r["completion_tokens"],
              "—" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"] for r in rows]
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    if priced and len(rows) > 1:
        table.append(["total", "", sum(r["items"] for r in rows), sum(r["prompt_tokens"] for r in rows),
                      sum(r["completion_tokens"] for r in rows), f"{sum(priced):.4f}"])
    head = f"usage (prices of {prices_date}, USD)" if prices_date else "usage (no price table: [tool.benchaudit.prices])"
    return head + "\n" + tabulate(table, headers=["model", "task", "items", "prompt tokens", "completion tokens",
                                                   "cost USD"])
