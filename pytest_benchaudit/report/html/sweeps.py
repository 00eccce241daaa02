"""The rows of the report's per-field score deltas (``sweeps``): one type for their three producers.

* ``benchaudit compare --html``: the summaries' ``variants`` rows (:class:`~pytest_benchaudit.aggregate.summary_documents.VariantDelta`);
* ``benchaudit audit``: the single-field attribution rows that moved a score
  (:class:`~pytest_benchaudit.audit.audit_documents.AttributionRow`, a VariantDelta with its ``run``) and, for a
  ``--pipelines`` run, each ``upstream_attribution`` row with upstream fields as an :class:`UpstreamSweepRow`
  (the upstream fields together, one set of new generations).

:data:`SweepRow` is their union; the sections (:mod:`.verdict`, :mod:`.causes`, :mod:`.audits`, :mod:`.plots`)
read the keys all three have with ``[]``/``get`` and the others through :func:`value_of` and :func:`run_of`.
Never written as JSON.
"""

from typing import final

from pydantic import JsonValue
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.summary_documents import VariantDelta

__all__ = ["SweepRow", "UpstreamSweepRow", "run_of", "value_of"]


# final: it has no other keys, so `"value" in row` tells a VariantDelta from it (mypy narrows on that).
@final
class UpstreamSweepRow(TypedDict):
    """An upstream_attribution row as the report's per-field deltas show it (beside the sweep variants)."""

    benchmark: str
    task: str
    model: str
    variant: str
    field: str
    base_score: float | None
    score: float | None
    delta: float | None
    delta_pp: float | None
    invalid_rate: None
    moved_by: str
    moved_by_detail: str


#: A row of the per-field deltas: a variant (an attribution row is one, with its ``run``) or the upstream fields.
SweepRow = VariantDelta | UpstreamSweepRow


def value_of(row: SweepRow) -> JsonValue:
    """The value the row's field was set to; None for the upstream fields together (no one value)."""
    return row["value"] if "value" in row else None


def run_of(row: SweepRow) -> str | None:
    """The run an attribution row re-scored (``run``); None for a summary's variant or the upstream fields."""
    run = row.get("run")  # only an AttributionRow (a VariantDelta with more keys) has it
    return run if isinstance(run, str) else None
