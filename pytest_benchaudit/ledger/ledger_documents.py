"""The shapes of the ledger (``benchaudit ledger --format json``, and audit.json's ``ledger`` rows).

Part of the ledger package, not of :mod:`pytest_benchaudit.audit.audit_documents` (whose ``ledger`` rows
they are), so that ``benchaudit ledger`` reads them without importing the compare package and scipy
(its start-up: ``bench/startup.py``).  TypedDicts
for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives; validated by :data:`LEDGER`.

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import NotRequired

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

__all__ = [
    "LEDGER",
    "LedgerCell",
    "LedgerDocument",
    "LedgerNote",
    "LedgerRow",
    "LedgerTotals",
    "LeafValues",
    "PaperView",
    "PeerField",
    "PeerLayer",
    "TemplateContrast",
    "TemplateContrastPeer",
]

_FORBID = ConfigDict(extra="forbid")


# ----------------------------------------------------------------------------- ledger
@with_config(_FORBID)
class TemplateContrast(TypedDict):
    """A template field whose text differs between the documented and the released template."""

    documented: JsonValue
    released: JsonValue


@with_config(_FORBID)
class LeafValues(TypedDict):
    """A contradicted leaf's two values (and, for ``prompt.template``, the template fields that differ)."""

    documented: JsonValue
    released: JsonValue
    content: NotRequired[dict[str, TemplateContrast]]


@with_config(_FORBID)
class TemplateContrastPeer(TypedDict):
    """A template field whose text differs between the released and a peer layer's template."""

    released: JsonValue
    peer: JsonValue


@with_config(_FORBID)
class PeerField(TypedDict):
    """One field in which a peer layer differs from ``released`` (in the tasks named)."""

    field: str
    released: JsonValue
    peer: JsonValue
    why: str | None
    tasks: list[str]
    content: dict[str, TemplateContrastPeer]  # prompt.template: template field -> both texts


@with_config(_FORBID)
class PeerLayer(TypedDict):
    """A peer layer of a suite (``peers`` of a ledger row; :mod:`~pytest_benchaudit.ledger.ledger_peers`):
    the tasks that define it and its fields that differ from ``released``."""

    layer: str
    tasks: list[str]
    fields: list[PeerField]
    missing_released: list[str]  # tasks with this layer but no released layer to compare with
    notes: list[str]


@with_config(_FORBID)
class LedgerCell(TypedDict):
    """One benchmark x field cell of the ledger: the status, per task, and why."""

    status: str
    tasks: dict[str, str]  # task -> status
    values: dict[str, dict[str, LeafValues]]  # task -> contradicted leaf -> values
    moot: dict[str, str]  # leaf -> why it cannot matter
    why: dict[str, dict[str, str]]  # "documented"/"released" -> why key -> text
    notes: list[str]
    note: str


@with_config(_FORBID)
class LedgerRow(TypedDict):
    """One benchmark's ledger row (:func:`~pytest_benchaudit.ledger.ledger_rows.suite_ledger`)."""

    benchmark: str
    title: str
    suite: str
    tasks: list[str]
    cells: dict[str, LedgerCell]  # ledger field -> cell
    counts: dict[str, int]  # status -> pipeline fields
    dataset: str
    not_reproducible: int
    fields_total: int
    summary: str
    sources: list[str]
    unread: list[str]
    quirks: list[str]
    quirks_source: str
    peers: NotRequired[list[PeerLayer]]  # only where the suite has peer layers


@with_config(_FORBID)
class LedgerNote(TypedDict):
    """What ``audit.json`` ``ledger`` holds instead of rows when the suites cannot be read."""

    note: str


@with_config(_FORBID)
class PaperView(TypedDict):
    """Our counts over the cells read next to the paper's (shares)."""

    cells_read: int
    cells_unread: int
    ours_over_read: dict[str, int]
    ours_share: dict[str, float | None]
    paper_counts: dict[str, int]
    paper_share: dict[str, float]


@with_config(_FORBID)
class LedgerTotals(TypedDict):
    benchmarks: int
    cells: int
    counts: dict[str, int]
    paper_counts: dict[str, int]
    dataset_counts: dict[str, int]
    not_reproducible: int
    fields_total: int
    summary: str
    paper_view: PaperView


@with_config(_FORBID)
class LedgerDocument(TypedDict):
    """The ledger of every suite (:func:`~pytest_benchaudit.ledger.ledger_rows.build_ledger`)."""

    ledger_version: str
    compares: list[str]
    fields: list[str]
    dataset_field: str
    statuses: list[str]
    benchmarks: list[LedgerRow]
    totals: LedgerTotals


LEDGER: TypeAdapter[LedgerDocument] = TypeAdapter(LedgerDocument)
