"""BA06 of ``diagnose``: a task's ranking whose neighbours are not significantly apart.

One ranking per benchmark x task x pipeline, across the runs given (a model in two runs counts
with its first): the models with a headline, best first.  Each two neighbours are compared on the
questions both answered, with the rows of ``compare.json``'s ``paired``
(:mod:`pytest_benchaudit.compare.paired_rows`: per-question score = the card's reducer over the
repeats; exact McNemar on 0/1 scores, else paired t; Holm over all the pairs of the task).  One
finding per task lists every neighbouring pair with ``p_holm >= 0.05``: a ranking of twelve models
on 100 questions may have ten such pairs, and ten findings would say one thing ten times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.compare.paired_rows import PairedRow, adjacent_ties, model_answers, paired_rows, task_mde80
from pytest_benchaudit.diagnose.core import Effect, Finding, Group, make_finding

__all__ = ["check_order", "SHOWN_PAIRS"]

SHOWN_PAIRS = 3  # pairs named in the sentence; every one is in evidence.pairs


def check_order(groups: Sequence[Group]) -> list[Finding]:
    """BA06 findings: one per benchmark x task x pipeline whose ranking has a neighbouring pair
    that is not significant (a pair with fewer than two common questions is not testable: left out)."""
    tasks: dict[tuple[str, str, str], dict[str, Group]] = {}
    for group in groups:
        tasks.setdefault((group.benchmark, group.task, group.pipeline), {}).setdefault(group.model, group)
    findings: list[Finding] = []
    for (bench, task, pipeline), by_model in tasks.items():
        scored = {m: r for m, r in ((m, g.result()) for m, g in by_model.items()) if r.get("score") is not None}
        directions = {bool(r.get("lower_is_better")) for r in scored.values()}
        if len(scored) < 2 or len(directions) != 1:
            continue  # nothing to order, or a direction that differs between models: no ranking
        lib = directions.pop()
        scores = {m: float(score) for m, r in scored.items() if (score := r["score"]) is not None}
        answers = [
            model_answers(m, scores[m], by_model[m].records, by_model[m].fields, str(r.get("denominator")), lib)
            for m, r in sorted(scored.items())
        ]
        rows = paired_rows(f"{bench}.{task}", answers, lib)
        by_pair = {(r["model_a"], r["model_b"]): r for r in rows}
        ties = [by_pair[(t["better"], t["worse"])] for t in adjacent_ties(rows, answers, lib)]
        ties = [r for r in ties if r["p_value"] is not None and r["ci95"] is not None and r["diff"] is not None]
        if ties:
            runs = sorted({by_model[m].run for r in ties for m in (r["model_a"], r["model_b"])})
            findings.append(_finding(bench, task, pipeline, ties, rows, scored, scores, runs))
    return findings


def _finding(
    bench: str,
    task: str,
    pipeline: str,
    ties: list[PairedRow],
    rows: list[PairedRow],
    scored: Mapping[str, TaskResult],
    scores: Mapping[str, float],
    runs: list[str],
) -> Finding:
    lib = bool(ties[0]["lower_is_better"])
    metric = next(iter(scored.values())).get("metric") or "metric"
    unit = f" {metric} units" if lib else " pp"

    def fmt(x: float) -> str:
        return f"{x:.3f}" if lib else f"{100 * x:.1f}"

    def pair_text(r: PairedRow) -> str:
        lo, hi = r["ci95"] or (0.0, 0.0)
        diff = float(r["diff"] or 0.0)
        why = "CI contains 0" if lo <= 0 <= hi else f"CI excludes 0, p_holm {r['p_holm']:.2g}"
        return (
            f"{r['model_a']} above {r['model_b']} ({fmt(scores[r['model_a']])} vs "
            f"{fmt(scores[r['model_b']])}; paired {'+' if diff > 0 else ''}{fmt(diff)}{unit} on "
            f"{r['n']} questions, 95% CI [{fmt(lo)}, {fmt(hi)}], {r['test']} p = {r['p_value']:.2g}, {why})"
        )

    n_models = len(scored)
    shown = "; ".join(pair_text(r) for r in ties[:SHOWN_PAIRS])
    more = f"; and {len(ties) - SHOWN_PAIRS} more (evidence.pairs)" if len(ties) > SHOWN_PAIRS else ""
    hyp = (
        f"{len(ties)} of the {n_models - 1} neighbouring pairs in the ranking of {n_models} models "
        f"{'is' if len(ties) == 1 else 'are'} not "
        f"significantly apart on the questions both answered (Holm over the task's {len(rows)} pairs, "
        f"p_holm >= 0.05): {shown}{more}; so these orders may be within the noise of the questions asked "
        f"and may flip on another sample."
    )
    mde = task_mde80(rows)
    effect = Effect(
        "none",
        None,
        "needs more questions or repeats; no order to correct"
        + (
            f": the task's pairs detect a difference of {fmt(mde['mde80'])}{unit} with 80% power"
            if mde and mde["mde80"] is not None
            else ""
        ),
    )
    evidence = {
        "n_models": n_models,
        "n_neighbours": n_models - 1,
        "n_ties": len(ties),
        "n_pairs": len(rows),
        "mde80": mde["mde80"] if mde else None,
        "pairs": [
            {k: r.get(k) for k in ("model_a", "model_b", "n", "diff", "ci95", "p_value", "p_holm", "test", "mde80")}
            for r in ties
        ],
        "repeats": sorted({int(r.get("repeats") or 1) for r in scored.values()}),
        "runs": runs,
    }
    finding = make_finding(None, "BA06-order-within-noise", hyp, evidence, effect, benchmark=bench, task=task)
    return finding.model_copy(update={"pipeline": pipeline})
