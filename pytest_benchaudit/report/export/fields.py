"""Every Eval Ever fields from a run: reading it, model identity, metric config, generation config, source data.

Pure mapping of our run-directory contents onto the 0.3.0 schema's slots; see
:mod:`pytest_benchaudit.report.export` for the whole mapping.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from pytest_benchaudit.aggregate.summary_documents import SummaryDocument, TaskResult
from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordRow
from pytest_benchaudit.pipeline.variants import card_for, card_key
from pytest_benchaudit.report.export.export_documents import (
    GenerationArgs,
    GenerationConfig,
    MetricConfig,
    ModelInfo,
    ScoreDetails,
    SourceData,
    StrMap,
    Uncertainty,
)
from pytest_benchaudit.runs.run_meta import RunMeta, RunModel
from pytest_benchaudit.scoring.metrics import METRIC_INFO

SCHEMA_VERSION = "0.3.0"
FORMATS = ("every-eval-ever",)
LIBRARY = "pytest-benchaudit"
UNSPECIFIED = "unspecified"


class ExportError(BenchauditError):
    """Bad input for an export (not a run directory, unknown format, ...): one message, no traceback."""


# ------------------------------------------------------------------ reading the run


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ExportError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from None
    except OSError as err:
        raise ExportError(f"{path}: {err.strerror or err}") from None


def read_run(run_dir: Path) -> tuple[RunMeta, SummaryDocument, list[RecordRow]]:
    """``run.json``, a summary and the records of a run directory (a :class:`RunDirError` if unusable).

    The summary is computed here from the records and the run's cards, never taken from
    ``summary.json``, which may be stale (a run killed before it finished, records edited or
    re-scored since); only its gate verdicts are kept from the file when there is one.
    """
    from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
    from pytest_benchaudit.runs.store import load_run, read_summary_json

    run_dir = Path(run_dir)
    run, records = load_run(run_dir, lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
    cards = run.get("pipeline_cards") or {}
    results = summarize(records, cards)
    if not results:
        raise ExportError(f"{run_dir}: no results to export from {len(records)} records")
    gates = []
    if (run_dir / "summary.json").is_file():
        gates = read_summary_json(run_dir).get("gates", [])
    summary = summary_document(results, benchmark_scores(results, cards), gates, cards)
    return run, summary, records


# ------------------------------------------------------------------ small helpers


def _s(value: object) -> str:
    """A string for a string-to-string map: strings as they are, anything else (what json.dumps
    takes: a card's values, a task result's rows) as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _str_map(mapping: Mapping[str, object]) -> StrMap:
    """The schema's ``additional_details`` from named values of any JSON kind (``None`` left out)."""
    return {key: _s(value) for key, value in mapping.items() if value is not None}


def _is_unspecified(value: Any) -> bool:
    return value is None or value == UNSPECIFIED


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unknown"


def _uuid4_from(*parts: str) -> str:
    """A deterministic id in UUID-4 form (so re-exporting a run gives the same file names)."""
    digest = bytearray(hashlib.sha256("\x1f".join(parts).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


def _evaluation_name(bench: str, task: str, variant: str) -> str:
    return card_key(bench, task, variant)


def _card_for(cards: Cards, bench: str, task: str, variant: str) -> PipelineCard:
    return card_for(cards, bench, task, variant)


# ------------------------------------------------------------------ model identity


def _model_entry(run: RunMeta, spec: str) -> RunModel:
    """The run's model of this spec; one holding only the spec (no kind) when run.json does not list it."""
    for entry in run.get("models") or []:
        if entry.get("spec") == spec:
            return entry.copy()
    return {"spec": spec, "kind": ""}


def _model_id(entry: RunModel, spec: str) -> str:
    served = [s for s in entry.get("served_model_ids") or [] if s]
    if len(served) == 1:
        return str(served[0])
    return str(entry.get("model_id") or spec)


def model_info(run: RunMeta, spec: str) -> ModelInfo:
    entry = _model_entry(run, spec)
    kind = entry.get("kind", "")
    details: dict[str, object] = {
        # Whether a model is self-deployed or its weights open is not something a run knows,
        # except for the embedded local model (an open-weights model we launched ourselves).
        "deployment_type": "self_deployed" if kind == "local" else "unknown",
        "model_availability": "open_weights" if kind == "local" else "unknown",
        "benchaudit.spec": spec,
        "benchaudit.model_kind": kind or None,
        "benchaudit.requested_model_id": entry.get("model_id"),
        "benchaudit.served_model_ids": entry.get("served_model_ids"),
    }
    info: ModelInfo = {"name": spec, "id": _model_id(entry, spec), "additional_details": _str_map(details)}
    if kind == "local":
        info["inference_engine"] = {"name": "llama-cpp-python"}
    return info


# ------------------------------------------------------------------ metrics and pipeline


def _metric_bounds(metric: str) -> tuple[float | None, float | None]:
    """Range of a per-item score: the metric's ``value_range`` where valid answers reach beyond its
    no-credit value (AthenaBench closeness, down to 1 - 10/7.7), else between its best value and
    what an unreadable answer gets with no credit (``invalid_value``): 0/1 for binary ones,
    [0, worst] for errors (lower is better), [0, 1] for the other continuous ones."""
    info = METRIC_INFO.get(metric)
    if info is None:
        return None, None
    if info.value_range is not None:
        return float(info.value_range[0]), float(info.value_range[1])
    if info.kind == "binary":
        return 0.0, 1.0
    if info.lower_is_better:
        return 0.0, float(info.invalid_value)
    return float(info.invalid_value), 1.0


def _metric_kind(metric: str) -> str:
    info = METRIC_INFO.get(metric)
    if info is None:
        return "mean_score"
    if info.kind == "binary":
        return "accuracy"
    if "f1" in metric:
        return "f1"
    if info.lower_is_better and "abs" in metric:
        return "mae"
    return "mean_score"


def metric_config(result: TaskResult) -> MetricConfig:
    metric = result.get("metric") or ""
    info = METRIC_INFO.get(metric)
    low, high = _metric_bounds(metric)
    details = {
        "denominator": result.get("denominator"),
        "headline": f"mean per-item score over {'the valid items' if result.get('denominator') == 'valid' else 'all items'} "
        "(scoring.denominator)",
        # What the run's invalid items scored (scoring.invalid_credit); an old summary: the no-credit value.
        "invalid_item_score": result.get("invalid_score", None if info is None else info.invalid_value),
        "invalid_credit": result.get("invalid_credit", 0.0),
        "needs_judge": None if info is None else info.needs_judge,
    }
    return {
        "evaluation_description": info.description if info else metric,
        "metric_id": f"benchaudit.{metric}",
        "metric_name": metric,
        "metric_kind": _metric_kind(metric),
        "metric_unit": "proportion" if (info and (info.kind == "binary" or "f1" in metric)) else "score",
        "lower_is_better": bool(result.get("lower_is_better", False)),
        "score_type": "continuous",  # a mean over items, even of 0/1 scores
        "min_score": low,
        "max_score": high,
        "additional_details": _str_map(details),
    }


def score_details(result: TaskResult) -> ScoreDetails:
    info = METRIC_INFO.get(result.get("metric") or "")
    denominator = result.get("denominator")
    score = result["score"]
    if score is None:  # the writer leaves such results out
        raise ExportError(f"{result['benchmark']}.{result['task']}: no headline score to export")
    details = {
        "denominator": denominator,
        "n": result.get("n"),
        "n_valid": result.get("n_valid"),
        "n_correct": result.get("n_correct"),
        "score_total": result.get("score_total"),
        "score_valid": result.get("score_valid"),
        "invalid_rate": result.get("invalid_rate"),
        "invalid_reasons": result.get("invalid_reasons"),
        "stage_rates": result.get("stage_rates"),
        "extras": result.get("extras"),
        "breakdown": result.get("breakdown"),
    }
    out: ScoreDetails = {"score": float(score), "details": _str_map(details)}
    ci = result.get("ci95")
    uncertainty: Uncertainty = {}
    num = result.get("n_valid") if denominator == "valid" else result.get("n")
    if isinstance(num, int):
        uncertainty["num_samples"] = num
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        binary = info is None or info.kind == "binary"
        method = result.get("ci95_method")  # a summary from before the field: what its ci95 then was
        uncertainty["confidence_interval"] = {
            "lower": float(ci[0]),
            "upper": float(ci[1]),
            "confidence_level": 0.95,
            "method": str(method) if method else "wilson" if binary else "student_t",
        }
    if uncertainty:
        out["uncertainty"] = uncertainty
    return out


def _template_text(suites_dir: Path | None, bench: str, name: Any) -> str | None:
    """The prompt template's text (system, header, user turn, answer format) from the suite,
    or None when the suite is not at hand.  Fixed example turns are not included (they may
    hold benchmark content); their number is recorded."""
    if suites_dir is None or _is_unspecified(name):
        return None
    from pytest_benchaudit.dataset.suites import suite_path

    path = suite_path(suites_dir, bench)
    if not path.is_file():
        return None
    try:
        from pytest_benchaudit.dataset.suites import load_suite

        tpl = load_suite(path).templates.get(str(name))
    except Exception:  # noqa: BLE001 - a suite that does not load only costs the template text
        return None
    if tpl is None:
        return None
    parts = []
    if tpl.system:
        parts.append(f"[system]\n{tpl.system}")
    parts.append(f"[user]\n{tpl.header}{tpl.user}")
    if "{options}" in tpl.user:
        parts.append(f"[each option]\n{tpl.option_format}")
    if tpl.fixed_shots:
        parts.append(f"[fixed example turns: {len(tpl.fixed_shots)}, not exported]")
    return "\n\n".join(parts)


def generation_config(
    card: PipelineCard, result: TaskResult, sent_params: list[dict[str, JsonValue]], suites_dir: Path | None
) -> GenerationConfig:
    fields = card.get("fields", {})
    args: GenerationArgs = {}
    temperature = fields.get("inference.decoding.temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        args["temperature"] = float(temperature)
    top_p = fields.get("inference.decoding.top_p")
    if isinstance(top_p, (int, float)) and not isinstance(top_p, bool):
        args["top_p"] = float(top_p)
    max_tokens = fields.get("inference.max_tokens")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1:
        args["max_tokens"] = max_tokens
    text = _template_text(suites_dir, result["benchmark"], fields.get("prompt.template"))
    if text:
        args["prompt_template"] = text
    details: dict[str, object] = {
        "pipeline": result.get("pipeline") or card.get("pipeline"),
        "pipeline_hash": result.get("pipeline_hash") or card.get("hash"),
        "upstream_hash": card.get("upstream_hash"),
        "card_version": card.get("card_version"),
        "variant": result.get("variant") or None,
    }
    # Every field of the pipeline card under its own dotted name: stop sequences, extraction
    # rule and reasoning handling, denominator, aggregation, ... ("unspecified" kept as such).
    for name, value in fields.items():
        details[name] = value
    shown: dict[str, object] = {
        "overrides": card.get("overrides"),
        "unspecified": card.get("unspecified"),
        "notes": card.get("notes"),
        "why": card.get("why"),
    }
    for key, shown_value in shown.items():
        if shown_value:
            details[f"card.{key}"] = shown_value
    if sent_params:
        details["request.params_sent"] = sent_params if len(sent_params) > 1 else sent_params[0]
    out: GenerationConfig = {"additional_details": _str_map(details)}
    if args:
        out["generation_args"] = args
    return out


def source_data(card: PipelineCard, bench: str, task: str) -> SourceData:
    fields = card.get("fields", {})
    details = {
        "benchmark": bench,
        "task": task,
        "revision": None if _is_unspecified(fields.get("dataset.revision")) else fields.get("dataset.revision"),
        "files": fields.get("dataset.files"),
        "split": fields.get("dataset.split"),
        "subset": fields.get("dataset.subset"),
        "sha256": card.get("dataset_checksums") or None,
    }
    src = fields.get("dataset.source")
    if isinstance(src, str) and src.startswith(("http://", "https://")):
        return {"dataset_name": bench, "additional_details": _str_map(details), "source_type": "url", "url": [src]}
    return {"dataset_name": bench, "additional_details": _str_map(details), "source_type": "other"}
