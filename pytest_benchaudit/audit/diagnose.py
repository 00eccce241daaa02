"""``diagnose``: the catalogued failure modes, checked on every model x task of some runs.

:func:`diagnose` is pure: it takes loaded runs (:class:`LoadedRun`: ``run.json`` and records,
as :func:`.offline.load_run` returns them) and returns :class:`Finding` objects (pydantic),
so the command (:mod:`pytest_benchaudit.cli.diagnose`) can print them and a report can render
them.  What a finding holds and how its effect is computed: :mod:`.diagnose_core`; the checks:
:mod:`.diagnose_checks`; the catalogue: :mod:`.diagnose_catalog` and docs/failure-modes.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_benchaudit.audit import diagnose_checks as checks
from pytest_benchaudit.audit import diagnose_data as data_checks
from pytest_benchaudit.audit.diagnose_catalog import CATALOGUE
from pytest_benchaudit.audit.diagnose_core import (
    Finding,
    LoadedRun,
    Resources,
    group_runs,
)

__all__ = ["NOT_A_VERDICT", "Finding", "LoadedRun", "diagnose", "render", "to_json"]


def diagnose(runs: Sequence[LoadedRun], *, resources: Resources | None = None,
             ledger_rows: Mapping[str, Mapping[str, Any]] | None = None) -> list[Finding]:
    """Every catalogued check on every benchmark x task x model of ``runs``; findings in a stable order.

    ``resources`` loads a task's lookup files when re-scoring needs them (alias graphs); without
    it such effects say they could not be computed.  ``ledger_rows`` maps a benchmark to its
    ledger row (:func:`.ledger.suite_ledger`); without it FM15 is not checked.
    """
    groups = group_runs(runs)
    group_checks: list[checks.Check] = [
        checks.check_valid_denominator, checks.check_stop_in_reasoning, checks.check_truncation,
        checks.check_provider_minimum, checks.check_reasoning_kept, checks.check_letters_anywhere,
        checks.check_echoed_options, data_checks.check_gold, data_checks.check_duplicates, checks.check_seed,
        checks.check_judge, checks.check_free_text_near_miss,
    ]
    findings: list[Finding] = []
    for group in groups:
        for check in group_checks:
            findings += check(group, resources)
    findings += data_checks.cross_task_checks(groups)
    findings += data_checks.size_checks(groups)
    if ledger_rows is not None:
        findings += data_checks.ledger_checks(groups, ledger_rows, resources)
    order = {fm: i for i, fm in enumerate(CATALOGUE)}
    findings.sort(key=lambda f: (f.benchmark, f.task, order.get(f.failure_mode, 99), f.model, f.pipeline, f.run))
    return findings


# --------------------------------------------------------------------------- output

NOT_A_VERDICT = ("Each finding is a hypothesis with evidence, not a verdict: check the quoted question ids "
                 "in the run's records before acting on it.")


def _evidence_text(evidence: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in evidence.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)]
    return ", ".join(parts)[:90]


def render(findings: Sequence[Finding], n_groups: int) -> str:
    """The terminal table, then the counts per failure mode and the note that findings are hypotheses."""
    from collections import Counter

    from tabulate import tabulate

    if not findings:
        return f"diagnose: {n_groups} model x task groups checked; no finding.\n{NOT_A_VERDICT}"
    rows = [[f.failure_mode.split("-", 1)[0], f"{f.benchmark}.{f.task}", f.model, f.field,
             "" if f.effect_pp is None else f"{f.effect_pp:+.1f}", _evidence_text(f.evidence), f.hypothesis]
            for f in findings]
    table = tabulate(rows, headers=["id", "task", "model", "field", "effect pp", "evidence", "hypothesis"],
                     maxcolwidths=[None, None, 28, 22, None, 40, 70], disable_numparse=True)
    counts = Counter(f.failure_mode for f in findings)
    summary = tabulate([[fm, CATALOGUE[fm].title, counts[fm]] for fm in CATALOGUE if counts[fm]],
                       headers=["failure mode", "title", "findings"])
    return (f"diagnose: {n_groups} model x task groups checked, {len(findings)} findings\n\n{table}\n\n{summary}\n\n"
            f"{NOT_A_VERDICT}")


def to_json(findings: Sequence[Finding], n_groups: int) -> dict[str, Any]:
    """The ``--json`` document: ``findings`` (benchmark, task, model, failure_mode, field, evidence, effect_pp, ...)."""
    return {"diagnose_version": "benchaudit.diagnose/1", "n_groups": n_groups, "note": NOT_A_VERDICT,
            "catalogue": {fm.id: {"title": fm.title, "field": fm.field, "stage": fm.stage, "source": fm.source}
                          for fm in CATALOGUE.values()},
            "findings": [f.model_dump(mode="json") for f in findings]}
