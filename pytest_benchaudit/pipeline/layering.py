"""How a task's pipeline is composed from layers, top over bottom, in one place.

1. A suite file over the file it ``extends`` (the project's shared standardized layer and
   templates): the two files' tables merged by :func:`deep_merge`
   (:mod:`pytest_benchaudit.dataset.suites` reads the files).
2. A task's layer: the suite's shared ``[layers.NAME]`` table under the task's own
   ``[tasks.TASK.NAME]``, then ``base = "OTHER"`` (a layer that is another layer of the same task
   with a few fields changed): :func:`task_layers`.  The suite adds the dataset's defaults (source,
   revision, files) under the layer's own ``dataset`` fields and validates the result
   (:meth:`pytest_benchaudit.dataset.suites.Suite.pipeline`).
3. ``--set FIELD=VALUE`` over the resolved pipeline (an object value merges into the object
   there): :func:`apply_overrides`.
4. Re-scoring a stored run toward another layer: that layer's downstream stages over the stored
   pipeline, its upstream stages kept as stored (they decided what the model was asked), then
   ``--set``: :func:`retarget`.

Pure: no pytest, no I/O.  The pipeline model itself (its stages, fields, hashes and card) is
:mod:`pytest_benchaudit.pipeline.stages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, JsonValue, ValidationError

from pytest_benchaudit.pipeline.stages import (
    DOWNSTREAM_STAGES,
    LAYERS,
    UPSTREAM_STAGES,
    Pipeline,
    PipelineError,
    _describe_error,
    leaf_fields,
)

__all__ = [
    "UpstreamChange",
    "apply_overrides",
    "check_override",
    "deep_merge",
    "retarget",
    "task_layers",
    "upstream_changes",
]


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge; values in ``top`` win. Inputs are not modified.  Any values: a suite's
    TOML tables (dates included) merge through it as well as ``--set``'s JSON."""
    out = dict(base)
    for key, value in top.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = deep_merge(old, value)
        else:
            out[key] = value
    return out


def task_layers(
    task: str, shared_layers: dict[str, Any], task_table: dict[str, Any], reserved: frozenset[str]
) -> dict[str, dict[str, Any]]:
    """Every layer of one task as raw tables: the suite's shared ``[layers.NAME]`` under the task's
    own ``[tasks.TASK.NAME]`` (the three known layers first, then the task's other tables that are not
    ``reserved`` keys, then the shared layers it lacks), each ``base = "OTHER"`` resolved.  Raises
    :class:`PipelineError` for a base that is not another layer of the task."""
    layers = {}
    for layer in (
        *LAYERS,
        *[k for k in task_table if k not in LAYERS and k not in reserved],
        *[k for k in shared_layers if k not in LAYERS and k not in task_table],
    ):
        if layer in task_table or layer in shared_layers:
            layers[layer] = deep_merge(shared_layers.get(layer, {}), task_table.get(layer, {}))
    return _resolve_bases(task, layers)


def _resolve_bases(task: str, layers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Apply ``base = "LAYER"``: a layer that is another layer of the same task with a few
    fields changed (CTI-Bench's per-provider paths of one notebook). The base's notes come
    first, then the layer's own; one level only, so a card never hides a chain."""
    out = {}
    for name, table in layers.items():
        base = table.get("base")
        if base is None:
            out[name] = table
            continue
        parent = layers.get(base) if isinstance(base, str) else None
        if parent is None or base == name or "base" in parent:
            raise PipelineError(
                f"{task} layer {name!r}: base {base!r} must name another layer of the task "
                f"that has no base itself; layers: {', '.join(layers)}"
            )
        own = {k: v for k, v in table.items() if k != "base"}
        merged = deep_merge(parent, own)
        merged["notes"] = [*parent.get("notes", []), *own.get("notes", [])]
        out[name] = merged
    return out


def _set_path(data: dict[str, JsonValue], path: str, value: JsonValue) -> dict[str, JsonValue]:
    """``data`` with ``path`` set to ``value``; an object value merges into the object already there
    (``inference={"max_tokens": 5}`` changes only max_tokens, not temperature, seed or stop)."""
    head, _, rest = path.partition(".")
    if not rest:
        old = data.get(head)
        return {**data, head: deep_merge(old, value) if isinstance(value, dict) and isinstance(old, dict) else value}
    child = data.get(head)
    return {**data, head: _set_path(child if isinstance(child, dict) else {}, rest, value)}


def apply_overrides(
    pipeline: Pipeline, overrides: list[tuple[str, JsonValue]], options: Mapping[str, str] | None = None
) -> Pipeline:
    """Return ``pipeline`` with each ``(field, value)`` set; invalid values raise PipelineError,
    naming the options that set them: ``options`` maps a field to how the user gave it
    (``--repeats 3``), ``--set FIELD`` otherwise."""
    if not overrides:
        return pipeline
    data = pipeline.model_dump(mode="json")
    applied = dict(pipeline.overrides)
    for path, value in overrides:
        data = _set_path(data, path, value)
        # The card's overrides name each field replaced, so a partial object shows what it changed.
        leaves = leaf_fields(value, path + ".") if isinstance(value, dict) and value else [(path, value)]
        applied.update(leaves)
    data["overrides"] = applied
    try:
        return Pipeline.model_validate(data)
    except ValidationError as err:
        named = options or {}
        given = [named[p] for p, _ in overrides if p in named]
        fields = [p for p, _ in overrides if p not in named]
        shown = ", ".join([*given, *([f"--set {', '.join(fields)}"] if fields else [])])
        raise PipelineError(f"{shown}: invalid value: {_describe_error(err)}") from None


def check_override(path: str, value: JsonValue, option: str | None = None) -> None:
    """Validate ``--set path=value`` against its own stage, before any layer is known: the value's
    type and the rules of that stage (``max_tokens >= 1``, ``pass_k >= 1``).  What relates two
    stages (``aggregation.pass_k`` within ``inference.repeats``, a log-likelihood request in chat
    mode) depends on the layer's other fields and the other options, and is checked when the
    overrides meet a layer's pipeline (:func:`apply_overrides`).  ``option``: how the user gave it,
    for the message (``--set path=value`` by default)."""
    stage = path.split(".", 1)[0]
    model = Pipeline.model_fields[stage].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    data = _set_path({stage: model().model_dump(mode="json")}, path, value)[stage]
    try:
        model.model_validate(data)
    except ValidationError as err:
        shown = option or f"--set {path}"
        raise PipelineError(f"{shown}: invalid value: {_describe_error(err, stage + '.')}") from None
    except TypeError as err:
        raise PipelineError(f"{option or f'--set {path}'}: invalid value: {err}") from None


class UpstreamChange(PipelineError):
    """A re-scoring asked for an upstream change: it needs new generations."""


def upstream_changes(stored: Pipeline, asked: Pipeline) -> list[str]:
    """``"field: stored X, asked Y"`` for every upstream field that differs."""
    a = dict(leaf_fields({k: v for k, v in stored.stages().items() if k in UPSTREAM_STAGES}))
    b = dict(leaf_fields({k: v for k, v in asked.stages().items() if k in UPSTREAM_STAGES}))
    return [
        f"{key}: stored {a.get(key)!r}, asked {b.get(key)!r}"
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]


def retarget(
    stored: Pipeline,
    layer: Pipeline | None,
    overrides: list[tuple[str, JsonValue]],
    stages: tuple[str, ...] = DOWNSTREAM_STAGES,
) -> Pipeline:
    """The pipeline to re-score with: ``layer``'s ``stages`` (if a layer is given; by default every
    downstream stage, ``("extraction",)`` for the paper's extraction-only change) on the stored
    other stages, then ``overrides``.  Raises :class:`UpstreamChange` when an override touches an
    upstream field with a different value, :class:`PipelineError` when ``stages`` names an upstream
    stage."""
    base = stored
    if layer is not None:
        if any(stage not in DOWNSTREAM_STAGES for stage in stages):
            raise PipelineError(
                f"re-scoring takes downstream stages only ({', '.join(DOWNSTREAM_STAGES)}); got {', '.join(stages)}"
            )
        data = stored.model_dump(mode="json")
        target = layer.model_dump(mode="json")
        for stage in stages:
            data[stage] = target[stage]
        skipped = upstream_changes(stored, layer)
        kept = [stage for stage in DOWNSTREAM_STAGES if stage not in stages]
        data["name"] = layer.name if not kept else f"{layer.name}~{'+'.join(stages)}"
        data["why"] = {
            **{k: v for k, v in stored.why.items() if k.split(".")[0] in kept},
            **{k: v for k, v in layer.why.items() if k.split(".")[0] in stages},
        }
        data["notes"] = (
            [*layer.notes]
            + (
                [
                    "Re-scored offline from a run made under '" + stored.name + "': its upstream fields were kept "
                    "(changing them needs new generations): " + "; ".join(skipped)
                ]
                if skipped
                else []
            )
            + (
                [
                    f"Only the {', '.join(stages)} fields of '{layer.name}' applied; {', '.join(kept)} kept as stored "
                    f"under '{stored.name}'"
                ]
                if kept
                else []
            )
        )
        data["overrides"] = {}
        base = Pipeline.model_validate(data)
    new = apply_overrides(base, overrides)
    changed = upstream_changes(base, new)
    if changed:
        raise UpstreamChange(
            "; ".join(changed) + " — this needs new generations (run pytest again, or use "
            "--model replay:RUN_DIR only for downstream changes)"
        )
    return new
