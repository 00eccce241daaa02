"""The verdict of a benchmark's multiverse: one sentence, first in every report.

Per benchmark, over the pairs of models of all its tasks (:func:`.robustness.pair_rows`): how many
orderings hold in every specification, how many in most (the other order in fewer than a quarter),
how many flip (in a quarter or more), the least robust ones by name, and the one field whose choice
flips the most pairs (a pair counts for a field when changing that field alone reverses its order in
some specification: its ``flip_fields``).

Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pytest_benchaudit.multiverse.mv_documents import PairRow, SpaceRow, VerdictRow

__all__ = ["SHOWN", "least_robust", "verdicts"]

SHOWN = 3  # least robust pairs named in the sentence


def least_robust(pairs: Sequence[PairRow], n: int = SHOWN) -> list[PairRow]:
    """The ``n`` pairs whose order is least robust: the largest share of specifications with the other
    order, then the closest to an even split, then by task and names (a stable order)."""
    ranked = sorted(
        (p for p in pairs if p["b_better"] > 0),
        key=lambda p: (-p["b_better"], abs(p["a_better"] - p["b_better"]), p["task"], p["model_a"], p["model_b"]),
    )
    return ranked[:n]


def _short(task: str) -> str:
    return task.split(".", 1)[1] if "." in task else task


def _pair_text(p: PairRow) -> str:
    return (
        f"{_short(p['task'])}: {p['model_a']} over {p['model_b']} in {p['a_better']:.0%}, reversed in "
        f"{p['b_better']:.0%} of {p['n_specs']} specifications"
    )


def verdicts(spaces: Sequence[SpaceRow], pairs: Sequence[PairRow]) -> list[VerdictRow]:
    """One :class:`~.mv_documents.VerdictRow` per benchmark of ``spaces`` (sorted by name)."""
    out: list[VerdictRow] = []
    for bench in sorted({s["benchmark"] for s in spaces}):
        mine = [s for s in spaces if s["benchmark"] == bench]
        keys = {f"{bench}.{s['task']}" for s in mine}
        rows = [p for p in pairs if p["task"] in keys]
        counts = Counter(p["order"] for p in rows)
        fields = Counter(f["field"] for p in rows for f in p["flip_fields"])
        top = min(fields.items(), key=lambda x: (-x[1], x[0])) if fields else None
        sizes = sorted({s["enumerated"] for s in mine})
        span = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        head = f"{bench} ({len(mine)} task{'s' if len(mine) != 1 else ''}, {span} specifications each)"
        if not rows:
            sentence = f"{head}: fewer than two models on every task, no ordering to test."
        else:
            parts = [
                f"{counts['holds']} of {len(rows)} model orderings hold in every specification",
                f"{counts['most']} hold in most",
                f"{counts['flips']} flip in a quarter or more",
            ]
            if counts["tied"]:
                parts.append(f"{counts['tied']} tie in every specification")
            sentence = f"{head}: " + ", ".join(parts)
            if top:
                sentence += (
                    f"; the field whose choice flips the most pairs is {top[0]} ({top[1]} "
                    f"pair{'s' if top[1] != 1 else ''})"
                )
            weak = least_robust(rows)
            if weak:
                sentence += ". Least robust: " + "; ".join(_pair_text(p) for p in weak)
            sentence += "."
        out.append(
            {
                "benchmark": bench,
                "sentence": sentence,
                "tasks": sorted(s["task"] for s in mine),
                "pairs": len(rows),
                "holds": counts["holds"],
                "most": counts["most"],
                "flips": counts["flips"],
                "tied": counts["tied"],
                "top_field": top[0] if top else None,
                "top_field_pairs": top[1] if top else 0,
            }
        )
    return out
