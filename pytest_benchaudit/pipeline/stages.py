"""The evaluation pipeline: five stages, their fields, layers, overrides, hash and card.

A :class:`Pipeline` is a frozen pydantic model with one sub-model per stage
(dataset, prompt, inference, extraction, scoring, aggregation).  A field that a
layer does not define holds the explicit value ``"unspecified"``; nothing is
filled in silently.  Inference fields that are unspecified are simply not sent
to the endpoint (its own default applies, and the record shows it); downstream
fields that are unspecified make the task impossible to score, which the
collector reports as a skip naming the field.

Overrides use dotted field names (``--set inference.max_tokens=5``) and are
validated: an unknown field or an invalid value raises :class:`PipelineError`
naming the field and what is allowed.

This module is pure: no pytest, no I/O.
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import json
import math
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator, model_validator

from pytest_benchaudit.common.errors import UsageError, did_you_mean
from pytest_benchaudit.pipeline.record_documents import PipelineCard

__all__ = [
    "UNSPECIFIED",
    "CARD_VERSION",
    "LAYERS",
    "PEER_LAYERS",
    "UPSTREAM_STAGES",
    "DOWNSTREAM_STAGES",
    "Pipeline",
    "PipelineError",
    "build_pipeline",
    "content_hashes",
    "field_paths",
    "leaf_fields",
    "parse_override",
    "is_unspecified",
]

UNSPECIFIED: Literal["unspecified"] = "unspecified"
Unspecified = Literal["unspecified"]
CARD_VERSION = "benchaudit.pipeline-card/1"
LAYERS = ("documented", "released", "standardized")
# A general harness's own pipeline for a benchmark (what inspect_evals or lm-eval send and how they
# read the reply), kept beside the benchmark's: "what would Inspect or lm-eval have scored?"
PEER_LAYERS = ("inspect_evals", "lm_eval")
# Upstream stages change what the model is asked (new generations needed);
# downstream stages only change how stored outputs are read and counted.
UPSTREAM_STAGES = ("dataset", "prompt", "inference")
DOWNSTREAM_STAGES = ("extraction", "scoring", "aggregation")


class PipelineError(UsageError):
    """A pipeline could not be built: unknown field, invalid value, missing layer."""


def is_unspecified(value: Any) -> bool:
    return isinstance(value, str) and value == UNSPECIFIED


class _Stage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans(cls, v: Any) -> Any:
        # pydantic would read true as 1 / 1.0; in a pipeline field that is always a typo.
        if isinstance(v, bool):
            raise ValueError("a boolean is not a valid value here")
        return v


class DatasetStage(_Stage):
    """Which questions: the source and revision the suite declares, the split, a subset."""

    source: str = UNSPECIFIED
    revision: str = UNSPECIFIED
    files: tuple[str, ...] = ()
    split: str | None = None
    subset: str | None = None


class PromptFormat(_Stage):
    """How the rendered template is packaged for the endpoint."""

    mode: Literal["chat", "completion"] | Unspecified = UNSPECIFIED
    # "system": a real system message; "prepend_user": system text glued to the user
    # text with a space (CTI-Bench's Gemini/Llama path); "none": no system text.
    system_role: Literal["system", "prepend_user", "none"] | Unspecified = UNSPECIFIED
    few_shot: int | Unspecified = Field(default=UNSPECIFIED)

    @field_validator("few_shot")
    @classmethod
    def _non_negative(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 0:
            raise ValueError(f"few_shot must be >= 0, not {v}; the nearest valid value is 0")
        return v


class PromptStage(_Stage):
    template: str = UNSPECIFIED
    format: PromptFormat = PromptFormat()


class Decoding(_Stage):
    temperature: float | None | Unspecified = UNSPECIFIED
    top_p: float | None | Unspecified = UNSPECIFIED
    seed: int | None | Unspecified = UNSPECIFIED
    # Number of top alternatives per generated token to return (None: none asked).
    top_logprobs: int | None = None

    # Values an endpoint can be sent: JSON has no NaN or infinity (a NaN went out as null), and
    # each field has its API's range; the error names the nearest value that is valid.
    @field_validator("temperature")
    @classmethod
    def _temperature(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, float):
            _finite("temperature", v, "0 (greedy)")
            if v < 0:
                raise ValueError(f"temperature must be >= 0, not {v:g}; the nearest valid value is 0 (greedy)")
        return v

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, float):
            _finite("top_p", v, "1 (no nucleus cut)")
            if not 0 < v <= 1:
                nearest = "1 (no nucleus cut)" if v > 1 else "a small positive number such as 0.01"
                raise ValueError(f"top_p must be in (0, 1], not {v:g}; the nearest valid value is {nearest}")
        return v

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError(f"top_logprobs must be >= 0, not {v}; the nearest valid value is 0")
        return v


def _finite(field: str, value: float, example: str) -> None:
    """A ``ValueError`` naming ``field`` when ``value`` is NaN or infinite (JSON cannot carry it)."""
    if not math.isfinite(value):
        raise ValueError(
            f"{field} must be a finite number, not {value}; JSON cannot send it (a valid value is e.g. {example})"
        )


class InferenceStage(_Stage):
    decoding: Decoding = Decoding()
    max_tokens: int | Unspecified = UNSPECIFIED
    stop: tuple[str, ...] | Unspecified = UNSPECIFIED
    # Ask the same question again, up to this many extra times, while no answer can be
    # read from the reply (CyberMetric's released evaluator re-asks up to 5 times in all).
    reask_on_invalid: int = 0
    # How many times each question is asked (K): repeat k is a generation of its own, sent with
    # seed ``decoding.seed + k`` where a seed is sent.  Upstream: it changes what is asked.
    repeats: int = 1
    # What is asked: "generate" (the model writes an answer) or "loglikelihood" (lm-eval's
    # multiple_choice: one completion per option with prompt = context + continuation " A".." D",
    # ``echo`` on, the echoed continuation tokens' log-probabilities summed; completion mode only).
    request: Literal["generate", "loglikelihood"] = "generate"
    # "endpoint": append the end-of-sequence token of the endpoint's tokenizer to ``stop``, as lm-eval's
    # API models append theirs (read from the endpoint's GET /tokenizer_info where lm-eval would use it;
    # nothing appended, and the card says so, where it cannot be known: inference/endpoint_tokenizer.py).
    stop_eos: Literal["none", "endpoint"] = "none"

    @field_validator("repeats")
    @classmethod
    def _repeats(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"repeats must be >= 1, not {v}; the nearest valid value is 1 (ask once)")
        return v

    @field_validator("max_tokens")
    @classmethod
    def _positive(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"max_tokens must be >= 1, not {v}; the nearest valid value is 1")
        return v

    @field_validator("reask_on_invalid")
    @classmethod
    def _reasks(cls, v: int) -> int:
        if v < 0:
            raise ValueError(f"reask_on_invalid must be >= 0, not {v}; the nearest valid value is 0")
        return v

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_from_string(cls, v: Any) -> Any:
        # `--set inference.stop=\n` arrives as a plain string with a literal escape.
        if isinstance(v, str) and v != UNSPECIFIED:
            return (codecs.decode(v.encode("latin-1", "backslashreplace"), "unicode_escape"),)
        return v


class ExtractionStage(_Stage):
    rule: str = UNSPECIFIED
    # "strip": drop <think> spans and a separate reasoning field before reading the
    # answer; "keep": read the raw text as it came (what most released code does);
    # "strip_first": inspect_ai's openai-api reading, the first <think> block only, the raw
    # text when nothing else remains (scoring/extract.py strip_first_reasoning).
    reasoning: Literal["strip", "keep", "strip_first"] | Unspecified = UNSPECIFIED


class ScoringStage(_Stage):
    metric: str = UNSPECIFIED
    denominator: Literal["total", "valid"] | Unspecified = UNSPECIFIED
    # The share of full credit an invalid answer gets where it is counted (denominator "total"):
    # 0 (no credit, the default) scores it 0 on a share and the metric's named worst case on an
    # error metric (10.0 on a CVSS MAD); 1 would score it as a perfect answer.  Never below a
    # share's 0: AthenaBench's 1 - 10/7.7 = -0.30 per unreadable vector was a penalty no card stated.
    invalid_credit: float = Field(default=0.0, ge=0.0, le=1.0)


class AggregationStage(_Stage):
    # micro: every question weighs the same; macro: every task weighs the same.
    method: Literal["micro", "macro"] | Unspecified = UNSPECIFIED
    # Optional question metadata field to break scores down by (e.g. SecEval topics); under
    # repeats it is also the cluster of the clustered standard error (docs/statistics.md).
    by: str | None = None
    # How a question's K repeats (inference.repeats) become its one score: "mean" of the K scores;
    # "majority" verdict (more than half correct; the median value on a continuous metric); "any"
    # (pass@k: the unbiased estimator 1 - C(K-c, k)/C(K, k) with k = pass_k; the best value on a
    # continuous metric); "all" (every repeat correct; the worst value).  Downstream: re-scorable.
    reducer: Literal["mean", "majority", "any", "all"] = "mean"
    # The k of pass@k under reducer "any"; None: k = K (any of the K repeats correct).
    pass_k: int | None = None

    @field_validator("pass_k")
    @classmethod
    def _pass_k(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"pass_k must be >= 1, not {v}; the nearest valid value is 1")
        return v


# Fields added after runs were recorded, left out of the hashes at these values (see
# Pipeline.hashed_stages): (stage, field, default).
_HASH_SILENT_DEFAULTS: tuple[tuple[str, str, Any], ...] = (
    ("inference", "repeats", 1),
    ("aggregation", "reducer", "mean"),
    ("aggregation", "pass_k", None),
    ("inference", "request", "generate"),
    ("inference", "stop_eos", "none"),
)


class Pipeline(BaseModel):
    """A resolved pipeline for one task under one layer (plus overrides)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="layer name, e.g. 'standardized'")
    benchmark: str
    task: str
    dataset: DatasetStage = DatasetStage()
    prompt: PromptStage = PromptStage()
    inference: InferenceStage = InferenceStage()
    extraction: ExtractionStage = ExtractionStage()
    scoring: ScoringStage = ScoringStage()
    aggregation: AggregationStage = AggregationStage()
    why: dict[str, str] = Field(default_factory=dict, description="field -> reason or citation")
    notes: tuple[str, ...] = ()
    # A peer layer: the harness packages and versions whose requests and readers it reproduces (as `why`,
    # not hashed: it says where the fields came from, not what they are).
    reproduces: dict[str, str] = Field(default_factory=dict, description="peer package -> version reproduced")
    overrides: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _pass_k_within_repeats(self) -> Pipeline:
        k, repeats = self.aggregation.pass_k, self.inference.repeats
        if k is not None and k > repeats:
            raise ValueError(
                f"aggregation.pass_k = {k} needs at least {k} repeats, not inference.repeats = "
                f"{repeats}; the nearest valid value is {repeats}"
            )
        if self.inference.request == "loglikelihood" and self.prompt.format.mode == "chat":
            raise ValueError(
                "inference.request = 'loglikelihood' sends completion prompts with echo; it needs "
                "prompt.format.mode = 'completion', not 'chat'"
            )
        return self

    def stages(self) -> dict[str, dict[str, JsonValue]]:
        """The five stages as plain JSON-ready data (what the card lists)."""
        dumped = self.model_dump(mode="json")
        return {k: dumped[k] for k in (*UPSTREAM_STAGES, *DOWNSTREAM_STAGES)}

    def hashed_stages(self) -> dict[str, dict[str, JsonValue]]:
        """:meth:`stages` as the hashes cover them: the repeat fields at their defaults (asked once,
        ``mean``, no ``pass_k``) and ``inference.request`` at ``generate`` are left out, so a pipeline that asks once keeps the hash it had
        before these fields existed (its records, caches and ``--resume`` stay valid)."""
        stages = self.stages()
        for stage, name, default in _HASH_SILENT_DEFAULTS:
            if stages[stage].get(name, default) == default:
                stages[stage] = {k: v for k, v in stages[stage].items() if k != name}
        return stages

    # Cached: a pipeline is frozen, and records ask for its hashes once per item.
    @cached_property
    def hash(self) -> str:
        return _digest(self.hashed_stages())

    @cached_property
    def upstream_hash(self) -> str:
        """Hash of the fields that decide what the model is asked."""
        stages = self.hashed_stages()
        return _digest({k: stages[k] for k in UPSTREAM_STAGES})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Pipeline:
        """A copy with ``update`` applied, its hashes computed anew.

        pydantic copies the instance ``__dict__``, where :func:`functools.cached_property` keeps
        the hashes: without this, a ``conftest.py`` fixture returning
        ``pipeline.model_copy(update=...)`` would carry the suite's hash under changed fields.
        """
        copied = super().model_copy(update=update, deep=deep)
        for name in ("hash", "upstream_hash"):
            copied.__dict__.pop(name, None)
        return copied

    def unspecified_fields(self, stages: tuple[str, ...] = DOWNSTREAM_STAGES) -> list[str]:
        """Dotted names of fields in ``stages`` whose value is ``unspecified``."""
        stage_data = self.stages()
        return [
            path for path, value in leaf_fields(stage_data) if path.split(".")[0] in stages and is_unspecified(value)
        ]

    def card(self, materials: Mapping[str, JsonValue] | None = None) -> PipelineCard:
        """The machine-readable pipeline card written into every run.

        ``materials``: what the fields name but do not hold, keyed ``STAGE.what`` (the prompt
        template's text, the few-shot exemplars used, the data files' checksums, the judge's
        prompts; see :func:`content_hashes`).  Given, the card lists them and its ``hash`` and
        ``upstream_hash`` cover them; without, both are :attr:`hash` and :attr:`upstream_hash`.
        """
        digest, upstream = content_hashes(self, materials)
        card: PipelineCard = {
            "card_version": CARD_VERSION,
            "benchmark": self.benchmark,
            "task": self.task,
            "pipeline": self.name,
            "hash": digest,
            "upstream_hash": upstream,
            "fields": dict(leaf_fields(self.stages())),
            "overrides": dict(self.overrides),
            "why": dict(self.why),
            "notes": list(self.notes),
            "unspecified": self.unspecified_fields(tuple((*UPSTREAM_STAGES, *DOWNSTREAM_STAGES))),
        }
        if self.reproduces:
            card["reproduces"] = dict(self.reproduces)
        if materials:
            card["materials"] = dict(materials)
        return card


def content_hashes(pipeline: Pipeline, materials: Mapping[str, JsonValue] | None) -> tuple[str, str]:
    """``(hash, upstream_hash)`` of ``pipeline`` with ``materials`` (see :meth:`Pipeline.card`).

    A material whose key starts with an upstream stage (``prompt.template_text``,
    ``dataset.checksums``) is in both hashes, any other (``scoring.judge``) in ``hash`` only:
    an edited template then changes the upstream hash as a changed field does.  Without
    materials these are the pipeline's own hashes, so cards made before materials existed
    (and ``rescore``'s, made from stored fields) keep theirs.
    """
    if not materials:
        return pipeline.hash, pipeline.upstream_hash
    stages = pipeline.hashed_stages()
    upstream = {k: v for k, v in materials.items() if k.split(".", 1)[0] in UPSTREAM_STAGES}
    return (
        _digest({"stages": stages, "materials": dict(materials)}),
        _digest({"stages": {k: stages[k] for k in UPSTREAM_STAGES}, "materials": upstream}),
    )


def _digest(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def leaf_fields(data: Mapping[str, JsonValue], prefix: str = "") -> list[tuple[str, JsonValue]]:
    """Nested stage fields as flat ones, in order (``{"inference": {"max_tokens": 5}}`` ->
    ``[("inference.max_tokens", 5)]``); an empty object is a value."""
    out: list[tuple[str, JsonValue]] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.extend(leaf_fields(value, path + "."))
        else:
            out.append((path, value))
    return out


def field_paths() -> list[str]:
    """Every dotted field name ``--set`` accepts (stages and their sub-fields)."""
    paths: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            path = f"{prefix}{name}"
            paths.append(path)
            ann = info.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, path + ".")

    for stage in (*UPSTREAM_STAGES, *DOWNSTREAM_STAGES):
        paths.append(stage)
        ann = Pipeline.model_fields[stage].annotation
        assert isinstance(ann, type)
        walk(ann, stage + ".")
    return paths


def parse_override(text: str) -> tuple[str, JsonValue]:
    """Split ``FIELD=VALUE``; the value is read as JSON when it parses, else as a string."""
    if "=" not in text:
        raise PipelineError(f"--set {text!r}: expected FIELD=VALUE, e.g. inference.max_tokens=5")
    path, raw = text.split("=", 1)
    path = path.strip()
    if path not in field_paths():
        raise PipelineError(
            f"--set {text!r}: unknown field {path!r}{_nearest_field(path)}; known fields: {', '.join(field_paths())}"
        )
    try:
        value: JsonValue = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return path, value


def _nearest_field(path: str) -> str:
    """`` (did you mean 'inference.max_tokens'?)`` for a field name close to a known one: the one
    field whose last part is ``path`` (``temperature``), else the nearest dotted name, else the
    field whose last part is nearest (``decoding.temprature``); empty when none is close."""
    known = field_paths()
    leaf = path.rsplit(".", 1)[-1]
    same_leaf = [p for p in known if p.rsplit(".", 1)[-1] == leaf and p != leaf]
    if len(same_leaf) == 1:
        return f" (did you mean {same_leaf[0]!r}?)"
    nearest = did_you_mean(path, known)
    if nearest:
        return nearest
    leaves: dict[str, list[str]] = {}
    for p in known:
        leaves.setdefault(p.rsplit(".", 1)[-1], []).append(p)
    close = difflib.get_close_matches(leaf, sorted(leaves), n=1, cutoff=0.75)
    return f" (did you mean {leaves[close[0]][0]!r}?)" if close and len(leaves[close[0]]) == 1 else ""


def _describe_error(err: ValidationError, prefix: str = "") -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(
            str(p)
            for p in e["loc"]
            if not str(p).startswith(("function-", "literal[", "int", "float", "str", "tuple", "none"))
        )
        msg = str(e["msg"]).removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
        parts.append(f"{prefix}{loc}: {msg}" if loc else msg)
    return "; ".join(dict.fromkeys(parts))


def build_pipeline(name: str, benchmark: str, task: str, fields: dict[str, Any]) -> Pipeline:
    """Validate raw layer data (from a suite config) into a :class:`Pipeline`."""
    try:
        return Pipeline(name=name, benchmark=benchmark, task=task, **fields)
    except ValidationError as err:
        raise PipelineError(f"{benchmark}.{task} layer {name!r}: {_describe_error(err)}") from None
    except TypeError as err:
        raise PipelineError(f"{benchmark}.{task} layer {name!r}: {err}") from None
