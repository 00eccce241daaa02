"""Quality gates: ``--gate 'seceval>=0.70'``, ``--gate 'seceval.mcq:invalid<=0.05'``.

Grammar: ``TARGET[:QUANTITY] OP NUMBER`` where TARGET is a benchmark or
``benchmark.task``, QUANTITY is ``score`` (default: the pipeline's headline
score), ``score_total``, ``score_valid``, ``invalid`` (the invalid rate), or
``ci_low`` / ``ci_high`` (the ends of the headline's 95% interval; docs/statistics.md), and
OP is one of ``>= <= > < ==``.  ``seceval:ci_low>=0.70`` holds only when the score
is above 0.70 by more than its error bar.  A gate holds when it holds for every model and
variant in the run; a target with no result, or a score the pipeline cannot
state (unspecified aggregation or denominator), fails the gate with that reason.

An interval gate reads the widest interval the row has (the clustered one when ``aggregation.by``
is set: it contains the plain one, aggregate/intervals.py; the hull of both should a row hold
another pair), so it never reads a narrower interval than the terminal shows, and it says which
it read (the verdict's detail, summary.json's ``interval``).  It never passes on an interval that
does not exist: a grouped row without a clustered interval (fewer than two groups), a row without an
interval (no spread to measure) or a zero-width one fails with the reason.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from pytest_benchaudit.aggregate.intervals import METHOD_TEXT
from pytest_benchaudit.aggregate.summary_documents import BenchmarkScore, GateResult, TaskResult
from pytest_benchaudit.common.errors import UsageError, did_you_mean

__all__ = ["Gate", "GateError", "GateVerdict", "parse_gate", "evaluate_gates", "check_gate_targets", "gate_results"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
}
_QUANTITIES = {
    "score": "score",
    "score_total": "score_total",
    "score_valid": "score_valid",
    "invalid": "invalid_rate",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
}
# Quantities read per task only: a benchmark of several tasks has no one value of them.
_GATE = re.compile(
    r"^\s*([A-Za-z0-9_\-]+)(?:\.([A-Za-z0-9_\-]+))?(?::([a-z_]+))?\s*(>=|<=|==|>|<)\s*([0-9.eE+\-]+)\s*$"
)


class GateError(UsageError):
    """A ``--gate`` expression could not be parsed."""


@dataclass(frozen=True)
class Gate:
    text: str
    benchmark: str
    task: str | None
    quantity: str
    op: str
    threshold: float


@dataclass(frozen=True)
class GateVerdict:
    gate: Gate
    passed: bool
    detail: str
    interval: str | None = None  # an interval gate: which interval(s) it read


def parse_gate(text: str) -> Gate:
    m = _GATE.match(text)
    if not m:
        raise GateError(
            f"--gate {text!r}: expected BENCHMARK[.TASK][:QUANTITY]OPNUMBER, e.g. 'seceval>=0.70' or "
            f"'seceval.mcq:invalid<=0.05' (quantities: {', '.join(_QUANTITIES)}; operators: {' '.join(_OPS)})"
        )
    bench, task, quantity, op, number = m.groups()
    quantity = quantity or "score"
    if quantity not in _QUANTITIES:
        raise GateError(f"--gate {text!r}: unknown quantity {quantity!r}; allowed: {', '.join(_QUANTITIES)}")
    try:
        threshold = float(number)
    except ValueError:
        raise GateError(f"--gate {text!r}: {number!r} is not a number") from None
    return Gate(text=text.strip(), benchmark=bench, task=task, quantity=quantity, op=op, threshold=threshold)


def check_gate_targets(gates: list[Gate], targets: dict[tuple[str, str], str]) -> list[str]:
    """Problems with ``gates`` against the collected (benchmark, task) -> metric ``targets``, checked
    before any item: an unknown benchmark or task (with the nearest name), a threshold outside the
    quantity's range (fractions in [0, 1]: ``seceval>=70`` gets the hint ``0.70``)."""
    from pytest_benchaudit.scoring.metrics import METRIC_INFO

    benches = sorted({b for b, _ in targets})
    problems = []
    for gate in gates:
        if gate.benchmark not in benches:
            problems.append(
                f"--gate {gate.text!r}: no collected benchmark {gate.benchmark!r}"
                f"{did_you_mean(gate.benchmark, benches)}; benchmarks: {', '.join(benches)}"
            )
            continue
        tasks = sorted(t for b, t in targets if b == gate.benchmark)
        if gate.task is not None and gate.task not in tasks:
            problems.append(
                f"--gate {gate.text!r}: {gate.benchmark} has no task {gate.task!r}"
                f"{did_you_mean(gate.task, tasks)}; tasks: {', '.join(tasks)}"
            )
            continue
        metrics = [METRIC_INFO.get(targets[(gate.benchmark, t)]) for t in ([gate.task] if gate.task else tasks)]
        # The invalid rate and the scores of higher-is-better metrics (accuracies, F1, 1 - MAD/7.7) are
        # fractions; an error metric (MAD) has no upper bound.
        fraction = gate.quantity == "invalid" or all(m is not None and not m.lower_is_better for m in metrics)
        if fraction and not 0.0 <= gate.threshold <= 1.0:
            hint = (
                f"; a fraction is meant: did you mean {gate.threshold / 100:g} for {gate.threshold:g}%?"
                if 1.0 < gate.threshold <= 100.0
                else ""
            )
            problems.append(
                f"--gate {gate.text!r}: {gate.threshold:g} is outside the range of {gate.quantity} (0 to 1){hint}"
            )
        elif gate.threshold < 0:
            problems.append(f"--gate {gate.text!r}: {gate.threshold:g} is below 0, where no {gate.quantity} lies")
    return problems


@dataclass(frozen=True)
class _Read:
    """A value a gate read from a row: the number, or why there is none; for an interval gate, which interval."""

    value: float | None
    why: str = ""
    interval: str | None = None


def _interval_name(row: TaskResult, key: str) -> str:
    method = row.get("ci95_clustered_method" if key == "ci95_clustered" else "ci95_method")
    grouped = (
        f", {row.get('n_groups')} groups of {row.get('clustered_by')}"
        if key == "ci95_clustered"
        else ", questions as independent"
    )
    return f"{key} ({METHOD_TEXT.get(str(method), str(method)) if method else 'method not recorded'}{grouped})"


def _row_interval(row: TaskResult, quantity: str) -> _Read:
    """A CI end of ``row`` (module docstring): the widest of its intervals, and which it is."""
    if row["score"] is None:
        return _Read(None, "unspecified by the pipeline")
    grouped = row.get("clustered_by") is not None and row.get("n_groups") is not None
    found = [
        (key, ci)
        for key in ("ci95_clustered", "ci95")
        for ci in [row.get(key)]
        if isinstance(ci, list) and len(ci) == 2
    ]
    if grouped and not any(key == "ci95_clustered" for key, _ in found):
        return _Read(
            None,
            f"no clustered interval: {row.get('n_groups')} group(s) of {row.get('clustered_by')}, "
            "a clustered error bar needs 2",
            "ci95_clustered",
        )
    if not found:
        return _Read(None, "no interval: fewer than two questions, or every question scored the same", "ci95")
    low, high = min(float(ci[0]) for _, ci in found), max(float(ci[1]) for _, ci in found)
    widest = [key for key, ci in found if float(ci[0]) == low and float(ci[1]) == high]
    name = _interval_name(row, widest[0]) if widest else " ∪ ".join(_interval_name(row, k) for k, _ in found)
    if not high > low:
        return _Read(None, f"the interval has zero width ({name}): no error bar to gate on", name)
    return _Read(low if quantity == "ci_low" else high, interval=name)


def _row_value(row: TaskResult, quantity: str) -> _Read:
    """A task result's value of ``quantity``; a CI end as :func:`_row_interval` reads it."""
    if quantity in ("ci_low", "ci_high"):
        return _row_interval(row, quantity)
    key = _QUANTITIES[quantity]
    value = (
        row["invalid_rate"]
        if key == "invalid_rate"
        else row["score_total"]
        if key == "score_total"
        else row["score_valid"]
        if key == "score_valid"
        else row["score"]
    )
    return _Read(None if value is None else float(value), "unspecified by the pipeline")


def _benchmark_value(gate: Gate, entry: BenchmarkScore, results: list[TaskResult]) -> _Read:
    if gate.quantity == "score":
        score = entry["score"]
        return _Read(None if score is None else float(score), "unspecified by the pipeline")
    rows = [
        r
        for r in results
        if r["benchmark"] == entry["benchmark"] and r["model"] == entry["model"] and r["variant"] == entry["variant"]
    ]
    key = _QUANTITIES[gate.quantity]
    if key == "invalid_rate":
        n = sum(r["n"] for r in rows)
        return _Read(sum(r["invalid_rate"] * r["n"] for r in rows) / n if n else None, "no items")
    if len(rows) == 1:
        return _row_value(rows[0], gate.quantity)
    return _Read(None, "not defined across several tasks; gate a task instead")


def evaluate_gates(gates: list[Gate], results: list[TaskResult], benchmarks: list[BenchmarkScore]) -> list[GateVerdict]:
    verdicts = []
    for gate in gates:
        values: list[tuple[str, _Read]]
        if gate.task:
            values = [
                (f"{r['model']}{'|' + r['variant'] if r['variant'] else ''}", _row_value(r, gate.quantity))
                for r in results
                if r["benchmark"] == gate.benchmark and r["task"] == gate.task
            ]
        else:
            values = [
                (f"{b['model']}{'|' + b['variant'] if b['variant'] else ''}", _benchmark_value(gate, b, results))
                for b in benchmarks
                if b["benchmark"] == gate.benchmark
            ]
        if not values:
            verdicts.append(GateVerdict(gate, False, "no results for this target in the run"))
            continue
        failed: list[str] = []
        parts: list[str] = []
        for who, read in values:
            if read.value is None:
                failed.append(who)
                parts.append(f"{who}: no {gate.quantity} ({read.why})")
                continue
            if not _OPS[gate.op](read.value, gate.threshold):
                failed.append(who)
            parts.append(f"{who}: {read.value:.4f}" + (f" from {read.interval}" if read.interval else ""))
        intervals = list(dict.fromkeys(read.interval for _, read in values if read.interval))
        verdicts.append(GateVerdict(gate, not failed, "; ".join(parts), "; ".join(intervals) or None))
    return verdicts


def gate_results(verdicts: list[GateVerdict]) -> list[GateResult]:
    """The ``summary.json`` ``gates`` rows of the verdicts: the gate's text, whether it held, the values read
    (and, for an interval gate, which interval)."""
    rows: list[GateResult] = []
    for v in verdicts:
        row: GateResult = {"gate": v.gate.text, "passed": v.passed, "detail": v.detail}
        if v.interval is not None:
            row["interval"] = v.interval
        rows.append(row)
    return rows
