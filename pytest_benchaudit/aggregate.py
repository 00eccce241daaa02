"""Aggregation: records -> per task/model/variant results and per-benchmark scores.

Both denominators are always computed (``score_total`` over every item,
``score_valid`` over items with a readable answer); the pipeline's
``scoring.denominator`` only decides which one is the headline ``score``.
Stage rates are cumulative pass rates: the share of items that got through
inference, through extraction (valid), and that were correct.

Pure: no pytest, no I/O.  Works on record dicts, so it serves pytest runs and
offline re-scoring alike.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable

from .pipeline import is_unspecified
from .scoring import METRIC_INFO

__all__ = ["summarize", "benchmark_scores", "confidence_interval", "group_key"]


def group_key(rec: dict[str, Any]) -> tuple[str, str, str, str]:
    return (rec["benchmark"], rec["task"], rec["model"], rec.get("variant", ""))


def confidence_interval(values: list[float], binary: bool) -> list[float] | None:
    """95% interval for a mean: Wilson for 0/1 values, Student t otherwise (scipy)."""
    from scipy import stats  # imported here: scipy costs ~1 s of start-up for every pytest run

    n = len(values)
    if n == 0:
        return None
    if binary:
        k = int(round(sum(values)))
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        return [round(ci.low, 6), round(ci.high, 6)]
    mean = sum(values) / n
    if n < 2:
        return [mean, mean]
    sem = stats.sem(values)
    if sem == 0 or math.isnan(sem):
        return [mean, mean]
    low, high = stats.t.interval(0.95, n - 1, loc=mean, scale=sem)
    return [round(float(low), 6), round(float(high), 6)]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _result(recs: list[dict[str, Any]], card: dict[str, Any] | None) -> dict[str, Any]:
    first = recs[0]
    fields = (card or {}).get("fields", {})
    metric = fields.get("scoring.metric", first.get("metric", ""))
    info = METRIC_INFO.get(metric)
    denominator = fields.get("scoring.denominator", "unspecified")
    n = len(recs)
    valid = [r for r in recs if r["valid"]]
    all_scores = [float(r["score"]) for r in recs]
    valid_scores = [float(r["score"]) for r in valid]
    score_total = _mean(all_scores)
    score_valid = _mean(valid_scores)
    headline_values = valid_scores if denominator == "valid" else all_scores
    headline = None if is_unspecified(denominator) else (score_valid if denominator == "valid" else score_total)
    inference_failed = sum(1 for r in recs if r.get("invalid_stage") == "inference")
    result: dict[str, Any] = {
        "benchmark": first["benchmark"],
        "task": first["task"],
        "model": first["model"],
        "variant": first.get("variant", ""),
        "pipeline": first["pipeline"],
        "pipeline_hash": first["pipeline_hash"],
        "metric": metric,
        "lower_is_better": bool(info.lower_is_better) if info else False,
        "denominator": denominator,
        "n": n,
        "n_valid": len(valid),
        "n_correct": sum(1 for r in recs if r["correct"]),
        "score": headline,
        "score_total": score_total,
        "score_valid": score_valid,
        "invalid_rate": 1 - len(valid) / n,
        "invalid_reasons": dict(Counter(r["invalid_reason"] for r in recs if not r["valid"])),
        "stage_rates": {
            "inference_ok": 1 - inference_failed / n,
            "extraction_ok": len(valid) / n,
            "correct": sum(1 for r in recs if r["correct"]) / n,
        },
        "ci95": None if headline is None else confidence_interval(headline_values, binary=(info is None or info.kind == "binary")),
    }
    extras: dict[str, list[float]] = defaultdict(list)
    for r in (valid if denominator == "valid" else recs):
        for name, value in (r.get("score_extras") or {}).items():
            extras[name].append(float(value))
    if extras:
        # Per-item numbers a benchmark reports beside the headline (e.g. TAA plausible),
        # averaged over the same denominator as the headline.
        result["extras"] = {name: sum(vals) / len(vals) for name, vals in extras.items()}
    by = fields.get("aggregation.by")
    if by:
        result["breakdown"] = {by: _breakdown(recs, by, denominator)}
    return result


def _breakdown(recs: list[dict[str, Any]], by: str, denominator: str) -> dict[str, dict[str, Any]]:
    """Score per value of a question metadata field; a list value counts in each of its entries."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        value = r.get("question_meta", {}).get(by)
        for v in value if isinstance(value, list) else [value]:
            groups[str(v)].append(r)
    out = {}
    for key in sorted(groups):
        g = groups[key]
        scores = [float(r["score"]) for r in g if r["valid"] or denominator != "valid"]
        out[key] = {"n": len(g), "score": _mean(scores)}
    return out


def summarize(records: Iterable[dict[str, Any]], cards: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One result per benchmark x task x model x variant, in first-seen order.

    ``cards`` maps ``"<benchmark>.<task>"`` (or ``"<benchmark>.<task>|<variant>"``)
    to the pipeline card the records were scored under.
    """
    cards = cards or {}
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for rec in records:
        groups.setdefault(group_key(rec), []).append(rec)
    out = []
    for (bench, task, _model, variant), recs in groups.items():
        card = cards.get(f"{bench}.{task}|{variant}") or cards.get(f"{bench}.{task}")
        out.append(_result(recs, card))
    return out


def benchmark_scores(results: list[dict[str, Any]], cards: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per benchmark x model x variant: the tasks' headline scores combined by ``aggregation.method``.

    ``micro`` pools items (each question weighs the same, under each task's
    denominator); ``macro`` is the unweighted mean of task scores.  If the tasks
    disagree on the method or leave it unspecified, the score is ``None`` and the
    reason is given: the project does not pick a method silently.
    """
    cards = cards or {}
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[(r["benchmark"], r["model"], r["variant"])].append(r)
    out = []
    for (bench, model, variant), rs in groups.items():
        methods = {
            (cards.get(f"{bench}.{r['task']}|{variant}") or cards.get(f"{bench}.{r['task']}", {}))
            .get("fields", {}).get("aggregation.method", "unspecified")
            for r in rs
        }
        entry: dict[str, Any] = {"benchmark": bench, "model": model, "variant": variant,
                                 "tasks": [r["task"] for r in rs], "pipeline": rs[0]["pipeline"],
                                 "n": sum(r["n"] for r in rs), "score": None, "method": None, "note": ""}
        method = methods.pop() if len(methods) == 1 else None
        scores = [r["score"] for r in rs]
        if len({r["lower_is_better"] for r in rs}) > 1:
            # An accuracy and an error (lower is better) cannot be averaged into one number.
            entry["note"] = "tasks mix higher-is-better and lower-is-better metrics: " + ", ".join(
                sorted({r["metric"] for r in rs}))
        elif method is None or is_unspecified(method):
            entry["note"] = "aggregation unspecified" if method else "tasks disagree on aggregation.method"
            if len(rs) == 1:  # one task: its score is the benchmark's, whatever the method
                entry["score"], entry["method"], entry["note"] = scores[0], "single task", ""
        elif any(s is None for s in scores):
            entry["note"] = "a task has no headline score"
        elif method == "macro":
            entry["score"], entry["method"] = sum(scores) / len(scores), "macro"
        else:
            denominators = [r["n_valid"] if r["denominator"] == "valid" else r["n"] for r in rs]
            total = sum(denominators)
            entry["score"] = sum(s * d for s, d in zip(scores, denominators)) / total if total else None
            entry["method"] = "micro"
        out.append(entry)
    return out
