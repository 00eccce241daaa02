"""``--model replay:RUN_DIR``: serve a run's stored generations instead of asking a model.

A stored record holds the exact request that was sent and what came back, so a
request identical to a stored one is answered with the stored generation: downstream
fields (extraction, scoring, denominator, aggregation) can then be changed in a real
pytest run with no model server.  A request that differs is never answered silently:
if a stored request for the same prompt exists, the differing inference fields are
named ("inference.max_tokens: stored 5, asked 2048 — this needs new generations");
otherwise the prompt itself changed.  :func:`upstream_mismatches` compares whole
pipeline cards so a run can stop with one usage error before any item runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from pydantic import JsonValue

from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.inference.backend import ModelSpec, ModelSpecError
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard
from pytest_benchaudit.pipeline.types import ContinuationLogprobs, Generation, Request
from pytest_benchaudit.runs.run_meta import RunMeta
from pytest_benchaudit.runs.store import read_records, read_run_json

__all__ = ["ReplayBackend", "ReplayError", "replay_model_label", "stored_questions", "upstream_mismatches"]

# Request parameter -> the pipeline field that sets it.
_PARAM_FIELDS = {
    "max_tokens": "inference.max_tokens",
    "stop": "inference.stop",
    "temperature": "inference.decoding.temperature",
    "top_p": "inference.decoding.top_p",
    "seed": "inference.decoding.seed",
    "top_logprobs": "inference.decoding.top_logprobs",
    "echo": "inference.request",
}
_NEEDS_NEW = "this needs new generations"


class ReplayError(RunDirError, ValueError):
    """The run directory cannot be replayed as asked."""


def _read_run(run_dir: Path) -> RunMeta:
    try:
        return read_run_json(run_dir)
    except RunDirError as err:
        raise ReplayError(f"replay:{run_dir}: not a readable run directory ({err})") from None


def resolve_replay_spec(spec: ModelSpec) -> ModelSpec:
    """A ``replay:`` model spec with its label read from the run directory it replays."""
    target = Path(spec.replay_dir or "")
    try:
        label = replay_model_label(target, spec.model_id)
    except ReplayError as err:
        raise ModelSpecError(f"--model {spec.label}: {err}") from None
    return spec.model_copy(update={"label": label, "model_id": None})


def replay_model_label(run_dir: Path, model: str | None = None) -> str:
    """The model a run directory replays: its only model, or ``model`` when it has several."""
    labels = [m.get("spec") for m in _read_run(run_dir).get("models", []) if m.get("spec")]
    if model:
        if model not in labels:
            raise ReplayError(f"replay:{run_dir}#{model}: the run has models {', '.join(labels) or 'none'}")
        return model
    if len(labels) != 1:
        raise ReplayError(
            f"replay:{run_dir}: the run has models {', '.join(labels) or 'none'}; "
            f"choose one with replay:{run_dir}#MODEL"
        )
    return str(labels[0])


@lru_cache(maxsize=8)
def _stored_questions(run_dir: str, model: str) -> frozenset[tuple[str, str, str]]:
    return frozenset(
        (str(r.get("benchmark")), str(r.get("task")), str(r.get("question_id")))
        for r in read_records(Path(run_dir))
        if r.get("model") == model
    )


def stored_questions(run_dir: Path, model: str) -> frozenset[tuple[str, str, str]]:
    """The (benchmark, task, question id) a run directory holds generations of for ``model``:
    a question outside it is *not in the replayed run* (skipped), never an answer made up."""
    try:
        return _stored_questions(str(run_dir), model)
    except RunDirError as err:
        raise ReplayError(f"replay:{run_dir}: {err}") from None


def _prompt_key(request: Mapping[str, JsonValue]) -> str:
    return json.dumps([request.get("mode"), request.get("messages"), request.get("prompt")], sort_keys=True)


def _full_key(request: Mapping[str, JsonValue]) -> str:
    return json.dumps(request, sort_keys=True, separators=(",", ":"))


def upstream_mismatches(stored_cards: Mapping[str, PipelineCard], asked_cards: Mapping[str, PipelineCard]) -> list[str]:
    """``"<task>: <field>: stored X, asked Y"`` for each upstream field a task would ask differently,
    and ``"<task>: prompt.template_text differs from the stored run's"`` for each upstream material
    (the template's text, the few-shot exemplars, the data files' checksums) both cards hold.

    A stored card that a ``conftest.py`` fixture made (it has ``suite_upstream_hash``) is compared
    by what its collection gave: the same collection, under the same fixture, asks the same."""
    out = []
    for key, card in asked_cards.items():
        stored = stored_cards.get(key) or stored_cards.get(key.split("|", 1)[0])
        if stored is None:
            out.append(f"{key}: not in the stored run")
            continue
        if "suite_upstream_hash" in stored and stored["suite_upstream_hash"] == card.get("upstream_hash"):
            continue
        for field, value in card["fields"].items():
            if field.split(".")[0] in ("dataset", "prompt", "inference") and stored["fields"].get(field) != value:
                out.append(f"{key}: {field}: stored {stored['fields'].get(field)!r}, asked {value!r}")
        old, new = stored.get("materials") or {}, card.get("materials") or {}
        for name in sorted(set(old) & set(new)):
            if name.split(".")[0] in ("dataset", "prompt", "inference") and old[name] != new[name]:
                out.append(f"{key}: {name} differs from the stored run's")
    return out


class ReplayBackend:
    """Answers requests identical to stored ones with the stored generation."""

    def __init__(self, run_dir: Path, model: str) -> None:
        self.run_dir = run_dir
        self._by_request: dict[str, Generation] = {}
        self._params_by_prompt: dict[str, list[dict[str, JsonValue]]] = {}
        self.cards: Cards = _read_run(run_dir).get("pipeline_cards", {})
        for rec in read_records(run_dir):
            if rec.get("model") != model:
                continue
            request = rec["request"]
            top, continuations = rec.get("top_logprobs"), rec.get("continuations")
            self._by_request[_full_key(request)] = Generation(
                text=rec.get("raw_output") or "",
                reasoning=rec.get("reasoning"),
                finish_reason=rec.get("finish_reason"),
                error=rec.get("error"),
                usage=rec.get("usage") or {},
                latency_s=0.0,
                attempts=rec.get("attempts") or 1,
                top_logprobs=tuple(top) if top else None,
                served_model=rec.get("served_model"),
                continuations=None
                if continuations is None
                else tuple(ContinuationLogprobs.model_validate(c) for c in continuations),
            )
            params = request.get("params")
            self._params_by_prompt.setdefault(_prompt_key(request), []).append(
                params if isinstance(params, dict) else {}
            )

    async def generate(self, request: Request) -> Generation:
        asked = request.model_dump(mode="json")
        found = self._by_request.get(_full_key(asked))
        if found is not None:
            return found
        return Generation(error=self.mismatch(asked))

    def mismatch(self, asked: Mapping[str, JsonValue]) -> str:
        """Why ``asked`` has no stored generation, naming the differing fields."""
        stored_params = self._params_by_prompt.get(_prompt_key(asked))
        if not stored_params:
            return (
                f"replay:{self.run_dir}: no stored generation for this prompt (prompt.template, "
                f"prompt.format or the question changed) — {_NEEDS_NEW}"
            )
        given = asked.get("params")
        params: dict[str, JsonValue] = given if isinstance(given, dict) else {}
        diffs = []
        for name in sorted(set(stored_params[0]) | set(params)):
            if stored_params[0].get(name) != params.get(name):
                field = _PARAM_FIELDS.get(name, f"inference.{name}")
                stored = stored_params[0].get(name, "unspecified")
                diffs.append(f"{field}: stored {stored!r}, asked {params.get(name, 'unspecified')!r}")
        what = "; ".join(diffs) or "the request differs (re-ask index or provider adjustments)"
        return f"replay:{self.run_dir}: {what} — {_NEEDS_NEW}"

    async def aclose(self) -> None:
        return None
