"""BA07 of ``diagnose``: a pair of models whose order flips across the task's defensible pipelines.

The multiverse (:mod:`pytest_benchaudit.multiverse`, ``benchaudit multiverse``) scores each task under
every specification of its space; a pair of models whose order the other way round holds in at least
a quarter of the specifications is not a conclusion of the benchmark but of one pipeline.  The check
reads the multiverse's pair rows, handed in as :class:`OrderFlip` (the multiverse is computed above
this package: ``benchaudit diagnose`` and ``benchaudit audit`` compute it and pass the pairs on), and
makes one finding per task (model ``*``) listing every such pair and the fields whose change alone
reverses it; the finding's field is the one that reverses the most of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_benchaudit.diagnose.core import Effect, Finding, make_finding

__all__ = ["FLIP_SHARE", "OrderFlip", "check_flips"]

FLIP_SHARE = 0.25  # the share of specifications with the other order from which a pair is a finding
SHOWN_PAIRS = 3


@dataclass(frozen=True)
class OrderFlip:
    """A pair of models on a task across its specifications (a multiverse pair row): ``model_a`` is the
    better in more of them; ``fields`` the fields whose change alone reverses the order, with the share of
    such changes that do."""

    benchmark: str
    task: str
    model_a: str
    model_b: str
    n_specs: int
    a_better: float
    b_better: float
    significant_a: float
    significant_b: float
    fields: tuple[tuple[str, float], ...]


def check_flips(pairs: Sequence[OrderFlip]) -> list[Finding]:
    """BA07 findings: one per benchmark x task with a pair whose other order holds in >= :data:`FLIP_SHARE`
    of the specifications."""
    tasks: dict[tuple[str, str], list[OrderFlip]] = {}
    for p in pairs:
        if p.n_specs and p.b_better >= FLIP_SHARE:
            tasks.setdefault((p.benchmark, p.task), []).append(p)
    return [_finding(bench, task, flips) for (bench, task), flips in sorted(tasks.items())]


def _finding(bench: str, task: str, flips: list[OrderFlip]) -> Finding:
    flips = sorted(flips, key=lambda p: (-p.b_better, p.model_a, p.model_b))
    counts = Counter(f for p in flips for f, _share in p.fields)
    top = min(counts.items(), key=lambda x: (-x[1], x[0]))[0] if counts else None

    def text(p: OrderFlip) -> str:
        by = ", ".join(f for f, _s in p.fields) or "several fields together"
        return (
            f"{p.model_a} above {p.model_b} in {p.a_better:.0%} of {p.n_specs} specifications, below in "
            f"{p.b_better:.0%} (reversed by {by})"
        )

    shown = "; ".join(text(p) for p in flips[:SHOWN_PAIRS])
    more = f"; and {len(flips) - SHOWN_PAIRS} more (evidence.pairs)" if len(flips) > SHOWN_PAIRS else ""
    hyp = (
        f"{len(flips)} pair{'s' if len(flips) != 1 else ''} of models change{'s' if len(flips) == 1 else ''} "
        f"order across the task's defensible pipelines: {shown}{more}; which model is better is then a "
        f"choice of pipeline{f', above all of {top}' if top else ''}, not a finding of the benchmark."
    )
    evidence = {
        "n_pairs": len(flips),
        "top_field": top,
        "field_counts": dict(sorted(counts.items())),
        "pairs": [
            {
                "model_a": p.model_a,
                "model_b": p.model_b,
                "n_specs": p.n_specs,
                "a_better": p.a_better,
                "b_better": p.b_better,
                "significant_a": p.significant_a,
                "significant_b": p.significant_b,
                "fields": [{"field": f, "share": s} for f, s in p.fields],
            }
            for p in flips
        ],
    }
    effect = Effect(
        "none",
        None,
        "no single score to correct: report the order under each defensible pipeline "
        "(benchaudit multiverse), or fix the field in the benchmark's card",
    )
    return make_finding(
        None,
        "BA07-order-flips-across-specifications",
        hyp,
        evidence,
        effect,
        benchmark=bench,
        task=task,
        field_name=top,
    )
