"""The causes of a verdict (:mod:`.verdict`): per pipeline field, its largest effect, and the command that reproduces it.

A cause comes from a single-field variant re-scored (the per-field deltas, ``sweeps``: :data:`.sweeps.SweepRow`)
or from a diagnose finding's effect (:class:`~pytest_benchaudit.diagnose.finding_documents.FindingRow`); the
percentage-point causes (share metrics) and the error-metric causes (in the metric's own unit) are kept apart,
since a MAD's points and percentage points do not compare.  Pure: dicts in, dicts out.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import NotRequired

from pydantic import JsonValue
from typing_extensions import TypedDict

from pytest_benchaudit.compare.compare_documents import TaskInfo
from pytest_benchaudit.diagnose.finding_documents import FindingRow
from pytest_benchaudit.report.html.format import is_num
from pytest_benchaudit.report.html.sweeps import SweepRow, run_of, value_of

__all__ = [
    "MATERIAL_PP",
    "UPSTREAM",
    "Cause",
    "MetricCause",
    "field_causes",
    "is_upstream",
    "metric_causes",
    "reproduce",
    "rescore_command",
    "unit_of",
    "value_text",
]

#: A move of at least this many percentage points makes the verdict "pipeline-dependent".
MATERIAL_PP = 1.0


class Cause(TypedDict):
    """A pipeline field's largest effect in pp: a single-field re-score, or a diagnose finding."""

    field: str
    value: JsonValue
    pp: float
    run: str | None
    model: str | None
    task: str | None
    source: str
    command: str | None
    n_moved: NotRequired[int]  # set once every cause is offered


class MetricCause(TypedDict):
    """A pipeline field's largest move of an error metric, in its own unit."""

    field: str
    value: JsonValue
    delta: float
    unit: str
    run: str | None
    model: str | None
    task: str | None
    lower_is_better: bool
    command: str | None
    base: NotRequired[float | None]  # a sweep row's base score (a finding has none)


def unit_of(info: TaskInfo | None) -> str:
    """The unit of a task's error metric: its metric names."""
    return ", ".join(map(str, (info.get("metrics") if info else None) or [])) or "metric unit"


def rescore_command(field: str, value: JsonValue, run: str | None) -> str:
    """``benchaudit rescore RUN --set FIELD=VALUE`` (``RUN`` when the run directory is not known)."""
    target = shlex.quote(run) if run else "RUN"
    return f"benchaudit rescore {target} --set {shlex.quote(f'{field}={value_text(value)}')}"


#: Stages whose fields change the request: their effect needs new generations, not a re-score.
UPSTREAM = ("dataset", "prompt", "inference")


def is_upstream(row: SweepRow) -> bool:
    """Whether the row's field changes the request (its effect needs new generations)."""
    return row.get("kind") == "upstream" or str(row.get("field") or "").split(".", 1)[0] in UPSTREAM


def reproduce(bench: str, row: SweepRow, run: str | None) -> str | None:
    """The command that reproduces a single-field variant row: a re-score for a downstream field, a
    pytest run with ``--vary`` for an upstream one (it generates again); None without a value."""
    value = value_of(row)
    if value is None or not row.get("field"):
        return None
    field, setting = str(row["field"]), f"{row['field']}={value_text(value)}"
    if is_upstream(row):
        model = shlex.quote(f"{row.get('model')}@URL")
        return f"pytest suites/{bench} --model {model} --vary {shlex.quote(setting)}"
    return rescore_command(field, value, run)


def value_text(value: JsonValue) -> str:
    """A field's value as ``--set`` writes it (``true``/``false`` for a bool)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _weight(cause: Cause) -> tuple[float, bool]:
    """Larger effect first (to the 0.1 pp shown); on a tie, the one its command reproduces exactly."""
    return round(abs(cause["pp"]), 1), str(cause.get("command") or "").startswith(("benchaudit rescore", "pytest"))


def field_causes(
    bench: str, sweeps: Sequence[SweepRow], findings: Sequence[FindingRow], runs: dict[tuple[str, str], str]
) -> list[Cause]:
    """Per field, its largest effect in pp (single-field re-scores and findings), largest first."""
    best: dict[str, Cause] = {}
    moved: dict[str, set[tuple[str, str]]] = {}  # per field, the model x task cells it moves MATERIAL_PP or more

    def offer(cause: Cause) -> None:
        field = cause["field"]
        cells = moved.setdefault(field, set())
        if abs(cause["pp"]) >= MATERIAL_PP:
            cells.add((str(cause["model"]), str(cause["task"])))  # a sweep and a finding on one cell count once
        if field not in best or _weight(cause) > _weight(best[field]):
            best[field] = cause

    for r in sweeps:
        pp = r.get("delta_pp")
        if str(r.get("benchmark")) != bench or pp is None or not is_num(pp) or not r.get("field"):
            continue
        run = run_of(r) or runs.get((bench, str(r.get("model"))))
        offer(
            Cause(
                field=str(r["field"]),
                value=value_of(r),
                pp=float(pp),
                run=run,
                model=r.get("model"),
                task=r.get("task"),
                source="new generation" if is_upstream(r) else "re-score",
                command=reproduce(bench, r, run),
            )
        )
    for f in findings:
        effect_pp = f.get("effect_pp")
        if str(f.get("benchmark")) != bench or effect_pp is None or not is_num(effect_pp) or not f.get("field"):
            continue
        run = runs.get((bench, str(f.get("model"))))
        # A finding names its field, not a value to set it to: its command re-runs diagnose, which re-scores it.
        command = f"benchaudit diagnose {shlex.quote(run) if run else 'RUN'}"
        offer(
            Cause(
                field=str(f["field"]),
                value=None,
                pp=float(effect_pp),
                run=run,
                model=f.get("model"),
                task=f.get("task"),
                source=str(f.get("failure_mode") or "finding"),
                command=command,
            )
        )
    ordered = sorted(best.values(), key=lambda c: (-_weight(c)[0], not _weight(c)[1], c["field"]))
    for c in ordered:
        c["n_moved"] = len(moved[c["field"]])
    return ordered


def metric_causes(
    bench: str,
    sweeps: Sequence[SweepRow],
    findings: Sequence[FindingRow],
    runs: dict[tuple[str, str], str],
    tasks: dict[str, TaskInfo],
) -> list[MetricCause]:
    """Per (field, unit), the largest single-field move of an error metric in its own unit, largest first:
    sweep rows with a ``delta`` and no ``delta_pp``, findings with an ``effect_delta`` and no ``effect_pp``.

    Kept apart from the pp causes: a MAD's points and percentage points do not compare."""
    best: dict[tuple[str, str], MetricCause] = {}
    for f in findings:
        if (
            str(f.get("benchmark")) != bench
            or is_num(f.get("effect_pp"))
            or not is_num(f.get("effect_delta"))
            or not f.get("field")
            or not f["effect_delta"]
        ):
            continue
        info = tasks.get(f"{bench}.{f.get('task')}")
        unit = unit_of(info)
        run = runs.get((bench, str(f.get("model"))))
        key = (str(f["field"]), unit)
        cause = MetricCause(
            field=key[0],
            value=None,
            delta=float(f["effect_delta"]),
            unit=unit,
            run=run,
            model=f.get("model"),
            task=f.get("task"),
            lower_is_better=bool(info and info.get("lower_is_better")),
            command=f"benchaudit diagnose {shlex.quote(run) if run else 'RUN'}",
        )
        if key not in best or abs(cause["delta"]) > abs(best[key]["delta"]):
            best[key] = cause
    for r in sweeps:
        delta = r.get("delta")
        if (
            str(r.get("benchmark")) != bench
            or is_num(r.get("delta_pp"))
            or delta is None
            or not is_num(delta)
            or not r.get("field")
        ):
            continue
        unit = str(r.get("unit") or r.get("metric") or "metric unit")
        key = (str(r["field"]), unit)
        run = run_of(r) or runs.get((bench, str(r.get("model"))))
        cause = MetricCause(
            field=key[0],
            value=value_of(r),
            delta=float(delta),
            unit=unit,
            run=run,
            model=r.get("model"),
            task=r.get("task"),
            lower_is_better=bool(r.get("lower_is_better")),
            command=reproduce(bench, r, run),
            base=r.get("base_score"),
        )
        if key not in best or abs(cause["delta"]) > abs(best[key]["delta"]):
            best[key] = cause
    return sorted(best.values(), key=lambda c: (-abs(c["delta"]), c["field"]))
