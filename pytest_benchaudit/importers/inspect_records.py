"""Typed models of the parts of an Inspect eval log the importer reads (no inspect_ai needed).

The shapes follow inspect_ai's documented log (``inspect_ai/log/_log.py``: ``EvalLog``,
``EvalSpec``, ``EvalResults``, ``EvalSample``; ``inspect_ai/log/_transcript.py``: the events),
log format ``version`` 2, as written by inspect_ai 0.3.140 (October 2025) to 0.3.285 (October
2026).  Only the fields the import reads are declared; every other key is ignored, so a field
Inspect adds later does not break the reader, while a declared field of the wrong type is an
error naming it.  Two layouts of a sample's model calls are read:

- up to early 2026, a model event carries its ``input`` messages and its ``call.request`` (the body
  sent to the provider) in full;
- since, both may be kept once per sample in ``events_data`` (``messages`` and ``calls``) and
  referred to by ranges: ``input_refs`` / ``call.call_refs`` (``[start, end)`` pairs) with
  ``call.call_key`` naming the request key they fill (``messages``).

Long strings of either layout may be stored once in ``attachments`` and written as
``attachment://<hash>``; :func:`resolve` puts them back.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ATTACHMENT", "KNOWN_VERSION", "InspectHeader", "InspectSample", "ModelEvent", "resolve"]

#: The newest log format version this reader knows (``EvalLog.version``).
KNOWN_VERSION = 2
ATTACHMENT = "attachment://"


class _Read(BaseModel):
    # Free-form parts are ``Any``, not pydantic's ``JsonValue``: they come from orjson or pydantic's own
    # JSON parser, so they are JSON values already, and checking JsonValue costs more than reading them.
    # Defaults that are models are default_factory: a model instance as a default is deep-copied at
    # every validation (13 copies a sample cost more than the rest of reading it).
    model_config = ConfigDict(extra="ignore", frozen=True)


class EvalDataset(_Read):
    name: str | None = None
    samples: int | None = None
    shuffled: bool | None = None


class EvalConfig(_Read):
    epochs: int | None = None
    epochs_reducer: list[str] | None = None
    limit: int | list[int] | None = None
    fail_on_error: bool | float | None = None
    log_samples: bool | None = None


class EvalSpec(_Read):
    """``eval``: what was run."""

    task: str
    task_id: str = ""
    task_version: int | str = 0
    task_args: dict[str, Any] = Field(default_factory=dict)
    created: str = ""
    dataset: EvalDataset = Field(default_factory=EvalDataset)
    model: str
    model_generate_config: dict[str, Any] = Field(default_factory=dict)
    model_base_url: str | None = None
    config: EvalConfig = Field(default_factory=EvalConfig)
    packages: dict[str, str] = Field(default_factory=dict)


class PlanStep(_Read):
    solver: str
    params: dict[str, Any] = Field(default_factory=dict)


class EvalPlan(_Read):
    steps: list[PlanStep] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)


class EvalMetric(_Read):
    name: str
    value: float | None = None


class EvalScore(_Read):
    """One scorer's results: its metrics over the samples it scored (its denominator)."""

    name: str
    scorer: str = ""
    reducer: str | None = None
    scored_samples: int | None = None
    unscored_samples: int | None = None
    metrics: dict[str, EvalMetric] = Field(default_factory=dict)


class EvalResults(_Read):
    total_samples: int = 0
    completed_samples: int = 0
    scores: list[EvalScore] = Field(default_factory=list)


class EvalError(_Read):
    message: str = ""


class InspectHeader(_Read):
    """The log without its samples (``header.json`` of an ``.eval``; the top of a ``.json`` log)."""

    version: int = 1
    status: Literal["started", "success", "cancelled", "error"] | str
    eval: EvalSpec
    plan: EvalPlan = Field(default_factory=EvalPlan)
    results: EvalResults | None = None
    error: EvalError | None = None


class ModelCall(_Read):
    request: dict[str, Any] = Field(default_factory=dict)
    call_refs: list[tuple[int, int]] | None = None
    call_key: str | None = None


class ChatMessage(_Read):
    role: str
    content: str | list[dict[str, Any]] = ""


class ModelUsage(_Read):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class OutputChoice(_Read):
    stop_reason: str | None = None


class ModelOutput(_Read):
    model: str | None = None
    choices: list[OutputChoice] = Field(default_factory=list)
    completion: str = ""
    usage: ModelUsage | None = None
    error: str | None = None


class ModelEvent(_Read):
    """A ``model`` event: one generate() call of the sample (its input, config and the request sent)."""

    event: Literal["model"]
    model: str = ""
    input: list[ChatMessage] = Field(default_factory=list)
    input_refs: list[tuple[int, int]] | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    output: ModelOutput = Field(default_factory=ModelOutput)
    call: ModelCall | None = None
    error: str | None = None


class Score(_Read):
    value: Any = None
    answer: str | None = None
    explanation: str | None = None


class EventsData(_Read):
    messages: list[ChatMessage] = Field(default_factory=list)
    calls: list[Any] = Field(default_factory=list)


class InspectSample(_Read):
    """One sample and epoch (``samples/<id>_epoch_<n>.json``, or an item of a ``.json`` log's ``samples``)."""

    id: int | str
    epoch: int = 1
    input: Any = ""  # a string, or chat messages (read by the importer only when it needs the text)
    choices: list[str] | None = None
    target: str | list[str] = ""
    messages: list[Any] = Field(default_factory=list)  # read only for a sample without a model event
    output: ModelOutput = Field(default_factory=ModelOutput)
    scores: dict[str, Score] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The sample's first model event (its ``events`` list is not validated whole: a sample of an agent
    # task holds thousands, and only the first generate() call is the request the record keeps).
    model_event: ModelEvent | None = None
    error: EvalError | None = None
    attachments: dict[str, str] = Field(default_factory=dict)
    events_data: EventsData | None = None

    @classmethod
    def from_json(cls, data: bytes) -> InspectSample:
        """The sample of a log entry: parsed with orjson, its first ``model`` event picked from ``events``,
        the rest validated (a ``ValidationError`` names the field; not JSON is a ``ValueError``)."""
        obj = orjson.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("a sample is a JSON object")
        events = obj.pop("events", None) or []
        obj.pop("store", None)
        obj["model_event"] = next((e for e in events if isinstance(e, dict) and e.get("event") == "model"), None)
        return cls.model_validate(obj)


def resolve(value: Any, attachments: dict[str, str]) -> Any:
    """``value`` with every ``attachment://<hash>`` string replaced by the attachment it names."""
    if isinstance(value, str):
        if value.startswith(ATTACHMENT):
            return attachments.get(value[len(ATTACHMENT) :], value)
        return value
    if isinstance(value, list):
        return [resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, attachments) for k, v in value.items()}
    return value
