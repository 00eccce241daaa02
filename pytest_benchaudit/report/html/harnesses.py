"""The cross-harness section of the audit report (``benchaudit audit RUN --pipelines A,B,C``).

Rows are those of :mod:`pytest_benchaudit.audit.cross_harness` (``audit.json`` ``harnesses``): one table of
scores and moves (task x model x layer), then, per task x layer, the fields that differ from the base
layer, downstream and upstream apart, with both values and the layer's ``why``.  Every string is
escaped (:func:`.format.table`); numbers are rounded as the other sections round them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_benchaudit.report.html.format import esc, fmt, fmt_pp, fmt_share, note, table
from pytest_benchaudit.report.html.sets import section

__all__ = ["harnesses_section"]


def _score(value: Any, lower_is_better: bool) -> str:
    return fmt(value) if lower_is_better else fmt_share(value)


def _move(row: Mapping[str, Any], part: str) -> str:
    if row["is_base"] or row["score"] is None:
        return "—"
    if part != "total" and str(row.get("downstream_note", "")).startswith("not defined"):
        return "not defined"
    if row["lower_is_better"]:
        value = row.get(f"{part}_delta")
        return "—" if value is None else f"{float(value):+.3f}"
    return fmt_pp(row.get(f"{part}_pp"))


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def harnesses_section(rows: Sequence[Mapping[str, Any]] | None) -> str:
    """The section, or "" without rows (an audit without ``--pipelines``)."""
    rows = [r for r in rows or [] if isinstance(r, Mapping)]
    if not rows:
        return ""
    base = rows[0]["base_layer"]
    scores = [
        [
            r["task"],
            r["model"],
            r["layer"] + (" (base)" if r["is_base"] else ""),
            "—"
            if r["score"] is None
            else f"{_score(r['score'], r['lower_is_better'])} ({'valid' if r['denominator'] == 'valid' else 'all'})",
            _score(r["score_total"], r["lower_is_better"]),
            _score(r["score_valid"], r["lower_is_better"]),
            "—" if r["n"] is None else f"{r['n_valid']}/{r['n']}",
            _move(r, "total"),
            _move(r, "downstream"),
            _move(r, "upstream"),
            "—" if r.get("requests_compared") is None else f"{r['requests_identical']}/{r['requests_compared']}",
            r["note"],
        ]
        for r in rows
    ]
    fields: list[list[Any]] = []
    seen: set[tuple[str, str]] = set()
    for r in rows:
        key = (str(r["task"]), str(r["layer"]))
        if r["is_base"] or key in seen:
            continue
        seen.add(key)
        for part in ("downstream", "upstream"):
            for d in r.get(f"{part}_fields") or []:
                fields.append(
                    [
                        r["task"],
                        r["layer"],
                        part,
                        d["field"],
                        _value(d["base"]),
                        _value(d["layer"]),
                        d.get("why") or "—",
                    ]
                )
        if str(r.get("downstream_note", "")).startswith("not defined"):
            fields.append([r["task"], r["layer"], "downstream", "—", "—", "—", r["downstream_note"]])
    return section(
        "harnesses",
        f"Cross-harness table: each layer against {base}",
        note(
            f"{base} is the base: the benchmark's own reading. Per task and model, each layer's score over all "
            "questions and over the valid ones, and its move from the base in points (error metrics in their own "
            "unit), split into downstream (the base layer's stored outputs re-scored under the layer's extraction, "
            "scoring and aggregation fields) and upstream (the rest: the layer's own generations; the upstream "
            "fields act together, one set of generations). Where the layers ask different kinds of requests "
            "(generation against log-likelihood) the split is not defined and only the move is given."
        ),
        table(
            [
                "task",
                "model",
                "layer",
                "score (over)",
                "all questions",
                "valid only",
                "valid/n",
                "move",
                "downstream",
                "upstream",
                "requests identical",
                "note",
            ],
            scores,
        ),
        f"<h3>{esc('Fields that differ from ' + str(base))}</h3>",
        table(["task", "layer", "part", "field", f"value in {base}", "value in the layer", "why (the layer's)"], fields)
        if fields
        else note("No field differs: every layer listed has the base layer's pipeline."),
    )
