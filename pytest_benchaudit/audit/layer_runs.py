"""Runs made under several layers at once (``pytest ... --pipelines A,B``), for ``benchaudit audit``.

Such a run holds each question x model once per layer: the first layer's records are the base
(variant ``""``, card ``bench.task``), every other layer's records the variant named after the
layer (card ``bench.task|LAYER``, ``kind = "layer"``; see :func:`pytest_benchaudit.pipeline.variants.layer_variant`).

:func:`split_layers` writes one ordinary single-layer run directory per layer (records with
variant ``""``, cards keyed ``bench.task``), so every analysis of single-layer runs (re-scoring,
the field sweep, compare, sensitivity, diagnose) reads a layer as it reads any run.

:func:`upstream_attribution` splits the move from the base layer to the target layer, per task x
model, in two parts that add up to it: ``downstream`` (the base layer's generations re-scored under
the target layer's extraction/scoring/aggregation fields, minus the base) and ``upstream`` (the
target layer's own generations minus that re-scoring): the joint effect of every upstream field
(dataset, prompt, inference) in which the layers differ.  The fields are named; their parts are
not separated (one set of new generations changes them all at once).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
from pytest_benchaudit.aggregate.summary_documents import TaskResult
from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordRow
from pytest_benchaudit.pipeline.stages import UPSTREAM_STAGES
from pytest_benchaudit.rescore.run_dirs import RescoreError
from pytest_benchaudit.runs.run_meta import run_layers
from pytest_benchaudit.runs.store import RunDirectory, load_run, read_run_json

if TYPE_CHECKING:  # audit.audit_documents imports the compare package (scipy)
    from pytest_benchaudit.audit.audit_documents import UpstreamAttributionRow

__all__ = ["split_layers", "layer_cards", "upstream_fields_between", "upstream_attribution"]


def layer_cards(cards: Cards, layer: str) -> Cards:
    """The cards of one layer of a ``--pipelines`` run, keyed ``bench.task`` (no layer variant info)."""
    out: Cards = {}
    for key, card in cards.items():
        if (
            isinstance(card, dict)
            and card.get("pipeline") == layer
            and ("|" not in key or ((variant := card.get("variant")) is not None and variant["kind"] == "layer"))
        ):
            these = card.copy()
            these.pop("variant", None)
            out[key.split("|", 1)[0]] = these
    return out


def upstream_fields_between(base: PipelineCard | None, target: PipelineCard | None) -> list[str]:
    """The dataset/prompt/inference fields whose values differ between two cards of a task (None: no card)."""
    a = base.get("fields", {}) if base is not None else {}
    b = target.get("fields", {}) if target is not None else {}
    return sorted(f for f in set(a) | set(b) if f.split(".", 1)[0] in UPSTREAM_STAGES and a.get(f) != b.get(f))


def _base_variant(record: RecordRow) -> RecordRow:
    """``record`` as a single-layer run holds it: variant ``""``."""
    out = record.copy()
    out["variant"] = ""
    return out


def split_layers(run_dir: Path, out: Path) -> dict[str, Path]:
    """One single-layer run directory per layer of the ``--pipelines`` run ``run_dir``, under ``out/LAYER/``."""
    meta, records = load_run(run_dir, require_records=True)
    layers = run_layers(meta)
    if not layers:
        raise RescoreError(f"{run_dir}: not a --pipelines run (run.json lists no layers)")
    cards = meta.get("pipeline_cards") or {}
    paths: dict[str, Path] = {}
    for layer in layers:
        recs = [
            _base_variant(r)
            for r in records
            if r.get("pipeline") == layer and (not r.get("variant") or r.get("variant") == layer)
        ]
        if not recs:
            continue
        these = layer_cards(cards, layer)
        old = out / layer / Path(run_dir).name
        if (old / "run.json").is_file() and read_run_json(old).get("source", {}).get("kind") == "layer":
            shutil.rmtree(old)  # this split, written by an earlier audit into the same --out
        try:
            target = RunDirectory(out / layer, Path(run_dir).name)
        except RunDirError as err:
            raise RescoreError(str(err)) from None
        target.append_many(recs)
        results = summarize(recs, these)
        target.write_json("summary.json", summary_document(results, benchmark_scores(results, these), [], these))
        kept = {
            k: v
            for k, v in meta.items()
            if k not in ("pipelines", "pipeline", "pipeline_cards", "source", "run_id", "ended", "n_records")
        }
        target.finish(
            **kept,
            pipeline=layer,
            pipeline_cards=these,
            source={"kind": "layer", "run_dir": str(run_dir), "run_id": meta.get("run_id"), "layer": layer},
        )
        paths[layer] = target.path
    missing = [x for x in layers if x not in paths]
    if len(paths) < 2:
        raise RescoreError(
            f"{run_dir}: records of only {', '.join(paths) or 'no layer'}; no records under {', '.join(missing)}"
        )
    return paths


def upstream_attribution(
    base: Mapping[str, Mapping[str, TaskResult]],
    rescored: Mapping[str, Mapping[str, TaskResult]],
    target: Mapping[str, Mapping[str, TaskResult]],
    base_cards: Cards,
    target_cards: Cards,
) -> list[UpstreamAttributionRow]:
    """Per task x model: base -> (downstream: re-scored) -> (upstream: regenerated) target, each part's effect.

    ``base``/``rescored``/``target``: task key -> model -> summary result (the base layer, its records
    re-scored toward the target layer, the target layer's own records).  Effects are in the metric's
    unit (``delta``) and, for higher-is-better metrics, in points (``*_pp``); ``None`` where a part
    has no score.  ``upstream_fields`` names the differing fields; their effect is one number.
    """
    rows: list[UpstreamAttributionRow] = []
    for key in sorted(target):
        # A task the base layer lacks has no base card: nothing to attribute, no fields to name.
        fields = upstream_fields_between(base_cards[key], target_cards.get(key)) if key in base_cards else []
        for model in sorted(target[key]):
            t = target[key][model]
            b = (base.get(key) or {}).get(model)
            r = (rescored.get(key) or {}).get(model)
            lib = bool(t["lower_is_better"])

            def diff(x: TaskResult | None, y: TaskResult | None) -> float | None:
                if x is None or y is None or x["score"] is None or y["score"] is None or x["metric"] != y["metric"]:
                    return None
                return float(y["score"]) - float(x["score"])

            down, up, total = diff(b, r), diff(r, t), diff(b, t)

            def pp(value: float | None) -> float | None:
                return None if value is None or lib else 100 * value  # noqa: B023 - called within this iteration

            row: UpstreamAttributionRow = {
                "task": key,
                "model": model,
                "metric": t["metric"],
                "lower_is_better": lib,
                "base_score": None if b is None else b["score"],
                "rescored_score": None if r is None else r["score"],
                "target_score": t["score"],
                "downstream_delta": down,
                "upstream_delta": up,
                "total_delta": total,
                "upstream_fields": fields,
                "note": (
                    "the layers send the same requests: the same generations, no upstream effect"
                    if not fields
                    else "joint effect of the upstream fields named (one set of new generations: not "
                    "separable per field)"
                ),
                "downstream_pp": pp(down),
                "upstream_pp": pp(up),
                "total_pp": pp(total),
            }
            if b is None:
                row["note"] = "the task has no base-layer result (the base layer skipped it)"
            rows.append(row)
    return rows
