"""The cross-harness table: per task x model, each layer's score and its move from the base layer, split.

``benchaudit audit RUN --pipelines released,inspect_evals,lm_eval`` reads one ``pytest --pipelines``
run.  The first layer listed is the base (the benchmark's own reading); for every other layer L and
every task x model:

- ``score`` (under L's denominator), ``score_total`` and ``score_valid`` (both denominators, as every
  table of the project shows them), ``n``, ``n_valid``;
- ``total``: L's score minus the base's;
- ``downstream``: the base layer's stored generations re-scored under L's extraction, scoring and
  aggregation fields, minus the base (what reading the same outputs as L does moves);
- ``upstream``: L's own score minus that re-scoring (what L's own requests move: prompt, inference,
  dataset fields together; one set of new generations changes them all at once).

``downstream + upstream == total`` exactly where all three are defined.  Where the two layers ask
different kinds of requests (``inference.request``: generation against log-likelihood of each
choice), the base's generations cannot be read as L reads its replies: downstream (and so upstream)
is *not defined*; the row says so and only the total is given.  A move across different metrics is
not defined either (different units).

Each row names the fields that explain the move, downstream and upstream apart, with both values and
L's ``why`` for the field; ``requests`` says how many of L's requests are byte-identical to the
base's (identical requests are never an upstream difference, whatever a field's value).

Pure: the caller (:mod:`pytest_benchaudit.audit.whole`) splits the run, re-scores and summarizes;
this module takes those results and cards and returns rows.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from pytest_benchaudit.audit.audit_documents import FieldDiffRow, HarnessTableRow
from pytest_benchaudit.audit.upstream import upstream_fields
from pytest_benchaudit.pipeline.card import nearest_why
from pytest_benchaudit.pipeline.stages import DOWNSTREAM_STAGES

__all__ = [
    "REQUEST_FIELD",
    "DEFAULT_REQUEST",
    "FieldDiff",
    "HarnessRow",
    "LayerInput",
    "downstream_defined",
    "downstream_fields",
    "harness_rows",
    "render_harnesses",
    "request_kind",
]

#: The pipeline field that says what kind of request a layer sends (absent from older cards: generation).
REQUEST_FIELD = "inference.request"
DEFAULT_REQUEST = "generate"

Card = Mapping[str, Any]
#: task key (``bench.task``) -> model -> a summary result row (:class:`pytest_benchaudit.aggregate.results.TaskResult`)
Results = Mapping[str, Mapping[str, Mapping[str, Any]]]


class FieldDiff(BaseModel):
    """One pipeline field whose value differs between the base layer and a layer."""

    field: str
    base: Any
    layer: Any
    why: str | None = None  # the layer's reason for its value (its ``why`` entry), where it gives one

    def row(self) -> FieldDiffRow:
        """The field as ``audit.json`` holds it (``model_dump(mode="json")``, typed)."""
        return FieldDiffRow(
            field=self.field, base=to_jsonable_python(self.base), layer=to_jsonable_python(self.layer), why=self.why
        )


class HarnessRow(BaseModel):
    """One task x model x layer of the cross-harness table (``audit.json`` ``harnesses``)."""

    task: str
    model: str
    layer: str
    base_layer: str
    is_base: bool
    metric: str | None = None
    lower_is_better: bool = False
    denominator: str | None = None
    n: int | None = None
    n_valid: int | None = None
    score: float | None = None
    score_total: float | None = None
    score_valid: float | None = None
    invalid_rate: float | None = None
    base_score: float | None = None
    rescored_score: float | None = None  # the base's generations under this layer's downstream fields
    total_delta: float | None = None
    downstream_delta: float | None = None
    upstream_delta: float | None = None
    total_pp: float | None = None  # the deltas in points, for higher-is-better metrics (None otherwise)
    downstream_pp: float | None = None
    upstream_pp: float | None = None
    request_kind: str | None = None
    base_request_kind: str | None = None
    requests_identical: int | None = None  # of requests_compared questions, the request byte-identical to the base's
    requests_compared: int | None = None
    downstream_fields: list[FieldDiff] = []
    upstream_fields: list[FieldDiff] = []
    downstream_note: str = ""
    note: str = ""

    def row(self) -> HarnessTableRow:
        """The row as ``audit.json`` holds it (``model_dump(mode="json")``, typed)."""
        return HarnessTableRow(
            task=self.task,
            model=self.model,
            layer=self.layer,
            base_layer=self.base_layer,
            is_base=self.is_base,
            metric=self.metric,
            lower_is_better=self.lower_is_better,
            denominator=self.denominator,
            n=self.n,
            n_valid=self.n_valid,
            score=self.score,
            score_total=self.score_total,
            score_valid=self.score_valid,
            invalid_rate=self.invalid_rate,
            base_score=self.base_score,
            rescored_score=self.rescored_score,
            total_delta=self.total_delta,
            downstream_delta=self.downstream_delta,
            upstream_delta=self.upstream_delta,
            total_pp=self.total_pp,
            downstream_pp=self.downstream_pp,
            upstream_pp=self.upstream_pp,
            request_kind=self.request_kind,
            base_request_kind=self.base_request_kind,
            requests_identical=self.requests_identical,
            requests_compared=self.requests_compared,
            downstream_fields=[d.row() for d in self.downstream_fields],
            upstream_fields=[d.row() for d in self.upstream_fields],
            downstream_note=self.downstream_note,
            note=self.note,
        )


@dataclass(frozen=True)
class LayerInput:
    """What the table needs of one layer of the run.

    ``cards``: its pipeline cards keyed ``bench.task``; ``results``: its own records summarized;
    ``rescored``: the *base* layer's records re-scored under this layer's downstream fields (empty for
    the base); ``rescore_notes``: per task, why it was not re-scored (when it was not);
    ``requests``: per (task, model), (identical, compared) requests against the base layer's."""

    name: str
    cards: Mapping[str, Card]
    results: Results
    rescored: Results = field(default_factory=dict)
    rescore_notes: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[tuple[str, str], tuple[int, int]] = field(default_factory=dict)


def request_kind(card: Card | None) -> str | None:
    """The kind of request a card's pipeline sends (``generate`` unless it names another); None without a card."""
    if card is None:
        return None
    return str((card.get("fields") or {}).get(REQUEST_FIELD, DEFAULT_REQUEST))


def downstream_defined(base: Card | None, layer: Card | None) -> str | None:
    """None when the base's generations can be re-scored as ``layer`` reads its replies, else why not."""
    a, b = request_kind(base), request_kind(layer)
    if a is None or b is None:
        return "no card of both layers for this task"
    if a != b:
        return (
            f"not defined: the layers ask different kinds of requests ({REQUEST_FIELD} {a!r} against {b!r}); "
            "the base layer's outputs cannot be read as this layer reads its replies, so only the total move "
            "is given"
        )
    return None


def downstream_fields(base: Mapping[str, Any], layer: Mapping[str, Any]) -> list[str]:
    """The extraction/scoring/aggregation fields (flat card names) whose values differ."""
    return sorted(
        f for f in set(base) | set(layer) if f.split(".", 1)[0] in DOWNSTREAM_STAGES and base.get(f) != layer.get(f)
    )


def _diffs(names: list[str], base: Card, layer: Card) -> list[FieldDiff]:
    a, b = base.get("fields") or {}, layer.get("fields") or {}
    return [
        FieldDiff(field=n, base=a.get(n), layer=b.get(n), why=nearest_why(layer.get("why") or {}, n)) for n in names
    ]


def _diff(x: Mapping[str, Any] | None, y: Mapping[str, Any] | None) -> float | None:
    """y's score minus x's, where both have one under the same metric."""
    if x is None or y is None or x.get("score") is None or y.get("score") is None or x["metric"] != y["metric"]:
        return None
    return float(y["score"]) - float(x["score"])


def _row(task: str, model: str, layer: LayerInput, base: LayerInput) -> HarnessRow:
    own = (layer.results.get(task) or {}).get(model)
    ref = (base.results.get(task) or {}).get(model)
    card, base_card = layer.cards.get(task), base.cards.get(task)
    row = HarnessRow(
        task=task,
        model=model,
        layer=layer.name,
        base_layer=base.name,
        is_base=layer is base,
        request_kind=request_kind(card),
        base_request_kind=request_kind(base_card),
        base_score=None if ref is None or ref.get("score") is None else float(ref["score"]),
    )
    if own is not None:
        row.metric, row.denominator = own["metric"], own["denominator"]
        row.lower_is_better = bool(own["lower_is_better"])
        row.n, row.n_valid, row.invalid_rate = own["n"], own["n_valid"], own["invalid_rate"]
        row.score, row.score_total, row.score_valid = own["score"], own["score_total"], own["score_valid"]
    if card is None:
        row.note = f"{task} has no {layer.name!r} layer: not asked under it"
        return row
    if own is None:
        row.note = f"no result for {model} under {layer.name!r} (skipped in the run)"
        return row
    if layer is base:
        row.note = "the base layer: the moves of the other layers are from this score"
        return row
    if ref is None:
        row.note = f"no {base.name!r} result for this task x model: no move to measure from"
        return row
    if own["metric"] != ref["metric"]:
        row.note = (
            f"different metrics ({ref['metric']!r} against {own['metric']!r}): the scores are in different "
            "units, no move is given"
        )
    assert base_card is not None  # a base result comes with its card
    a, b = base_card.get("fields") or {}, card.get("fields") or {}
    row.downstream_fields = _diffs(downstream_fields(a, b), base_card, card)
    row.upstream_fields = _diffs(upstream_fields(a, b), base_card, card)
    if (task, model) in layer.requests:
        row.requests_identical, row.requests_compared = layer.requests[(task, model)]
    row.total_delta = _diff(ref, own)
    why_not = downstream_defined(base_card, card)
    rescored = (layer.rescored.get(task) or {}).get(model)
    if why_not is not None:
        row.downstream_note = why_not
    elif rescored is None:
        row.downstream_note = "not re-scored: " + layer.rescore_notes.get(task, "no re-scored result for this task")
    else:
        row.rescored_score = None if rescored.get("score") is None else float(rescored["score"])
        row.downstream_delta, row.upstream_delta = _diff(ref, rescored), _diff(rescored, own)
        if row.downstream_delta is not None and row.upstream_delta is not None and row.total_delta is not None:
            # The two parts are each a difference of the same three scores: their sum is the total exactly
            # (up to float rounding); the total is kept as computed, the parts as they are.
            row.downstream_note = "the base layer's outputs re-scored under this layer's downstream fields"
    identical = (
        row.requests_compared is not None
        and row.requests_compared > 0
        and row.requests_identical == row.requests_compared
    )
    if identical and not row.note:
        row.note = (
            "every request byte-identical to the base layer's (a --pipelines run asks it once): the same "
            "generations" + (", whatever the upstream fields named" if row.upstream_fields else "")
        )
    if not row.upstream_fields and not row.note:
        row.note = "no upstream field differs: the upstream part is what the layer's own generations changed"
    if not row.note:
        row.note = (
            "upstream: the joint effect of the upstream fields named (one set of new generations, not "
            "separable per field)"
            if row.upstream_fields
            else ""
        )
    if not row.lower_is_better:
        for name in ("total", "downstream", "upstream"):
            value = getattr(row, f"{name}_delta")
            setattr(row, f"{name}_pp", None if value is None else 100 * value)
    return row


def harness_rows(base: LayerInput, others: Sequence[LayerInput]) -> list[HarnessRow]:
    """One row per task x model x layer (the base layer's first, then the others in the order given).

    A task a layer does not define gets a row saying so (no score, no move), never no row: every
    task x model of any layer is in the table under every layer."""
    layers = [base, *others]
    tasks = sorted({t for x in layers for t in (*x.cards, *x.results)})
    rows: list[HarnessRow] = []
    for task in tasks:
        models = sorted({m for x in layers for m in (x.results.get(task) or {})})
        for model in models:
            rows.extend(_row(task, model, x, base) for x in layers)
    return rows


def _fmt(value: float | None, lower_is_better: bool, pp: bool = False) -> str:
    if value is None:
        return "—"
    if lower_is_better:
        return f"{value:+.3f}" if pp else f"{value:.3f}"
    return f"{100 * value:+.1f}" if pp else f"{100 * value:.1f}%"


def _fields_text(diffs: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(str(d["field"]) for d in diffs) or "none"


def render_harnesses(rows: Sequence[Mapping[str, Any]], width: int = 120) -> str:
    """The table for the terminal: score over all questions / over the valid ones, the move in points
    (error metrics in their own unit) and its parts; then, per task x layer, the fields that explain each
    part (their values and ``why`` are in audit.json and the HTML report)."""
    from tabulate import tabulate

    if not rows:
        return ""
    table = []
    for r in rows:
        lib = bool(r["lower_is_better"])
        if r["score"] is None:
            score = both = "—"
        else:
            score = f"{_fmt(r['score'], lib)} ({'valid' if r['denominator'] == 'valid' else 'all'})"
            both = f"{_fmt(r['score_total'], lib)} / {_fmt(r['score_valid'], lib)} ({r['n_valid']}/{r['n']})"
        if r["is_base"] or r["score"] is None:
            total = down = up = "—"
        else:
            total, down, up = (_fmt(r[f"{k}_delta"], lib, pp=True) for k in ("total", "downstream", "upstream"))
            if r["downstream_note"].startswith("not defined"):
                down = up = "n/d"
        table.append(
            [r["task"], r["model"], r["layer"] + (" (base)" if r["is_base"] else ""), score, both, total, down, up]
        )
    lines = [
        f"Cross-harness table: each layer against {rows[0]['base_layer']} (the base, the benchmark's own "
        "reading). Score under the",
        "layer's denominator (over all questions or the valid ones); both beside it. Move in points (error",
        "metrics in their unit) = downstream (the base's outputs re-scored under the layer's reading) +",
        "upstream (the layer's own generations); n/d: not defined (another kind of request).",
        tabulate(
            table,
            headers=[
                "task",
                "model",
                "layer",
                "score (over)",
                "all / valid (valid/n)",
                "move",
                "downstream",
                "upstream",
            ],
            tablefmt="simple",
            disable_numparse=True,
        ),
    ]
    seen: set[tuple[str, str]] = set()
    for r in rows:
        key = (str(r["task"]), str(r["layer"]))
        if key in seen or (r["is_base"] and r["score"] is not None):
            continue
        seen.add(key)
        if r["is_base"] or (r["total_delta"] is None and not r["upstream_fields"] and not r["downstream_fields"]):
            lines.append(f"  {r['layer']} on {r['task']}: {r['note']}")  # nothing to compare: say why
            continue
        if not r["downstream_fields"] and not r["upstream_fields"]:
            lines.append(f"  {r['layer']} on {r['task']}: no field differs from {r['base_layer']}")
            continue
        lines.append(
            f"  {r['layer']} on {r['task']}: downstream fields {_fields_text(r['downstream_fields'])}; "
            f"upstream fields {_fields_text(r['upstream_fields'])}"
        )
        if r["downstream_note"].startswith("not defined"):
            lines.append(f"    downstream {r['downstream_note']}")
    return "\n".join(_wrap(line, width) for line in lines)


def _wrap(line: str, width: int) -> str:
    """A note line folded to ``width`` columns, its continuation indented (table lines are left alone)."""
    if len(line) <= width or not line.startswith("  "):
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.fill(line, width=width, subsequent_indent=indent, break_on_hyphens=False)
