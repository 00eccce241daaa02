"""Single-field counterfactuals (``--vary FIELD=v1,v2,...``): the base pipeline and its variants.

From the base pipeline (layer + ``--set``) and ``RunOptions.vary``, :func:`build_variants`
returns the base itself (variant name ``""``) followed by one variant per
``(field, value)`` in the order given; each variant changes exactly that one field
of the base (single-field counterfactuals, not a cross product of the ``--vary``
options).

Names are readable and stable: ``max_tokens=5``, ``denominator=valid``,
``stop=["\\n"]``.  A field is named by its last dotted segment when that segment
says what it is on its own; fields whose last segment is generic (``rule``,
``method``, ``mode``, ...) or which are whole stages keep the full dotted name
(``extraction.rule=final_line``).  The value in the name is the value as the
pipeline validated it (``5.0`` for an int field reads ``5``), so the same variant
gets the same item ids whatever the command-line spelling.

A value equal to the base value is **kept** as a variant, flagged ``same_as_base``:
the set of variants (and so the item ids, ``--lf`` and the counterfactual table)
then depends only on the command, not on which layer or ``--set`` made the base; the
sweep reads as asked (``max_tokens=5,16,2048`` shows three rows even where the base
already uses 2048); and it costs no generation, since its requests are the base's
requests and the engine de-duplicates identical requests.

A variant is *upstream* when the field belongs to a stage in
:data:`~pytest_benchaudit.pipeline.stages.UPSTREAM_STAGES` (dataset, prompt, inference: the
model is asked something else, so it needs new generations), *downstream* otherwise
(extraction, scoring, aggregation: it reads the base generation again, so it sends
the very same request as the base and costs no extra request).

Layers as variants (``--pipelines A,B``): :func:`layer_variant` makes each layer of a
multi-layer run a variant of the first one listed.  The first layer is the base (variant
``""``, card key ``bench.task``); every other layer is the variant named after the layer
(``standardized``, card key ``bench.task|standardized``; a layer name has no ``=``, so it
never collides with a ``--vary`` name).  Its ``kind`` is ``layer``; it lists the upstream
fields in which it differs from the base layer: where there are none, its requests are the
base's requests and the engine asks once for both.

Pure: no pytest, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from pydantic import JsonValue

from pytest_benchaudit.pipeline.layering import apply_overrides, check_override
from pytest_benchaudit.pipeline.record_documents import PipelineCard, VariantInfo
from pytest_benchaudit.pipeline.stages import (
    UPSTREAM_STAGES,
    Pipeline,
    PipelineError,
    field_paths,
    parse_override,
)

__all__ = [
    "BASE",
    "Variant",
    "build_variants",
    "card_for",
    "card_key",
    "layer_variant",
    "parse_vary",
    "short_field",
    "variant_name",
]

BASE = ""

# Last segments that do not say on their own which field they are: keep the dotted name.
_GENERIC = frozenset(
    {"rule", "method", "by", "mode", "format", "source", "revision", "files", "split", "subset", "metric", "template"}
)


@dataclass(frozen=True)
class Variant:
    """One pipeline of a run: the base (``name == ""``) or a single-field counterfactual."""

    name: str
    pipeline: Pipeline
    field: str | None = None  # the dotted field changed (None for the base)
    value: JsonValue = None  # its value in this variant (as validated, JSON-ready)
    base_value: JsonValue = None  # its value in the base
    same_as_base: bool = False  # the value equals the base's: identical pipeline stages
    layer: str | None = None  # --pipelines: the layer this variant is (None for a --vary variant)
    upstream_fields: tuple[str, ...] | None = None  # a layer: upstream fields differing from the base layer's

    @property
    def is_layer(self) -> bool:
        return self.layer is not None

    @property
    def is_base(self) -> bool:
        return self.name == BASE

    @property
    def stage(self) -> str | None:
        return None if self.field is None else self.field.split(".", 1)[0]

    @property
    def upstream(self) -> bool:
        """True when the model must be asked again (dataset, prompt or inference changed)."""
        return self.stage in UPSTREAM_STAGES and not self.same_as_base

    def info(self) -> VariantInfo:
        """What the pipeline card of this variant says about it (``card["variant"]``)."""
        layer = self.layer
        if layer is not None:  # self.is_layer
            return {
                "name": self.name,
                "field": None,
                "value": layer,
                "base_value": self.base_value,
                "stage": None,
                "kind": "layer",
                "layer": layer,
                "base_layer": self.base_value,
                "upstream_fields": None if self.upstream_fields is None else list(self.upstream_fields),
                "needs_generations": self.upstream_fields is None or bool(self.upstream_fields),
                "same_as_base": self.same_as_base,
            }
        return {
            "name": self.name,
            "field": self.field,
            "value": self.value,
            "base_value": self.base_value,
            "stage": self.stage,
            "kind": "base" if self.is_base else ("upstream" if self.stage in UPSTREAM_STAGES else "downstream"),
            "needs_generations": self.upstream,
            "same_as_base": self.same_as_base,
        }


def card_key(benchmark: str, task: str, variant: str = BASE) -> str:
    """Key of a pipeline card (run.json ``pipeline_cards``): ``bench.task`` or ``bench.task|variant``.

    The one spelling of that key; every reader and writer of cards goes through it or
    :func:`card_for`.
    """
    return f"{benchmark}.{task}" if not variant else f"{benchmark}.{task}|{variant}"


def card_for(cards: Mapping[str, PipelineCard], benchmark: str, task: str, variant: str = BASE) -> PipelineCard:
    """The card a variant was scored under (a copy): its own, else the task's base card, else ``{}``.

    ``{}`` is not a whole card (no ``hash``, no ``fields``): it is typed as one because every reader
    of a looked-up card reads it with ``.get`` and a default (a run without cards, a card from
    before a key existed), and the summary shows it as the empty object it is."""
    card = cards.get(card_key(benchmark, task, variant)) or cards.get(card_key(benchmark, task))
    return card.copy() if card else cast(PipelineCard, {})


def short_field(path: str) -> str:
    """``inference.max_tokens`` -> ``max_tokens``; generic or ambiguous last segments keep the full path."""
    if "." not in path:
        return path  # a whole stage
    last = path.rsplit(".", 1)[1]
    if last in _GENERIC or sum(1 for p in field_paths() if p.rsplit(".", 1)[-1] == last) > 1:
        return path
    return last


def _value_text(value: JsonValue) -> str:
    if isinstance(value, str) and value and all(c.isalnum() or c in "_-./+@" for c in value):
        return value
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=True)
    return text.replace("::", ":\\u003a")  # never a node-id separator inside an item name


def variant_name(path: str, value: JsonValue) -> str:
    """Readable, stable name of the variant setting ``path`` to ``value``: ``max_tokens=5``."""
    return f"{short_field(path)}={_value_text(value)}"


def _get(data: dict[str, JsonValue], path: str) -> JsonValue:
    value: JsonValue = data
    for part in path.split("."):
        assert isinstance(value, dict), f"{path}: not an object at {part!r}"
        value = value[part]
    return value


def build_variants(base: Pipeline, vary: list[tuple[str, list[JsonValue]]]) -> list[Variant]:
    """The base, then one variant per (field, value) of ``vary``, in order; duplicates once.

    Raises :class:`PipelineError` (naming the field and value) when a value does not fit
    this base, e.g. ``scoring.metric`` set to a metric of another task family.
    """
    out = [Variant(name=BASE, pipeline=base)]
    seen = {BASE}
    base_stages = base.stages()
    for path, values in vary:
        for value in values:
            try:
                pipe = apply_overrides(base, [(path, value)])
            except PipelineError as err:
                raise PipelineError(str(err).replace("--set", "--vary", 1)) from None
            normalised = _get(pipe.model_dump(mode="json"), path)
            name = variant_name(path, normalised)
            if name in seen:
                continue
            seen.add(name)
            out.append(
                Variant(
                    name=name,
                    pipeline=pipe,
                    field=path,
                    value=normalised,
                    base_value=_get(base.model_dump(mode="json"), path),
                    same_as_base=pipe.stages() == base_stages,
                )
            )
    return out


def layer_variant(layer: str, pipeline: Pipeline, base_layer: str, base: Pipeline | None) -> Variant:
    """Layer ``layer`` of a ``--pipelines`` run whose first layer is ``base_layer`` (``base``: that
    layer's pipeline of the same task, None when the task lacks it): the base itself when
    ``layer == base_layer``, else the variant named ``layer`` with the upstream fields that differ."""
    if layer == base_layer:
        return Variant(name=BASE, pipeline=pipeline, layer=layer, base_value=base_layer)
    upstream = None
    if base is not None:
        a, b = base.card()["fields"], pipeline.card()["fields"]
        upstream = tuple(
            sorted(f for f in set(a) | set(b) if f.split(".", 1)[0] in UPSTREAM_STAGES and a.get(f) != b.get(f))
        )
    return Variant(
        name=layer,
        pipeline=pipeline,
        layer=layer,
        base_value=base_layer,
        upstream_fields=upstream,
        same_as_base=base is not None and base.stages() == pipeline.stages(),
    )


def parse_vary(text: str) -> tuple[str, list[JsonValue]]:
    """``FIELD=v1,v2,...`` -> (field, [values]); each value validated like ``--set FIELD=value``.

    Values are split on commas outside brackets and quotes, so ``inference.stop=["\\n"],[]``
    gives two values.
    """
    if "=" not in text:
        raise PipelineError(f"--vary {text!r}: expected FIELD=V1,V2,..., e.g. inference.max_tokens=5,16,2048")
    name, raw = text.split("=", 1)
    values: list[JsonValue] = []
    for part in _split_values(raw):
        try:
            path, value = parse_override(f"{name}={part}")
            check_override(path, value)  # its stage's rules; pass_k within repeats: against each layer
        except PipelineError as err:
            raise PipelineError(str(err).replace("--set", "--vary", 1)) from None
        values.append(value)
    if not values:
        raise PipelineError(f"--vary {text!r}: no values")
    return name.strip(), values


def _split_values(raw: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", ""
    for ch in raw:
        if quote:
            current += ch
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote, current = ch, current + ch
        elif ch in "[{":
            depth, current = depth + 1, current + ch
        elif ch in "]}":
            depth, current = depth - 1, current + ch
        elif ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in (s.strip() for s in parts) if p]
