"""The shapes of the Every Eval Ever (0.3.0) documents the export writes, as the exporter builds them.

TypedDicts for the reason :mod:`pytest_benchaudit.pipeline.record_documents` gives: the documents are the
JSON objects they are written as, typed key by key for the checker, at no cost at run time.  They
declare what *we* write of the schema (``eval.schema.json`` for the aggregate document,
``instance_level_eval.schema.json`` for a sample line), not all the schema allows; the written
files are checked against the schema itself by ``validate_export`` (``--validate``).  The free-form
``additional_details`` / ``details`` / ``metadata`` slots are the schema's string-to-string maps.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

__all__ = [
    "AggregateDocument",
    "AnswerAttribution",
    "ConfidenceInterval",
    "DetailedEvaluationResults",
    "EvalLibrary",
    "EvaluationResult",
    "GenerationArgs",
    "GenerationConfig",
    "InferenceEngine",
    "MetricConfig",
    "ModelInfo",
    "Performance",
    "SampleEvaluation",
    "SampleInput",
    "SampleLine",
    "SampleOutput",
    "ScoreDetails",
    "SourceData",
    "SourceMetadata",
    "StrMap",
    "TokenUsage",
    "Uncertainty",
]

# The schema's ``additional_details``: string keys to string values (JSON text where not a string).
StrMap = dict[str, str]


# ------------------------------------------------------------------ the aggregate document


class InferenceEngine(TypedDict):
    name: str


class ModelInfo(TypedDict):
    """``model_info``: the model spec, the id the endpoint served (or was asked for), the rest as details."""

    name: str
    id: str
    additional_details: StrMap
    inference_engine: NotRequired[InferenceEngine]  # the embedded local model only


class SourceData(TypedDict):
    """``evaluation_results[].source_data``: the benchmark's data (a URL where the card names one)."""

    dataset_name: str
    additional_details: StrMap
    source_type: Literal["url", "other"]
    url: NotRequired[list[str]]


class MetricConfig(TypedDict):
    """``evaluation_results[].metric_config``; a benchmark's combined score has no ``metric_unit``."""

    evaluation_description: str
    metric_id: str
    metric_name: str
    metric_kind: str
    metric_unit: NotRequired[str]
    lower_is_better: bool
    score_type: Literal["continuous"]
    min_score: float | None
    max_score: float | None
    additional_details: StrMap


class ConfidenceInterval(TypedDict):
    lower: float
    upper: float
    confidence_level: float
    method: str  # the summary row's ci95_method (aggregate/intervals.py): wilson, wilson_effective_n, student_t


class Uncertainty(TypedDict, total=False):
    """``score_details.uncertainty``: the headline's denominator and its 95% CI, where known."""

    num_samples: int
    confidence_interval: ConfidenceInterval


class ScoreDetails(TypedDict):
    score: float
    details: StrMap
    uncertainty: NotRequired[Uncertainty]


class GenerationArgs(TypedDict, total=False):
    """``generation_config.generation_args``: what the card's fields say, where they say it."""

    temperature: float
    top_p: float
    max_tokens: int
    prompt_template: str


class GenerationConfig(TypedDict):
    additional_details: StrMap
    generation_args: NotRequired[GenerationArgs]


class EvaluationResult(TypedDict):
    """One ``evaluation_results[]`` entry: a task (and variant), or a benchmark's combined score
    (no ``generation_config``, no timestamp)."""

    evaluation_result_id: str
    evaluation_name: str
    source_data: SourceData
    metric_config: MetricConfig
    score_details: ScoreDetails
    generation_config: NotRequired[GenerationConfig]
    evaluation_timestamp: NotRequired[str]


class SourceMetadata(TypedDict):
    source_name: str
    source_type: Literal["evaluation_run"]
    source_organization_name: str
    evaluator_relationship: str
    additional_details: StrMap


class EvalLibrary(TypedDict):
    name: str
    version: str
    additional_details: StrMap


class DetailedEvaluationResults(TypedDict):
    """Where the sample lines are (``--samples``) and their checksum."""

    format: Literal["jsonl"]
    file_path: str
    hash_algorithm: Literal["sha256"]
    checksum: str
    total_rows: int
    additional_details: StrMap


class AggregateDocument(TypedDict):
    """One aggregate JSON (``eval.schema.json``): a model x benchmark of the run."""

    schema_version: str
    evaluation_id: str
    retrieved_timestamp: str
    source_metadata: SourceMetadata
    eval_library: EvalLibrary
    model_info: ModelInfo
    evaluation_results: list[EvaluationResult]
    evaluation_timestamp: NotRequired[str]
    detailed_evaluation_results: NotRequired[DetailedEvaluationResults]


# ------------------------------------------------------------------ a sample line


class SampleInput(TypedDict):
    """``input``: the gold always; the question as asked only with ``--include-questions``."""

    raw: str
    reference: list[str]
    formatted: NotRequired[str]
    choices: NotRequired[list[str] | None]


class SampleOutput(TypedDict):
    raw: list[str]
    reasoning_trace: list[str] | None


class AnswerAttribution(TypedDict):
    turn_idx: int
    source: str
    extracted_value: str
    extraction_method: str
    is_terminal: bool


class TokenUsage(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: NotRequired[int]


class Performance(TypedDict):
    latency_ms: float | None
    additional_details: StrMap


class SampleEvaluation(TypedDict):
    score: float
    is_correct: bool
    num_turns: int


class SampleLine(TypedDict):
    """One line of a ``_samples.jsonl`` (``instance_level_eval.schema.json``): one record."""

    schema_version: str
    evaluation_id: str
    model_id: str
    evaluation_name: str
    evaluation_result_id: str
    sample_id: str
    sample_hash: str
    interaction_type: Literal["single_turn"]
    input: SampleInput
    output: SampleOutput
    messages: None
    answer_attribution: list[AnswerAttribution]
    evaluation: SampleEvaluation
    token_usage: TokenUsage | None
    performance: Performance
    error: str | None
    metadata: StrMap
