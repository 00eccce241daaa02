"""The shape of ``audit.json`` (``benchaudit audit``): its rows (the ledger's are :mod:`pytest_benchaudit.ledger.ledger_documents`).

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: the audit document is
the JSON object it is written as, typed key by key for the checker, validated where it is read
(:data:`AUDIT`, ``extra="forbid"``) and published as a JSON Schema.

Where a key is a layer's name (an upstream field's value under the target layer, ``layer_runs``) the
row is open (``dict[str, JsonValue]``): a TypedDict cannot name a key chosen at run time.

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import NotRequired, Required

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.summary_documents import VariantDelta
from pytest_benchaudit.compare.compare_documents import CompareDocument
from pytest_benchaudit.diagnose.finding_documents import FindingRow

# The ledger's rows are declared by the ledger (pytest_benchaudit/ledger/), which `benchaudit ledger` reads
# without the compare package (scipy); audit.json holds them.
from pytest_benchaudit.ledger.ledger_documents import LedgerNote, LedgerRow

__all__ = [
    "AUDIT",
    "AttributionRow",
    "AuditDocument",
    "AuditLayers",
    "FieldDiffRow",
    "HarnessTableRow",
    "ScoreRow",
    "UpstreamAttributionRow",
    "UpstreamDifference",
    "UpstreamField",
    "UpstreamRequests",
]

_FORBID = ConfigDict(extra="forbid")


# ----------------------------------------------------------------------------- scores, attribution
@with_config(_FORBID)
class ScoreRow(TypedDict):
    """``scores``: per task x model x layer, both denominators and the headline; the invalid reasons and
    the repeats' error bars where the summary row has them (:func:`~pytest_benchaudit.audit.whole.scores_both_ways`)."""

    layer: str
    benchmark: str
    task: str
    model: str
    metric: str
    denominator: str
    n: int
    n_valid: int
    score: float | None
    score_total: float | None
    score_valid: float | None
    invalid_rate: float
    invalid_reasons: NotRequired[dict[str, int]]
    # "not recorded by lm-eval": the run's log holds no finish reason, so a count of 0 truncated would be false
    truncation: NotRequired[str]
    lower_is_better: NotRequired[bool]
    repeats: NotRequired[int]
    reducer: NotRequired[str]
    n_questions: NotRequired[int]
    se: NotRequired[float]
    se_clustered: NotRequired[float]
    ci95: NotRequired[list[float]]
    ci95_clustered: NotRequired[list[float]]
    sampling_sd: NotRequired[float]
    retest_agreement: NotRequired[float]
    ci95_method: NotRequired[str]
    ci95_clustered_method: NotRequired[str]
    clustered_by: NotRequired[str]
    n_groups: NotRequired[int]


@with_config(_FORBID)
class AttributionRow(VariantDelta):
    """``attribution``: one field's sweep variant (a summary ``variants`` row) and the run it re-scored."""

    run: str


# ----------------------------------------------------------------------------- upstream
#: One upstream field of a task: ``field``, ``stored`` (the run's value), the target layer's value under
#: the layer's name, and where the requests were rendered ``reason``, ``questions_identical``, ``questions``.
UpstreamField = dict[str, JsonValue]


@with_config(_FORBID)
class UpstreamRequests(TypedDict):
    """How many of a task's questions render the same request under both pipelines."""

    questions: int
    identical: int
    how: str


@with_config(_FORBID)
class UpstreamDifference(TypedDict, total=False):
    """``upstream_differences`` / ``upstream_same_requests``: one task's upstream fields that differ
    (:func:`~pytest_benchaudit.audit.whole.upstream_differences`; a ``--pipelines`` run's ``regenerated`` rows)."""

    task: Required[str]
    fields: Required[list[UpstreamField]]
    note: Required[str]
    differs: bool | None
    compared: str
    no_effect: list[UpstreamField]
    same_request: list[UpstreamField]
    requests: UpstreamRequests
    regenerated: bool


@with_config(_FORBID)
class UpstreamAttributionRow(TypedDict):
    """``upstream_attribution`` (a ``--pipelines`` run): per task x model, the move from the base layer
    split into downstream (re-scored) and upstream (regenerated) parts (:func:`~pytest_benchaudit.audit.layer_runs.upstream_attribution`)."""

    task: str
    model: str
    metric: str
    lower_is_better: bool
    base_score: float | None
    rescored_score: float | None
    target_score: float | None
    downstream_delta: float | None
    upstream_delta: float | None
    total_delta: float | None
    upstream_fields: list[str]
    note: str
    downstream_pp: float | None
    upstream_pp: float | None
    total_pp: float | None


# ----------------------------------------------------------------------------- cross-harness table
@with_config(_FORBID)
class FieldDiffRow(TypedDict):
    """One pipeline field whose value differs between the base layer and a layer (``FieldDiff`` dumped)."""

    field: str
    base: JsonValue
    layer: JsonValue
    why: str | None


@with_config(_FORBID)
class HarnessTableRow(TypedDict):
    """``harnesses``: one task x model x layer of the cross-harness table (``HarnessRow`` dumped)."""

    task: str
    model: str
    layer: str
    base_layer: str
    is_base: bool
    metric: str | None
    lower_is_better: bool
    denominator: str | None
    n: int | None
    n_valid: int | None
    score: float | None
    score_total: float | None
    score_valid: float | None
    invalid_rate: float | None
    base_score: float | None
    rescored_score: float | None
    total_delta: float | None
    downstream_delta: float | None
    upstream_delta: float | None
    total_pp: float | None
    downstream_pp: float | None
    upstream_pp: float | None
    request_kind: str | None
    base_request_kind: str | None
    requests_identical: int | None
    requests_compared: int | None
    downstream_fields: list[FieldDiffRow]
    upstream_fields: list[FieldDiffRow]
    downstream_note: str
    note: str


# ----------------------------------------------------------------------------- the audit document
# "from" is a keyword: the functional form.
AuditLayers = TypedDict(
    "AuditLayers",
    {
        "from": list[str],  # the layers the audited runs were made under
        "toward": str,  # the target layer
        "harnesses": NotRequired[list[str]],  # --pipelines: the cross-harness table's layers, the base first
    },
)
with_config(_FORBID)(AuditLayers)


@with_config(_FORBID)
class AuditDocument(TypedDict):
    """What ``audit.json`` holds (:func:`~pytest_benchaudit.audit.whole.build_audit`); ``compare`` is the
    compare document of the two layers (``compare.json``'s shape)."""

    version: str
    created: str
    runs: list[str]
    layers: AuditLayers
    rescored_runs: list[str]
    extraction_only_runs: list[str]
    scores: list[ScoreRow]
    attribution: list[AttributionRow]
    upstream_differences: list[UpstreamDifference]
    upstream_same_requests: list[UpstreamDifference]
    ledger: list[LedgerRow | LedgerNote]
    findings: list[FindingRow]
    exports: list[str]
    compare: CompareDocument
    how: str
    # A --pipelines run: each layer's split run, and the upstream part of each move.
    layer_runs: NotRequired[dict[str, str]]
    upstream_attribution: NotRequired[list[UpstreamAttributionRow]]
    harnesses: NotRequired[list[HarnessTableRow]]


AUDIT: TypeAdapter[AuditDocument] = TypeAdapter(AuditDocument)
