"""Quality gates: ``--gate 'seceval>=0.70'``, ``--gate 'seceval.mcq:invalid<=0.05'``.

Grammar: ``TARGET[:QUANTITY] OP NUMBER`` where TARGET is a benchmark or
``benchmark.task``, QUANTITY is ``score`` (default: the pipeline's headline
score), ``score_total``, ``score_valid``, ``invalid`` (the invalid rate), or
``ci_low`` / ``ci_high`` (the ends of the headline's 95% interval: the clustered
one when ``aggregation.by`` is set, else ``ci95``; docs/statistics.md), and
OP is one of ``>= <= > < ==``.  ``seceval:ci_low>=0.70`` holds only when the score
is above 0.70 by more than its error bar.  A gate holds when it holds for every model and
variant in the run; a target with no result, or a score the pipeline cannot
state (unspecified aggregation or denominator), fails the gate with that reason.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Callable

from pytest_benchaudit.aggregate.summary_documents import BenchmarkScore, GateResult, TaskResult
from pytest_benchaudit.common.errors import UsageError, did_you_mean

__all__ = ["Gate", "GateError", "GateVerdict", "parse_gate", "evaluate_gates", "check_gate_targets", "gate_results"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
}
_QUANTITIES = {"score": "score", "score_total": "score_total", "score_valid": "score_valid",
               "invalid": "invalid_rate", "ci_low": "ci_low", "ci_high": "ci_high"}
# Quantities read per task only: a benchmark of several tasks has no one value of them.
_PER_TASK = ("score_total", "score_valid", "ci_low", "ci_high")
_GATE = re.compile(r"^\s*([A-Za-z0-9_\-]+)(?:\.([A-Za-z0-9_\-]+))?(?::([a-z_]+))?\s*(>=|<=|==|>|<)\s*([0-9.eE+\-]+)\s*$")


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
            problems.append(f"--gate {gate.text!r}: no collected benchmark {gate.benchmark!r}"
                            f"{did_you_mean(gate.benchmark, benches)}; benchmarks: {', '.join(benches)}")
            continue
        tasks = sorted(t for b, t in targets if b == gate.benchmark)
        if gate.task is not None and gate.task not in tasks:
            problems.append(f"--gate {gate.text!r}: {gate.benchmark} has no task {gate.task!r}"
                            f"{did_you_mean(gate.task, tasks)}; tasks: {', '.join(tasks)}")
            continue
        metrics = [METRIC_INFO.get(targets[(gate.benchmark, t)]) for t in ([gate.task] if gate.task else tasks)]
        # The invalid rate and the scores of higher-is-better metrics (accuracies, F1, 1 - MAD/7.7) are
        # fractions; an error metric (MAD) has no upper bound.
        fraction = gate.quantity == "invalid" or all(m is not None and not m.lower_is_better for m in metrics)
        if fraction and not 0.0 <= gate.threshold <= 1.0:
            hint = (f"; a fraction is meant: did you mean {gate.threshold / 100:g} for {gate.threshold:g}%?"
                    if 1.0 < gate.threshold <= 100.0 else "")
            problems.append(f"--gate {gate.text!r}: {gate.threshold:g} is outside the range of "
                            f"{gate.quantity} (0 to 1){hint}")
        elif gate.threshold < 0:
            problems.append(f"--gate {gate.text!r}: {gate.threshold:g} is below 0, where no {gate.quantity} lies")
    return problems


def _row_value(row: TaskResult, quantity: str) -> float | None:
    """A task result's value of ``quantity``; a CI end from the clustered interval when there is one."""
    if quantity in ("ci_low", "ci_high"):
        ci = row.get("ci95_clustered") or row.get("ci95")
        return None if not ci else float(ci[0 if quantity == "ci_low" else 1])
    key = _QUANTITIES[quantity]
    value = (row["invalid_rate"] if key == "invalid_rate" else row["score_total"] if key == "score_total"
             else row["score_valid"] if key == "score_valid" else row["score"])
    return None if value is None else float(value)


def _benchmark_value(gate: Gate, entry: BenchmarkScore, results: list[TaskResult]) -> float | None:
    if gate.quantity == "score":
        score = entry["score"]
        return None if score is None else float(score)
    rows = [r for r in results if r["benchmark"] == entry["benchmark"] and r["model"] == entry["model"]
            and r["variant"] == entry["variant"]]
    key = _QUANTITIES[gate.quantity]
    if key == "invalid_rate":
        n = sum(r["n"] for r in rows)
        return sum(r["invalid_rate"] * r["n"] for r in rows) / n if n else None
    values = [_row_value(r, gate.quantity) for r in rows]
    return values[0] if len(values) == 1 else None


def evaluate_gates(gates: list[Gate], results: list[TaskResult], benchmarks: list[BenchmarkScore]) -> list[GateVerdict]:
    verdicts = []
    for gate in gates:
        values: list[tuple[str, float | None]]
        if gate.task:
            values = [(f"{r['model']}{'|' + r['variant'] if r['variant'] else ''}", _row_value(r, gate.quantity))
                      for r in results if r["benchmark"] == gate.benchmark and r["task"] == gate.task]
        else:
            values = [(f"{b['model']}{'|' + b['variant'] if b['variant'] else ''}", _benchmark_value(gate, b, results))
                      for b in benchmarks if b["benchmark"] == gate.benchmark]
        if not values:
            verdicts.append(GateVerdict(gate, False, "no results for this target in the run"))
            continue
        failed: list[str] = []
        parts: list[str] = []
        for who, value in values:
            if value is None:
                failed.append(who)
                why = ("not defined across several tasks; gate a task instead"
                       if not gate.task and gate.quantity in _PER_TASK
                       else "unspecified by the pipeline")
                parts.append(f"{who}: no {gate.quantity} ({why})")
                continue
            ok = _OPS[gate.op](value, gate.threshold)
            if not ok:
                failed.append(who)
            parts.append(f"{who}: {value:.4f}")
        verdicts.append(GateVerdict(gate, not failed, "; ".join(parts)))
    return verdicts


def gate_results(verdicts: list[GateVerdict]) -> list[GateResult]:
    """The ``summary.json`` ``gates`` rows of the verdicts: the gate's text, whether it held, the values read."""
    return [{"gate": v.gate.text, "passed": v.passed, "detail": v.detail} for v in verdicts]
