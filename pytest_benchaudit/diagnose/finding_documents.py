"""The shape of ``benchaudit diagnose --json`` and of its findings (also ``audit.json`` ``findings``).

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: a finding travels as the
JSON object it is written as (``Finding.model_dump(mode="json")``), typed key by key for the checker,
validated where it is read (:data:`FINDING`, :data:`DIAGNOSE`, ``extra="forbid"``).  ``evidence`` is
open: each failure mode quotes its own counts and question ids (see :mod:`.failure_modes`).

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.diagnose.failure_modes import Stage

__all__ = ["CatalogueEntry", "DIAGNOSE", "DiagnoseDocument", "EffectKind", "Evidence", "FINDING", "FindingRow"]

_FORBID = ConfigDict(extra="forbid")

EffectKind = Literal["rescored", "recomputed", "estimate", "none"]
#: What a finding quotes: counts, question ids, per-model effects; keys by failure mode.
Evidence = dict[str, JsonValue]


@with_config(_FORBID)
class FindingRow(TypedDict):
    """One finding as JSON (:class:`~pytest_benchaudit.diagnose.core.Finding` dumped): a failure
    mode suspected in one benchmark x task x model (``model = "*"``: every model)."""

    benchmark: str
    task: str
    model: str
    pipeline: str
    run: str
    failure_mode: str
    title: str
    field: str
    stage: Stage
    hypothesis: str
    evidence: Evidence
    effect_pp: float | None
    effect: str
    effect_kind: EffectKind
    effect_delta: float | None
    effect_is_zero: bool


@with_config(_FORBID)
class CatalogueEntry(TypedDict):
    """A failure mode of the catalogue, as the ``--json`` document lists it."""

    title: str
    field: str
    stage: Stage
    source: Literal["paper", "ours"]


@with_config(_FORBID)
class DiagnoseDocument(TypedDict):
    """``benchaudit diagnose --json``: the findings (largest |effect| first) and the folded ones."""

    diagnose_version: str
    n_groups: int
    note: str
    catalogue: dict[str, CatalogueEntry]
    findings: list[FindingRow]
    n_folded: int
    folded: list[FindingRow]
    # Checks that could not see their failure mode in some run, one line each (FM03 where the imported log
    # records no finish reason: lm-eval), so their silence is not read as "none found".
    not_checked: NotRequired[list[str]]


FINDING: TypeAdapter[FindingRow] = TypeAdapter(FindingRow)
DIAGNOSE: TypeAdapter[DiagnoseDocument] = TypeAdapter(DiagnoseDocument)
