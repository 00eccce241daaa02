"""The shapes of the pipeline's JSON documents: the pipeline card and a record as a row.

These are :class:`typing.TypedDict` s, not classes with attributes, on purpose: a card and a record
travel as the JSON objects they are written as (a record is summarised in constant memory straight
from ``records.jsonl``, a card is merged across xdist workers and read by ``--resume``), and a
TypedDict costs nothing at run time while the type checker holds every key and value to its
declared type.  The same declarations validate a document where it enters (pydantic's
:class:`~pydantic.TypeAdapter`, ``extra="forbid"``: a key nobody declared is an error, never
carried along) and give the JSON Schemas published in ``docs/schemas/``.

Pure: no pytest, no I/O.
"""

# No ``from __future__ import annotations``: TypedDict reads Required / NotRequired from evaluated
# annotations, and ``__required_keys__`` / ``__optional_keys__`` are wrong (all one kind) from strings.
from typing import Literal, NotRequired, Required

from pydantic import ConfigDict, JsonValue, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.pipeline.types import InvalidReason, InvalidStage

__all__ = [
    "CardJudge",
    "CardWarning",
    "Cards",
    "ContinuationRow",
    "InferenceParams",
    "ItemPipeline",
    "JudgeCallRow",
    "JudgePromptVersions",
    "JudgeRequestParams",
    "PipelineCard",
    "RecordExtras",
    "RecordRow",
    "RunModel",
    "TokenUsage",
    "TopLogprobs",
    "UsageRow",
    "UsageSummary",
    "VariantInfo",
]

_FORBID = ConfigDict(extra="forbid")


@with_config(_FORBID)
class CardWarning(TypedDict):
    """A warning a card carries into run.json (a data file that differs from its pinned checksum)."""

    kind: str
    message: str


@with_config(_FORBID)
class ItemPipeline(TypedDict):
    """Another pipeline some items of a task ran under (a fixture changed them), listed by its hash."""

    upstream_hash: str | None
    overrides: dict[str, JsonValue]
    override_origins: dict[str, str]


@with_config(_FORBID)
class JudgePromptVersions(TypedDict):
    """The versions of the LLM judge's two prompts."""

    extraction: str
    grading: str


@with_config(_FORBID)
class JudgeRequestParams(TypedDict):
    """The judge's inference parameters (its requests' ``params``)."""

    temperature: float
    max_tokens: int


@with_config(_FORBID)
class CardJudge(TypedDict):
    """What a card says about the LLM judge its items were scored with (``card["judge"]``, made by
    :func:`pytest_benchaudit.scoring.judge_prompts.judge_card`)."""

    model: str
    prompts: JudgePromptVersions
    params: JudgeRequestParams


@with_config(_FORBID)
class VariantInfo(TypedDict, total=False):
    """A ``--vary`` variant's description on its card (``card["variant"]``): the one field (or the
    layer) it changes and to what, and whether the model must be asked again."""

    name: Required[str]
    field: Required[str | None]
    value: Required[JsonValue]
    base_value: Required[JsonValue]
    stage: Required[str | None]
    kind: Required[Literal["base", "upstream", "downstream", "layer"]]
    needs_generations: Required[bool]
    same_as_base: Required[bool]
    # A --vary pipeline=LAYER variant: the layers, and the upstream fields they differ in (None: unknown).
    layer: str
    base_layer: JsonValue
    upstream_fields: list[str] | None


@with_config(_FORBID)
class PipelineCard(TypedDict, total=False):
    """The machine-readable pipeline card (:meth:`Pipeline.card`, completed by ``task_card``).

    ``fields``: every flat field of the five stages (``inference.max_tokens``) and its value;
    ``hash`` / ``upstream_hash``: what the records carry; ``materials``: what the fields name but do
    not hold (the template's text, the data files' checksums), covered by the hashes.  The rest is
    what a run shows beside the hash; an item card (a fixture override) adds ``override_origins``,
    ``suite_hash`` / ``suite_upstream_hash`` (the collected card's) and ``item_pipelines``.

    Every key is optional to the validator (``total=False``): a card the store reads may come from
    an older version or a hand-made run directory and lack some; readers use ``.get`` with a default.
    What a key holds is checked, and a key the card does not declare is refused.
    """

    card_version: str
    benchmark: str
    task: str
    pipeline: str
    hash: str
    upstream_hash: str
    fields: dict[str, JsonValue]
    overrides: dict[str, JsonValue]
    why: dict[str, str]
    notes: list[str]
    reproduces: dict[str, str]
    unspecified: list[str]
    materials: dict[str, JsonValue]
    dataset_checksums: dict[str, str]
    suite_files: dict[str, str]
    warnings: list[CardWarning]
    override_origins: dict[str, str]
    variant: VariantInfo
    judge: CardJudge
    providers: dict[str, dict[str, JsonValue]]
    questions_total: int
    suite_hash: str
    suite_upstream_hash: str | None
    item_pipelines: dict[str, ItemPipeline]
    # An xdist worker's mark that items ran under the collected card (pipeline.card.USED); never
    # in run.json (public_cards leaves it out).
    _used_by_items: bool


# Cards by ``"<benchmark>.<task>"`` or ``"<benchmark>.<task>|<variant>"`` (pipeline.variants.card_key).
Cards = dict[str, PipelineCard]


@with_config(_FORBID)
class JudgeCallRow(TypedDict):
    """``record["judge"]``: what a record keeps of one LLM-judge call (the row of
    :class:`~pytest_benchaudit.pipeline.record.JudgeCall`)."""

    model: str
    purpose: Literal["extraction", "grading"]
    prompt_version: str
    raw_output: str
    parse_status: str
    verdict: str | None
    error: NotRequired[str | None]
    usage: NotRequired[dict[str, JsonValue]]
    from_cache: NotRequired[bool]


@with_config(_FORBID)
class ContinuationRow(TypedDict):
    """One continuation of a log-likelihood request (:class:`~pytest_benchaudit.pipeline.types.ContinuationLogprobs`)."""

    continuation: str
    tokens: list[str]
    logprobs: list[float]
    missing: str | None
    # None is left out of a record's line (the model's serializer), but the model accepts it: so does the row
    context_tokens: NotRequired[int | None]
    prompt: NotRequired[str | None]
    note: NotRequired[str | None]


TopLogprobs = dict[str, float]


@with_config(_FORBID)
class RecordRow(TypedDict):
    """A record as it is stored, one line of ``records.jsonl``, and as aggregation and the audit read it.

    The keys and types of :class:`~pytest_benchaudit.pipeline.record.Record` (a test holds the two
    equal): the model validates a record where one is made or read; this row is what then travels.
    """

    record_version: str
    item_id: str
    benchmark: str
    task: str
    question_id: str
    question_index: int
    model: str
    variant: str
    repeat: int
    pipeline: str
    pipeline_hash: str
    upstream_hash: str
    request: dict[str, JsonValue]
    raw_output: str
    reasoning: str | None
    finish_reason: str | None
    error: str | None
    prediction: str | None
    valid: bool
    invalid_reason: InvalidReason | None
    invalid_stage: InvalidStage | None
    extraction_detail: str
    gold: str
    score: float
    correct: bool
    score_extras: dict[str, float]
    metric: str
    question_meta: dict[str, JsonValue]
    question_labels: list[str]
    top_logprobs: list[TopLogprobs] | None
    continuations: list[ContinuationRow] | None
    usage: dict[str, JsonValue]
    asks: int
    earlier_outputs: list[str]
    latency_s: float
    attempts: int
    served_model: str | None
    from_cache: bool
    timestamp: str
    # Only on some records (Record's OPTIONAL_KEYS): a judge's call, an imported run's released values.
    regex_prediction: NotRequired[str | None]
    judge: NotRequired[JudgeCallRow | None]
    released_prediction: NotRequired[str | None]
    released_score: NotRequired[JsonValue]
    released_success: NotRequired[bool | None]
    released_value: NotRequired[float | None]
    released_id: NotRequired[int | str | None]
    source_row: NotRequired[str | None]


@with_config(_FORBID)
class RecordExtras(TypedDict, total=False):
    """The keys only some records carry (RecordRow's ``NotRequired`` ones, Record's OPTIONAL_KEYS): an
    LLM judge's call and what the pipeline's own rule read, an imported run's released values.  What
    :func:`~pytest_benchaudit.scoring.evaluate.evaluate` takes as ``extra``, and what an importer adds."""

    regex_prediction: str | None
    judge: JudgeCallRow | None
    released_prediction: str | None
    released_score: JsonValue
    released_success: bool | None
    released_value: float | None
    released_id: int | str | None
    source_row: str | None


@with_config(_FORBID)
class InferenceParams(TypedDict, total=False):
    """The request parameters a pipeline specifies (:func:`pytest_benchaudit.prompt.templates.inference_params`):
    ``inference.decoding``'s temperature, top_p, seed and top_logprobs, ``inference.max_tokens`` and
    ``inference.stop``; a field left unspecified is absent (the endpoint's own default applies)."""

    temperature: float
    top_p: float
    seed: int
    max_tokens: int
    stop: list[str]
    top_logprobs: int


# Not validated (no ``extra="forbid"``): the usage object is the endpoint's, stored as it came, and
# an endpoint may add keys of its own (vLLM's, a proxy's); these are the ones the project reads.
class TokenUsage(TypedDict, total=False):
    """A response's ``usage`` object as a record stores it (``record["usage"]``, a judge call's
    ``usage``): OpenAI's counts; an Anthropic answer keeps its ``input_tokens`` / ``output_tokens``
    and gets ``prompt_tokens`` / ``completion_tokens`` from them (:mod:`pytest_benchaudit.inference.response_body`);
    a log-likelihood request's is its completions' usage added up."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, JsonValue] | None
    completion_tokens_details: dict[str, JsonValue] | None
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


# Here, not in aggregate/summary_documents.py (which re-exports them): inference/usage.py makes the rows,
# and inference may import only common and pipeline.
@with_config(_FORBID)
class UsageRow(TypedDict):
    """Tokens and cost per model x benchmark x task (a judge's calls under ``judge:LABEL``)."""

    model: str
    benchmark: str
    task: str
    items: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    prices_date: str | None


@with_config(_FORBID)
class UsageSummary(TypedDict):
    prices_date: str | None
    rows: list[UsageRow]
    # With --max-cost: the budget, and how many questions it kept from being asked.
    max_cost_usd: NotRequired[float]
    not_asked: NotRequired[int]


# Here, not in runs/run_meta.py (which re-exports it): inference's ModelSpec.public() makes it,
# and inference may import only common and pipeline.
@with_config(_FORBID)
class RunModel(TypedDict, total=False):
    """One model of the run (``models``): what it was, without credentials, and the ids it served."""

    spec: Required[str]  # the --model label
    kind: Required[str]  # endpoint, local, vllm, replay, provider, imported...
    endpoint: str | None
    model_id: str | None
    api_key_env: str | None
    min_max_tokens: int | None
    replay_of: str  # kind replay: the run directory served
    endpoints: list[str]
    launch: list[str]  # kind vllm: the `vllm serve` command line
    provider: str | None
    api: str | None
    auth: str | None
    strict_provider: bool
    resolved: str  # how a bare name was resolved
    served_model_ids: list[str]
