"""The parts of ``diagnose`` shared by its checks: findings, groups of records and effects.

A finding is a *hypothesis with evidence*, never a verdict: its sentence says what the
evidence suggests, ``evidence`` holds the counts and a few question ids to check it by hand,
``field`` names the pipeline field that would fix it, and the effect says by how much the
score moves when that field is fixed:

- downstream fields (extraction, scoring, denominator): the group's records are **re-scored
  offline** with the field changed (:func:`~pytest_benchaudit.rescore.records.retarget` +
  :func:`~pytest_benchaudit.rescore.records.rescore_records`,
  the machinery of ``benchaudit rescore``), ``effect_kind = "rescored"``;
- dataset problems: the score **recomputed** without the questions concerned, ``"recomputed"``;
- upstream fields (prompt, inference): they **need new generations**; where an honest estimate
  exists (affected items answered as well as the model's other valid answers) it is given as
  ``"estimate"``, otherwise ``effect_pp`` is None and ``effect_kind = "none"``.

``effect_pp`` is in percentage points for scores on a 0-1 scale (higher is better).  A computed
effect that does not move the headline at all (``effect_is_zero``) says little: ``diagnose``
folds such findings into a count instead of listing them.  For an
error metric (lower is better, e.g. CTI-Bench VSP's MAD in CVSS points) ``effect_pp`` is None
and ``effect`` gives the change in the metric's own units: points of a MAD are not
percentage points.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, JsonValue
from pydantic_core import to_jsonable_python

from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.diagnose.failure_modes import Stage, failure_mode
from pytest_benchaudit.diagnose.finding_documents import EffectKind, FindingRow
from pytest_benchaudit.pipeline.layering import retarget
from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.pipeline.stages import PipelineError
from pytest_benchaudit.rescore.records import Resources as RescoreResources
from pytest_benchaudit.rescore.records import (
    pipeline_from_card,
    rescore_records,
)
from pytest_benchaudit.runs.run_meta import RunMeta

__all__ = [
    "MAX_IDS",
    "Effect",
    "Finding",
    "Group",
    "LoadedRun",
    "Resources",
    "credit_clause",
    "delta_effect",
    "group_runs",
    "json_dict",
    "json_list",
    "make_finding",
    "missing_cards",
    "question_ids",
    "recompute_as_invalid",
    "recompute_without",
    "recovery_estimate",
    "rescore_effect",
]

# (benchmark, task, metric) -> the task's resource files (alias graphs, ...), for re-scoring.
Resources = Callable[[str, str, str], RescoreResources]
MAX_IDS = 5  # question ids quoted per finding: enough to check by hand, short enough to read


class Finding(BaseModel):
    """One failure mode suspected in one benchmark x task x model (``model = "*"``: every model)."""

    benchmark: str
    task: str
    model: str
    pipeline: str = ""
    run: str = ""
    failure_mode: str
    title: str
    field: str
    stage: Stage
    hypothesis: str = Field(description="one sentence, worded as a hypothesis with its evidence")
    evidence: dict[str, Any] = Field(default_factory=dict)
    effect_pp: float | None = None
    effect: str = ""
    effect_kind: EffectKind = "none"
    effect_delta: float | None = Field(
        default=None,
        description="the computed change of the headline in the metric's own units (new - old), when there is one",
    )
    effect_is_zero: bool = Field(
        default=False, description="a re-scored or recomputed effect that leaves the headline exactly where it was"
    )

    def row(self) -> FindingRow:
        """The finding as JSON (``diagnose --json``, ``audit.json`` ``findings``): ``model_dump(mode="json")``, typed."""
        return FindingRow(
            benchmark=self.benchmark,
            task=self.task,
            model=self.model,
            pipeline=self.pipeline,
            run=self.run,
            failure_mode=self.failure_mode,
            title=self.title,
            field=self.field,
            stage=self.stage,
            hypothesis=self.hypothesis,
            evidence=to_jsonable_python(self.evidence),
            effect_pp=self.effect_pp,
            effect=self.effect,
            effect_kind=self.effect_kind,
            effect_delta=self.effect_delta,
            effect_is_zero=self.effect_is_zero,
        )


@dataclass
class LoadedRun:
    """One run directory's ``run.json`` and records (``name`` is shown in findings)."""

    name: str
    meta: RunMeta
    records: list[RecordRow]


@dataclass
class Group:
    """The base records of one benchmark x task x model x pipeline, with the card they were scored under."""

    benchmark: str
    task: str
    model: str
    pipeline: str
    run: str
    card: PipelineCard
    records: list[RecordRow]
    meta: RunMeta = field(default_factory=lambda: RunMeta(run_id=""))

    @property
    def key(self) -> str:
        return f"{self.benchmark}.{self.task}"

    @property
    def fields(self) -> dict[str, JsonValue]:
        return self.card.get("fields", {})

    def result(self) -> TaskResult:
        return summarize(self.records, {self.key: self.card})[0]


@dataclass
class Effect:
    """How far fixing a field moves the headline: pp on 0-1 scores, the metric's units otherwise."""

    kind: EffectKind
    pp: float | None = None
    text: str = "needs new generations; no honest estimate from these records"
    zero: bool = False  # computed (re-scored / recomputed) and the headline did not move
    delta: float | None = None  # new - old in the metric's units


def group_runs(runs: Sequence[LoadedRun]) -> list[Group]:
    """Base records (no variant) grouped by benchmark, task, model and pipeline, in first-seen order."""
    groups: dict[tuple[str, str, str, str, str], Group] = {}
    for run in runs:
        cards = run.meta.get("pipeline_cards") or {}
        for rec in run.records:
            if rec.get("variant"):
                continue
            key = (run.name, str(rec["benchmark"]), str(rec["task"]), str(rec["model"]), str(rec.get("pipeline", "")))
            if key not in groups:
                card = cards.get(f"{key[1]}.{key[2]}")
                if card is None:
                    continue  # no card: nothing says what was asked (missing_cards() names these)
                groups[key] = Group(key[1], key[2], key[3], key[4], run.name, card, [], run.meta)
            groups[key].records.append(rec)
    return list(groups.values())


def missing_cards(runs: Sequence[LoadedRun]) -> list[str]:
    """``"RUN: bench.task"`` for every task that has records but no pipeline card (left out of the checks)."""
    out = []
    for run in runs:
        cards = run.meta.get("pipeline_cards") or {}
        keys = {f"{r['benchmark']}.{r['task']}" for r in run.records if not r.get("variant")}
        out += [f"{run.name}: {key}" for key in sorted(keys) if key not in cards]
    return out


def _units(result: TaskResult) -> str:
    return str(result.get("metric") or "metric")


def delta_effect(kind: EffectKind, old: TaskResult, new: TaskResult, how: str) -> Effect:
    """The move of the headline score from ``old`` to ``new`` (two summary results), described;
    ``zero`` when it does not move at all."""
    a, b = old.get("score"), new.get("score")
    if a is None or b is None:
        return Effect(kind, None, f"{how}: no score to compare")
    if old.get("lower_is_better"):
        return Effect(
            kind,
            None,
            f"{how}: {b - a:+.3f} {_units(old)} ({a:.3f} -> {b:.3f}; lower is better)",
            zero=abs(b - a) < 1e-9,
            delta=round(b - a, 6),
        )
    pp = round(100.0 * (b - a), 2)
    return Effect(
        kind, pp, f"{how}: {pp:+.1f} pp ({100 * a:.1f} -> {100 * b:.1f})", zero=abs(b - a) < 1e-9, delta=round(b - a, 6)
    )


def rescore_effect(
    group: Group, overrides: list[tuple[str, JsonValue]], resources: Resources | None, only: set[str] | None = None
) -> Effect:
    """Re-score the group's stored outputs offline with ``overrides`` (downstream fields only).

    ``only``: re-score just these question ids with ``overrides`` (the others keep the stored
    pipeline), so the effect is that of fixing the flagged items, not of swapping the whole rule.
    """
    how = "re-scored offline with " + ", ".join(f"{k}={v}" for k, v in overrides)
    if only is not None:
        how += f" on the {len(only)} flagged items only"
    try:
        stored = pipeline_from_card(group.card)
        target = retarget(stored, None, overrides)
        res = (lambda b, t: resources(b, t, target.scoring.metric)) if resources else (lambda b, t: {})
        if only is None:
            new = rescore_records(group.records, lambda rec: target, res)
        else:
            new = rescore_records(group.records, lambda rec: target if str(rec["question_id"]) in only else stored, res)
    except (PipelineError, KeyError, ValueError) as err:
        # e.g. a metric whose lookup files are not in the data directory: say so, never guess.
        return Effect("none", None, f"could not re-score ({how}): {err}")
    return delta_effect("rescored", group.result(), summarize(new, {group.key: target.card()})[0], how)


def recompute_without(group: Group, drop: set[str], how: str) -> Effect:
    """The headline recomputed from the group's records without the question ids in ``drop``."""
    kept = [r for r in group.records if str(r["question_id"]) not in drop]
    if not kept:
        return Effect("none", None, f"{how}: no question left")
    return delta_effect("recomputed", group.result(), summarize(kept, {group.key: group.card})[0], how)


def recompute_as_invalid(group: Group, qids: set[str], how: str) -> Effect:
    """The headline recomputed with the items in ``qids`` counted as unreadable (the metric's invalid value)."""
    value = _invalid_value(group)

    def unreadable(r: RecordRow) -> RecordRow:
        out = r.copy()
        out["valid"], out["prediction"], out["correct"] = False, None, False
        out["invalid_reason"], out["invalid_stage"], out["score"] = "unparseable", "extraction", value
        return out

    changed = [unreadable(r) if str(r["question_id"]) in qids else r for r in group.records]
    return delta_effect("recomputed", group.result(), summarize(changed, {group.key: group.card})[0], how)


def recovery_estimate(group: Group, n_affected_invalid: int) -> Effect:
    """Upstream fix: the affected invalid items answered as well as the model's other valid answers.

    Under a valid-only denominator they are already left out, so the expected move is 0; under
    ``total`` each one moves from the metric's invalid value to the mean valid score.
    """
    base = "needs new generations"
    res = group.result()
    n = res.get("n") or 0
    if not n_affected_invalid or not n:
        return Effect("none", None, f"{base}; no invalid item to recover")
    if res.get("denominator") == "valid":
        return Effect(
            "estimate",
            0.0,
            f"{base}; estimate 0 pp: the valid-only denominator already leaves these items out (see FM01)",
        )
    mean_valid = res.get("score_valid")
    if mean_valid is None:
        return Effect("none", None, f"{base}; no valid answer to estimate from")
    invalid_value = _invalid_value(group)
    move = n_affected_invalid * (mean_valid - invalid_value) / n
    if res.get("lower_is_better"):
        return Effect(
            "estimate",
            None,
            f"{base}; estimate {move:+.3f} {_units(res)} if the {n_affected_invalid} "
            f"items were answered as well as the valid ones [{credit_clause(group)}]",
        )
    pp = round(100.0 * move, 2)
    return Effect(
        "estimate",
        pp,
        f"{base}; estimate {pp:+.1f} pp if the {n_affected_invalid} items were answered "
        f"as well as the model's valid answers [{credit_clause(group)}]",
    )


def _credit(group: Group) -> float:
    value = group.fields.get("scoring.invalid_credit", 0.0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _invalid_value(group: Group) -> float:
    """What an invalid item of ``group`` scores under its card's ``scoring.invalid_credit``."""
    from pytest_benchaudit.scoring.metrics import METRIC_INFO, invalid_score

    info = METRIC_INFO.get(str(group.fields.get("scoring.metric", "")))
    return invalid_score(info, _credit(group)) if info else 0.0


def credit_clause(group: Group) -> str:
    """'invalid answers score 0 (no credit; scoring.invalid_credit 0)': the credit an effect used."""
    from pytest_benchaudit.scoring.metrics import invalid_credit_note

    credit = _credit(group)
    note = invalid_credit_note(str(group.fields.get("scoring.metric", "")), credit)
    return f"invalid answers score {note}; scoring.invalid_credit {credit:g}"


def make_finding(
    group: Group | None,
    fm_id: str,
    hypothesis: str,
    evidence: dict[str, Any],
    effect: Effect,
    *,
    benchmark: str = "",
    task: str = "",
    model: str = "*",
    field_name: str | None = None,
) -> Finding:
    """A :class:`Finding` of catalogue entry ``fm_id`` for ``group`` (or for a task, every model).

    A re-scored or recomputed effect of a group says the credit its invalid answers got
    (``scoring.invalid_credit``), since every re-score or recomputation counts them at that value.
    """
    fm = failure_mode(fm_id)
    text = effect.text
    if group is not None and effect.kind in ("rescored", "recomputed"):
        text = f"{text} [{credit_clause(group)}]"
    return Finding(
        benchmark=group.benchmark if group else benchmark,
        task=group.task if group else task,
        model=group.model if group else model,
        pipeline=group.pipeline if group else "",
        run=group.run if group else "",
        failure_mode=fm.id,
        title=fm.title,
        field=field_name or fm.field,
        stage=fm.stage,
        hypothesis=hypothesis,
        evidence=evidence,
        effect_pp=effect.pp,
        effect=text,
        effect_kind=effect.kind,
        effect_delta=effect.delta,
        effect_is_zero=effect.zero and effect.kind in ("rescored", "recomputed"),
    )


def json_dict(value: JsonValue) -> dict[str, JsonValue]:
    """``value`` where it is a JSON object (a part of a stored request), else an empty one."""
    return value if isinstance(value, dict) else {}


def json_list(value: JsonValue) -> list[JsonValue]:
    """``value`` where it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def question_ids(records: Iterable[RecordRow]) -> list[str]:
    """At most :data:`MAX_IDS` question ids, in record order, without repeats."""
    out: list[str] = []
    for rec in records:
        qid = str(rec["question_id"])
        if qid not in out:
            out.append(qid)
        if len(out) == MAX_IDS:
            break
    return out
