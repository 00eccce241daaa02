"""What a benchmark item evaluates: the per task x variant :class:`VariantSpec` and the per item :class:`ItemSpec`.

The collector (:mod:`.collect`) builds one :class:`VariantSpec` per task x variant (suite,
resolved pipeline, exemplars, resources, the card as collected and its hashes) and one
:class:`ItemSpec` per question x model pointing at it; the ``question`` / ``pipeline`` /
``model`` fixtures give an item's spec fields, and the runner renders its request from it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from pytest_benchaudit.common.errors import RunDirError
from pytest_benchaudit.dataset.suites import Suite
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.endpoint_tokenizer import EndpointTokenizer, of_model, with_eos
from pytest_benchaudit.inference.providers import adjust_request
from pytest_benchaudit.pipeline import assembly
from pytest_benchaudit.pipeline.record_documents import CardWarning, PipelineCard
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Question, Request
from pytest_benchaudit.prompt.templates import Template, TemplateError, render_request
from pytest_benchaudit.runs.store import read_run_json
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["ItemSpec", "VariantSpec", "end_of_sequence", "note_end_of_sequence"]


def end_of_sequence(model: ModelSpec) -> EndpointTokenizer:
    """The end-of-sequence token lm-eval would append for ``model`` (``inference.stop_eos = "endpoint"``):
    its endpoint asked once (:func:`~pytest_benchaudit.inference.endpoint_tokenizer.of_model`); a replayed
    model gets what the replayed run's card recorded, so that it renders the requests that run sent."""
    if model.kind == "replay" and model.replay_dir:
        return _replayed_eos(model.replay_dir, model.label)
    return of_model(model)


def note_end_of_sequence(
    providers: dict[str, dict[str, JsonValue]], models: Sequence[ModelSpec], task: str
) -> list[CardWarning]:
    """Put each model's end-of-sequence finding into a card's ``providers`` (``inference.stop_eos =
    "endpoint"``); a warning for each model whose EOS cannot be known (nothing is appended for it)."""
    warnings: list[CardWarning] = []
    for model in models:
        found = end_of_sequence(model)
        providers.setdefault(model.label, {})["end_of_sequence"] = found.card()
        if not found.served:
            warnings.append(
                CardWarning(
                    kind="end_of_sequence_unknown",
                    message=(
                        f"{task}: the end-of-sequence token of model {model.label} cannot be known ({found.source}): lm-eval "
                        f"appends its tokenizer's to the stop sequences; these requests are sent without it (give it with "
                        f"--set inference.stop=[...] and --set inference.stop_eos=none)"
                    ),
                )
            )
    return warnings


@functools.lru_cache(maxsize=16)
def _replayed_eos(run_dir: str, label: str) -> EndpointTokenizer:
    try:
        cards = read_run_json(Path(run_dir)).get("pipeline_cards", {})
    except RunDirError:
        cards = {}  # the replay backend says what is wrong with the directory
    for card in cards.values():
        entry = (card.get("providers") or {}).get(label, {}).get("end_of_sequence")
        if isinstance(entry, dict):
            return EndpointTokenizer.from_card(entry)
    return EndpointTokenizer(False, None, "the replayed run's cards record no end-of-sequence token")


@dataclass
class VariantSpec:
    """What every item of one task x variant shares (one object per task x variant, not per item).

    ``key``: its card's key in run.json; ``hashes``: that card's ``(hash, upstream_hash)``, which
    the records of items under the default fixtures carry; the checksums and the judge are what
    :meth:`materials` hashes with the fields of a pipeline (the suite's, or a fixture's); ``card``: the
    card collected with the suite's pipeline (:mod:`.collect` makes it from those materials).
    """

    suite: Suite
    pipeline: Pipeline
    shots: list[Question]
    card: PipelineCard  # the card as collected (before any fixture)
    variant: str = ""
    resources: Resources = field(default_factory=dict)  # the task's data files its metric reads, by name
    key: str = ""
    data_checksums: dict[str, str] = field(default_factory=dict)
    resource_checksums: dict[str, str] = field(default_factory=dict)
    judge: dict[str, JsonValue] | None = None  # the judge as a material (cards.judge_material)
    hashes: tuple[str, str] = ("", "")
    collected_used: bool = False  # an item ran under ``card`` (its default fixtures gave what it used)

    def materials(self, pipeline: Pipeline) -> dict[str, JsonValue]:
        """What shapes ``pipeline``'s requests and scores on this task besides its fields (:mod:`.cards`)."""
        return assembly.materials(
            self.suite.templates, pipeline, self.shots, self.data_checksums, self.resource_checksums, self.judge
        )


class ItemSpec:
    """What one item evaluates; the defaults behind the overridable fixtures.

    Two references of its own (question, model) and one to the :class:`VariantSpec` its
    task x variant shares: 161,670 items cost ~100 bytes each here.  The request is not
    cached on the item: the runner renders it when it queues it and drops it once answered.
    """

    __slots__ = ("question", "model", "shared")

    def __init__(self, question: Question, model: ModelSpec, shared: VariantSpec) -> None:
        self.question = question
        self.model = model
        self.shared = shared

    @property
    def suite(self) -> Suite:
        return self.shared.suite

    @property
    def pipeline(self) -> Pipeline:
        return self.shared.pipeline

    @property
    def shots(self) -> list[Question]:
        return self.shared.shots

    @property
    def variant(self) -> str:
        return self.shared.variant

    @property
    def resources(self) -> Resources:
        return self.shared.resources

    def template(self, pipeline: Pipeline) -> Template:
        name = pipeline.prompt.template
        templates = self.shared.suite.templates
        if name not in templates:
            raise TemplateError(f"unknown prompt.template {name!r}; templates: {', '.join(templates)}")
        return templates[name]

    def render(self, question: Question, pipeline: Pipeline, model: ModelSpec) -> Request:
        request = render_request(
            pipeline, self.template(pipeline), question, self.shared.shots, min_max_tokens=model.min_max_tokens
        )
        if pipeline.inference.stop_eos == "endpoint":  # lm-eval's stop list: the task's + the endpoint's EOS
            request = with_eos(request, end_of_sequence(model))
        return adjust_request(request, model)  # the provider's quirks, each listed in request.adjustments

    @property
    def request(self) -> Request:
        """The request under the default fixtures (what is prefetched), rendered on each call."""
        return self.render(self.question, self.shared.pipeline, self.model)
