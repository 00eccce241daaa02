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

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = ["ATTACHMENT", "KNOWN_VERSION", "InspectHeader", "InspectSample", "ModelEvent", "resolve"]

#: The newest log format version this reader knows (``EvalLog.version``).
KNOWN_VERSION = 2
ATTACHMENT = "attachment://"


class _Read(BaseModel):
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
    dataset: EvalDataset = EvalDataset()
    model: str
    model_generate_config: dict[str, JsonValue] = Field(default_factory=dict)
    model_base_url: str | None = None
    config: EvalConfig = EvalConfig()
    packages: dict[str, str] = Field(default_factory=dict)


class PlanStep(_Read):
    solver: str
    params: dict[str, JsonValue] = Field(default_factory=dict)


class EvalPlan(_Read):
    steps: list[PlanStep] = Field(default_factory=list)
    config: dict[str, JsonValue] = Field(default_factory=dict)


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
    plan: EvalPlan = EvalPlan()
    results: EvalResults | None = None
    error: EvalError | None = None


class ModelCall(_Read):
    request: dict[str, JsonValue] = Field(default_factory=dict)
    call_refs: list[tuple[int, int]] | None = None
    call_key: str | None = None


class ChatMessage(_Read):
    role: str
    content: str | list[dict[str, JsonValue]] = ""


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
    config: dict[str, JsonValue] = Field(default_factory=dict)
    output: ModelOutput = ModelOutput()
    call: ModelCall | None = None
    error: str | None = None


class OtherEvent(_Read):
    event: str


class Score(_Read):
    value: JsonValue = None
    answer: str | None = None
    explanation: str | None = None


class EventsData(_Read):
    messages: list[ChatMessage] = Field(default_factory=list)
    calls: list[JsonValue] = Field(default_factory=list)


class InspectSample(_Read):
    """One sample and epoch (``samples/<id>_epoch_<n>.json``, or an item of a ``.json`` log's ``samples``)."""

    id: int | str
    epoch: int = 1
    input: str | list[ChatMessage] = ""
    choices: list[str] | None = None
    target: str | list[str] = ""
    messages: list[ChatMessage] = Field(default_factory=list)
    output: ModelOutput = ModelOutput()
    scores: dict[str, Score] | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    events: list[ModelEvent | OtherEvent] = Field(default_factory=list)
    error: EvalError | None = None
    attachments: dict[str, str] = Field(default_factory=dict)
    events_data: EventsData | None = None

    def model_events(self) -> list[ModelEvent]:
        return [e for e in self.events if isinstance(e, ModelEvent)]


def resolve(value: Any, attachments: dict[str, str]) -> Any:
    """``value`` with every ``attachment://<hash>`` string replaced by the attachment it names."""
    if isinstance(value, str):
        if value.startswith(ATTACHMENT):
            return attachments.get(value[len(ATTACHMENT):], value)
        return value
    if isinstance(value, list):
        return [resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, attachments) for k, v in value.items()}
    return value
