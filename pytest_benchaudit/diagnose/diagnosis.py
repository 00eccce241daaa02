"""``diagnose``: the catalogued failure modes, checked on every model x task of some runs.

:func:`diagnose` is pure: it takes loaded runs (:class:`LoadedRun`: ``run.json`` and records,
as :func:`pytest_benchaudit.rescore.run_dirs.load_run` returns them) and returns :class:`Finding` objects (pydantic),
so the command (:mod:`pytest_benchaudit.cli.diagnose_cmd`) can print them and a report can render
them.  What a finding holds and how its effect is computed: :mod:`.core`; the checks:
:mod:`.answer_checks`; the catalogue: :mod:`.failure_modes` and docs/failure-modes.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_benchaudit.diagnose import answer_checks, data_checks, lint_checks, order_checks
from pytest_benchaudit.diagnose import flips as flip_checks
from pytest_benchaudit.diagnose.core import (
    Finding,
    LoadedRun,
    Resources,
    group_runs,
)
from pytest_benchaudit.diagnose.failure_modes import CATALOGUE
from pytest_benchaudit.diagnose.finding_documents import DiagnoseDocument

if TYPE_CHECKING:
    from pytest_benchaudit.ledger.ledger_documents import LedgerRow

__all__ = [
    "NOT_A_VERDICT",
    "PER_TASK",
    "Diagnosis",
    "Finding",
    "LoadedRun",
    "diagnose",
    "diagnose_report",
    "render",
    "to_json",
]

# Failure modes about the data or the card, not the model (PER_TASK): the records of every model
# show the same problem, so they are reported once per task (each model's effect kept in the
# evidence).  Per failure mode, the evidence that differs from model to model without making it
# another problem: the number of records, and for the card lint the outputs that showed reasoning
# (the card is the problem, not which items).
_PER_MODEL_EVIDENCE = {
    "FM11-empty-or-unmatchable-gold": frozenset({"n"}),
    "FM12-duplicate-questions": frozenset({"n"}),
    "BA04-card-lint": frozenset({"n", "n_with_reasoning", "question_ids"}),
}
PER_TASK = frozenset(_PER_MODEL_EVIDENCE)


@dataclass
class Diagnosis:
    """What ``diagnose`` found: ``findings`` to list (largest |effect| first) and ``folded``, the
    findings whose computed effect leaves the headline where it was (counted, not listed)."""

    findings: list[Finding]
    folded: list[Finding] = field(default_factory=list)


def diagnose(
    runs: Sequence[LoadedRun],
    *,
    resources: Resources | None = None,
    ledger_rows: Mapping[str, LedgerRow] | None = None,
    order_flips: Sequence[flip_checks.OrderFlip] | None = None,
) -> list[Finding]:
    """The findings to list (:attr:`Diagnosis.findings` of :func:`diagnose_report`)."""
    return diagnose_report(runs, resources=resources, ledger_rows=ledger_rows, order_flips=order_flips).findings


def diagnose_report(
    runs: Sequence[LoadedRun],
    *,
    resources: Resources | None = None,
    ledger_rows: Mapping[str, LedgerRow] | None = None,
    order_flips: Sequence[flip_checks.OrderFlip] | None = None,
) -> Diagnosis:
    """Every catalogued check on every benchmark x task x model of ``runs``.

    Dataset and card findings (:data:`PER_TASK`) are merged into one per task and problem;
    findings whose re-scored or recomputed effect is zero are folded out; the rest are sorted
    by |effect_pp| (largest first; findings without one after, in catalogue order).

    ``resources`` loads a task's lookup files when re-scoring needs them (alias graphs); without
    it such effects say they could not be computed.  ``ledger_rows`` maps a benchmark to its
    ledger row (:func:`pytest_benchaudit.ledger.ledger_rows.suite_ledger`); without it FM15 is not checked.
    ``order_flips``: the pairs of the runs' multiverse (:mod:`.flips`); without them BA07 is not checked.
    """
    groups = group_runs(runs)
    group_checks: list[answer_checks.Check] = [
        lint_checks.check_all_invalid,
        lint_checks.check_logprobs_missing,
        lint_checks.check_card_lint,
        answer_checks.check_valid_denominator,
        answer_checks.check_stop_in_reasoning,
        answer_checks.check_truncation,
        answer_checks.check_provider_minimum,
        answer_checks.check_reasoning_kept,
        answer_checks.check_letters_anywhere,
        answer_checks.check_echoed_options,
        data_checks.check_gold,
        data_checks.check_duplicates,
        answer_checks.check_seed,
        answer_checks.check_judge,
        answer_checks.check_free_text_near_miss,
    ]
    findings: list[Finding] = []
    for group in groups:
        for check in group_checks:
            findings += check(group, resources)
    findings += data_checks.cross_task_checks(groups)
    findings += data_checks.size_checks(groups)
    findings += order_checks.check_order(groups)
    if order_flips is not None:
        findings += flip_checks.check_flips(order_flips)
    if ledger_rows is not None:
        findings += data_checks.ledger_checks(groups, ledger_rows, resources)
    order = {fm: i for i, fm in enumerate(CATALOGUE)}
    findings.sort(key=lambda f: (f.benchmark, f.task, order.get(f.failure_mode, 99), f.model, f.pipeline, f.run))
    findings = merge_per_task(findings)
    listed = [f for f in findings if not f.effect_is_zero]
    listed.sort(key=lambda f: (f.effect_pp is None, -abs(f.effect_pp or 0.0)))  # stable: ties keep the order
    return Diagnosis(listed, [f for f in findings if f.effect_is_zero])


def merge_per_task(findings: list[Finding]) -> list[Finding]:
    """One finding per task and problem for :data:`PER_TASK` failure modes, in first-seen order.

    Findings of several models with the same evidence (but for :data:`_PER_MODEL_EVIDENCE`) are one
    problem of the data or card: the merged finding has ``model = "*"``, the models and each
    model's effect in its evidence (``effect_by_model``: pp, or the change in the metric's units
    where lower is better), and as its effect the model whose score moves most.
    """
    buckets: dict[tuple[str, ...], list[Finding]] = {}
    out: list[Finding | tuple[str, ...]] = []
    for f in findings:
        if f.failure_mode not in PER_TASK or f.model == "*":
            out.append(f)
            continue
        same = {k: v for k, v in f.evidence.items() if k not in _PER_MODEL_EVIDENCE[f.failure_mode]}
        key = (f.benchmark, f.task, f.failure_mode, f.field, f.pipeline, json.dumps(same, sort_keys=True, default=str))
        if key not in buckets:
            buckets[key] = []
            out.append(key)
        buckets[key].append(f)
    merged: list[Finding] = []
    for item in out:
        if isinstance(item, Finding):
            merged.append(item)
            continue
        group = buckets[item]
        if len(group) == 1:
            merged.append(group[0])
            continue
        top = max(group, key=lambda f: abs(f.effect_pp if f.effect_pp is not None else (f.effect_delta or 0.0)))
        by_model = {f.model: (f.effect_pp if f.effect_pp is not None else f.effect_delta) for f in group}
        evidence = {**top.evidence, "models": [f.model for f in group], "effect_by_model": by_model}
        effect = (
            f"{top.effect}; the largest move of the {len(group)} models' records ({top.model}), each "
            f"model's in effect_by_model"
            if top.effect_kind != "none"
            else top.effect
        )
        merged.append(
            top.model_copy(
                update={
                    "model": "*",
                    "run": "",
                    "evidence": evidence,
                    "effect": effect,
                    "hypothesis": f"{top.hypothesis} (the same in the records of {len(group)} models)",
                    "effect_is_zero": all(f.effect_is_zero for f in group),
                }
            )
        )
    return merged


# --------------------------------------------------------------------------- output

NOT_A_VERDICT = (
    "Each finding is a hypothesis with evidence, not a verdict: check the quoted question ids "
    "in the run's records before acting on it."
)


def _evidence_text(evidence: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in evidence.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)]
    return ", ".join(parts)[:90]


def _folded_line(folded: Sequence[Finding]) -> str:
    if not folded:
        return ""
    counts = Counter(f.failure_mode.split("-", 1)[0] for f in folded)
    return (
        f"{len(folded)} more findings re-scored or recomputed to an effect of 0.0 (the headline does not move), "
        f"not listed: " + ", ".join(f"{fm} x{n}" for fm, n in sorted(counts.items())) + " (--json lists them "
        "under 'folded').\n\n"
    )


def render(findings: Sequence[Finding], n_groups: int, folded: Sequence[Finding] = ()) -> str:
    """The terminal table (largest |effect| first), the count of folded zero-effect findings, the
    counts per failure mode and the note that findings are hypotheses."""
    from tabulate import tabulate

    if not findings:
        return f"diagnose: {n_groups} model x task groups checked; no finding.\n{_folded_line(folded)}{NOT_A_VERDICT}"
    rows = [
        [
            f.failure_mode.split("-", 1)[0],
            f"{f.benchmark}.{f.task}",
            f.model,
            f.field,
            "" if f.effect_pp is None else f"{f.effect_pp:+.1f}",
            _evidence_text(f.evidence),
            f.hypothesis,
        ]
        for f in findings
    ]
    table = tabulate(
        rows,
        headers=["id", "task", "model", "field", "effect pp", "evidence", "hypothesis"],
        maxcolwidths=[None, None, 28, 22, None, 40, 70],
        disable_numparse=True,
    )
    counts = Counter(f.failure_mode for f in findings)
    summary = tabulate(
        [[fm, CATALOGUE[fm].title, counts[fm]] for fm in CATALOGUE if counts[fm]],
        headers=["failure mode", "title", "findings"],
    )
    return (
        f"diagnose: {n_groups} model x task groups checked, {len(findings)} findings\n\n{table}\n\n"
        f"{_folded_line(folded)}{summary}\n\n{NOT_A_VERDICT}"
    )


def to_json(findings: Sequence[Finding], n_groups: int, folded: Sequence[Finding] = ()) -> DiagnoseDocument:
    """The ``--json`` document: ``findings`` (benchmark, task, model, failure_mode, field, evidence, effect_pp, ...),
    largest |effect| first, and ``folded``: the zero-effect findings, counted apart (``n_folded``)."""
    return {
        "diagnose_version": "benchaudit.diagnose/1",
        "n_groups": n_groups,
        "note": NOT_A_VERDICT,
        "catalogue": {
            fm.id: {"title": fm.title, "field": fm.field, "stage": fm.stage, "source": fm.source}
            for fm in CATALOGUE.values()
        },
        "findings": [f.row() for f in findings],
        "n_folded": len(folded),
        "folded": [f.row() for f in folded],
    }
