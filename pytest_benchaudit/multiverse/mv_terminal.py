"""The multiverse on the terminal: the verdicts first, then per task its space, models, fragile pairs, variance.

Also the ``--list`` view of a suite's spaces (each field, its values and why, what is left out, the
size).  Numbers are rounded for reading; ``multiverse.json`` holds them in full.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from pytest_benchaudit.multiverse.enumerate_specs import MAX_SPECS
from pytest_benchaudit.multiverse.mv_documents import MultiverseDocument, SpaceRow
from pytest_benchaudit.multiverse.mv_verdict import least_robust

__all__ = ["render_multiverse", "render_spaces"]

SHOWN_PAIRS = 10  # fragile pairs listed per benchmark (multiverse.json has every pair)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _rank(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _size(space: SpaceRow, max_specs: int) -> str:
    if space["sampled"] or space["size"] > max_specs:
        seed = space["sample_seed"]
        return f"{space['size']} specifications: a seeded random sample of {min(max_specs, space['size'])}" + (
            f" (seed {seed})" if seed is not None else ""
        )
    return f"{space['size']} specification{'s' if space['size'] != 1 else ''} (the full factorial)"


def render_spaces(spaces: Sequence[SpaceRow], max_specs: int = MAX_SPECS) -> str:
    """Each task's space: its fields and values with why, what is left out and why, its size."""
    out = []
    for space in spaces:
        out.append(f"{space['benchmark']}.{space['task']} ({space['source']} space): {_size(space, max_specs)}")
        for f in space["fields"]:
            kind = " (upstream: the runs' generation sets)" if f["upstream"] else ""
            out.append(f"  {f['field']}{kind}: {len(f['values'])} value{'s' if len(f['values']) != 1 else ''}")
            for v in f["values"]:
                out.append(f"    {v['value']!s}: {v['why']}")
        for x in space["left_out"]:
            out.append(f"  left out: {x['field']} = {x['value']!s}: {x['why']}")
        for n in space["notes"]:
            out.append(f"  note: {n}")
    return "\n".join(out)


def render_multiverse(doc: MultiverseDocument) -> str:
    """The terminal report of a multiverse document (verdicts first)."""
    lines = ["Which model orderings survive the multiverse:"]
    lines += [f"  {v['sentence']}" for v in doc["verdicts"]] or ["  (no task to report)"]
    for space in doc["spaces"]:
        key = f"{space['benchmark']}.{space['task']}"
        varied = [f"{f['field']} ({len(f['values'])})" for f in space["fields"] if len(f["values"]) > 1]
        lines += ["", f"{key}: {_size(space, doc['max_specs'])}; varied: {', '.join(varied) or 'nothing'}"]
        models = sorted(
            (r for r in doc["models"] if r["task"] == key),
            key=lambda r: (r["rank_min"] is None, r["rank_min"] or 0, r["model"]),
        )
        rows = [
            [
                r["model"],
                _num(r["median"]),
                _num(r["min"]),
                _num(r["max"]),
                f"{_rank(r['rank_min'])}-{_rank(r['rank_max'])}",
                "-" if r["rank_ci95"] is None else f"{_rank(r['rank_ci95'][0])}-{_rank(r['rank_ci95'][1])}",
            ]
            for r in models
        ]
        lines.append(
            tabulate(
                rows, headers=["model", "median", "min", "max", "rank", "rank 95% (q x spec)"], disable_numparse=True
            )
        )
        pooled = next((r for r in doc["variance"] if r["task"] == key and r["model"] is None), None)
        if pooled is not None and pooled["total_ss"] > 0:
            shares = ", ".join(f"{f['field']} {_pct(f['share'])}" for f in pooled["fields"])
            lines.append(
                f"variance across specifications (SD {pooled['sd']:.3g}): {shares}, higher-order "
                f"{_pct(pooled['higher_order'])}" + ("" if pooled["exact"] else " (estimated on a sample)")
            )
    weak = least_robust(doc["pairs"], SHOWN_PAIRS)
    if weak:
        lines += ["", "Least robust orderings (the other model better in that share of specifications):"]
        lines.append(
            tabulate(
                [
                    [
                        p["task"],
                        p["model_a"],
                        p["model_b"],
                        _pct(p["a_better"]),
                        _pct(p["b_better"]),
                        f"{_pct(p['significant_a'])}/{_pct(p['significant_b'])}",
                        ", ".join(f["field"] for f in p["flip_fields"]) or "-",
                    ]
                    for p in weak
                ],
                headers=["task", "A", "B", "A better", "B better", "significant A/B", "flipped by"],
                disable_numparse=True,
            )
        )
    for skip in doc["skipped"]:
        lines.append(f"left out: {skip['task']}: {skip['reason']}")
    return "\n".join(lines)
