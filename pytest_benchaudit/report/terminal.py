"""The terminal summary: one table per benchmark, benchmark scores, gate verdicts."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ..report.gates import GateVerdict

__all__ = ["render_summary"]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _num(value: float | None, lower_is_better: bool, metric: str) -> str:
    if value is None:
        return "—"
    # Error-type metrics (MAD) are shown as they are; accuracy-type ones in percent.
    return f"{value:.3f}" if lower_is_better else _pct(value)


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
        )
    multi = [b for b in benchmarks if len(b["tasks"]) > 1]
    if multi:
        table = [[b["benchmark"], b["model"] + (f" | {b['variant']}" if b["variant"] else ""), b["method"] or "—",
                  _pct(b["score"]), b["note"]] for b in multi]
        blocks.append("benchmark scores\n" + tabulate(table, headers=["benchmark", "model", "aggregation", "score %", "note"],
                                                       tablefmt="simple", disable_numparse=True))
    if verdicts:
        lines = [f"  {'PASS' if v.passed else 'FAIL'}  {v.gate.text}   {v.detail}" for v in verdicts]
        blocks.append("gates (they decide the exit status)\n" + "\n".join(lines))
    return "\n\n".join(blocks)
