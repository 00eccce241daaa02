"""The ledger's peer layers: where a general harness's layer differs from the benchmark's ``released`` one.

A suite may carry layers that say what a general harness does with the benchmark (``inspect_evals``,
``lm_eval`` and their variants such as ``lm_eval_5shot``; :data:`pytest_benchaudit.pipeline.stages.PEER_LAYERS`).
For each such layer, :func:`peer_differences` lists every pipeline field (flat card name, every stage)
whose value differs from the task's ``released`` layer, with both values, the peer layer's ``why`` for
the field (its own key, else the nearest key above it) and, for ``prompt.template``, the template fields
whose text differs (two names can stand for the same text: then the field is not listed).  A field that
differs the same way in several tasks is one entry naming those tasks.

The ledger (:mod:`pytest_benchaudit.ledger.ledger_rows`) adds the list to a benchmark's row as ``peers`` only
when the suite has peer layers, so the rows of other benchmarks are unchanged.
"""

from __future__ import annotations

import json

from pydantic import JsonValue

from pytest_benchaudit.dataset.suites import Suite
from pytest_benchaudit.ledger.ledger_documents import PeerField, PeerLayer, TemplateContrastPeer
from pytest_benchaudit.pipeline.card import nearest_why
from pytest_benchaudit.pipeline.stages import PEER_LAYERS

__all__ = ["PeerField", "PeerLayer", "is_peer_layer", "peer_differences"]

BASE_LAYER = "released"


def is_peer_layer(name: str) -> bool:
    """``inspect_evals``, ``lm_eval`` or a named variant of one (``lm_eval_5shot``)."""
    return any(name == p or (name.startswith(f"{p}_") and len(name) > len(p) + 1) for p in PEER_LAYERS)


def _content(suite: Suite, released: JsonValue, peer: JsonValue) -> dict[str, TemplateContrastPeer]:
    """The template fields whose text differs between two template names (empty when either is unknown)."""
    if (
        not isinstance(released, str)
        or not isinstance(peer, str)
        or released not in suite.templates
        or peer not in suite.templates
    ):
        return {}
    a, b = suite.templates[released].model_dump(mode="json"), suite.templates[peer].model_dump(mode="json")
    return {
        k: TemplateContrastPeer(released=a.get(k), peer=b.get(k))
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    }


def peer_differences(suite: Suite) -> list[PeerLayer]:
    """Every peer layer of ``suite`` (sorted by name) with its fields that differ from ``released``."""
    names = sorted({layer for spec in suite.tasks.values() for layer in spec.layers if is_peer_layer(layer)})
    out: list[PeerLayer] = []
    for name in names:
        tasks = [t for t, spec in suite.tasks.items() if name in spec.layers]
        found: dict[str, PeerField] = {}
        missing: list[str] = []
        notes: list[str] = []
        for task in tasks:
            if BASE_LAYER not in suite.tasks[task].layers:
                missing.append(task)
                continue
            released, peer = suite.pipeline(task, BASE_LAYER), suite.pipeline(task, name)
            notes += [n for n in peer.notes if n not in notes]
            a, b = released.card()["fields"], peer.card()["fields"]
            for f in sorted(set(a) | set(b)):
                r, p = a.get(f), b.get(f)
                if r == p:
                    continue
                content = _content(suite, r, p) if f == "prompt.template" else {}
                if f == "prompt.template" and r in suite.templates and p in suite.templates and not content:
                    continue  # two names for the same text: nothing sent differs
                key = json.dumps([f, r, p], sort_keys=True, default=str)
                if key in found:
                    found[key]["tasks"].append(task)
                else:
                    found[key] = PeerField(
                        field=f, released=r, peer=p, why=nearest_why(peer.why, f), tasks=[task], content=content
                    )
        out.append(
            PeerLayer(
                layer=name,
                tasks=tasks,
                fields=sorted(found.values(), key=lambda x: x["field"]),
                missing_released=missing,
                notes=notes,
            )
        )
    return out
