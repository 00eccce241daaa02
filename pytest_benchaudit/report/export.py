"""``benchaudit export``: a run directory in another project's format.

    benchaudit export RUN_DIR --format every-eval-ever [--out DIR] [--samples] [--include-questions]
                                                      [--validate SCHEMA_DIR]

Every Eval Ever (schema 0.3.0) is the only format so far.  For each model x benchmark of the
run it writes one aggregate JSON (``eval.schema.json``) and, with ``--samples``, one JSONL of
per-item lines (``instance_level_eval.schema.json``), laid out as the datastore expects::

    OUT/data/<benchmark>/<org>/<model>/<uuid>.json
    OUT/data/<benchmark>/<org>/<model>/<uuid>_samples.jsonl

How our fields map (the schema's typed slots first; what has none goes into the free-form
``additional_details`` string maps, JSON-encoded where the value is not a string):

- model: ``model_info.name`` = the model spec, ``model_info.id`` = the served model id when the
  endpoint reported exactly one, else the requested id, else the spec; spec, requested id and
  served ids in ``model_info.additional_details``.
- task (and variant): one ``evaluation_results[]`` entry each, ``evaluation_name`` =
  ``<benchmark>.<task>`` (``|<variant>`` for ``--vary`` variants); the benchmark's combined score
  (when the run's aggregation gives one) is one more entry named ``<benchmark>``.
- metric: ``metric_config`` (``lower_is_better``, ``metric_id`` ``benchaudit.<metric>``, bounds);
  headline ``score`` under the pipeline's denominator; ``uncertainty.confidence_interval`` = the
  run's 95% CI (Wilson for 0/1 metrics, Student t otherwise), ``num_samples`` = the headline's
  denominator; ``score_details.details``: n, n_valid, n_correct, score_total, score_valid,
  invalid_rate, invalid_reasons, stage_rates, extras.
- pipeline: ``generation_config.generation_args`` gets temperature, top_p, max_tokens and the
  prompt template text (when the suite can be read); every card field (stop sequences,
  extraction rule, reasoning handling, denominator, aggregation, ...), the pipeline name, hash,
  notes and the parameters actually sent go in ``generation_config.additional_details``.

Question content (question text, rendered prompt, messages, option labels, question metadata) is
withheld from sample lines unless ``--include-questions``; gold answers and model outputs are
written (``input.reference``, ``output.raw``).  Nothing from the environment (argv, endpoint
URLs, platform, versions other than the library's) is exported, and everything written passes
through the run's secret redaction.  The exporter does not need the schema files; ``--validate``
checks what it wrote against them with ``jsonschema``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import re
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from pytest_benchaudit.common.errors import BenchauditError, cli_exit_code
from pytest_benchaudit.aggregate.results import benchmark_scores, summarize, summary_document
from pytest_benchaudit.runs.store import load_run, read_summary_json
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.common.secrets import redact_obj

__all__ = ["add_export_parser", "run_export", "export_every_eval_ever", "validate_export", "ExportError", "FORMATS"]

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


def read_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """``run.json``, a summary and the records of a run directory (a :class:`RunDirError` if unusable).

    The summary is computed here from the records and the run's cards, never taken from
    ``summary.json``, which may be stale (a run killed before it finished, records edited or
    re-scored since); only its gate verdicts are kept from the file when there is one.
    """
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


def _s(value: Any) -> str:
    """A string for a string-to-string map: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _str_map(mapping: dict[str, Any]) -> dict[str, str]:
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


def _epoch(iso: str | None) -> str | None:
    if not iso:
        return None
    try:
        return str(int(_dt.datetime.fromisoformat(iso).timestamp()))
    except ValueError:
        return None


def _evaluation_name(bench: str, task: str, variant: str) -> str:
    return f"{bench}.{task}" + (f"|{variant}" if variant else "")


def _card_for(cards: dict[str, Any], bench: str, task: str, variant: str) -> dict[str, Any]:
    return cards.get(f"{bench}.{task}|{variant}") or cards.get(f"{bench}.{task}") or {}


# ------------------------------------------------------------------ model identity


def _model_entry(run: dict[str, Any], spec: str) -> dict[str, Any]:
    for entry in run.get("models") or []:
        if entry.get("spec") == spec or entry.get("label") == spec:
            return entry
    return {"spec": spec}


def _model_id(entry: dict[str, Any], spec: str) -> str:
    served = [s for s in entry.get("served_model_ids") or [] if s]
    if len(served) == 1:
        return str(served[0])
    return str(entry.get("model_id") or spec)


def model_info(run: dict[str, Any], spec: str) -> dict[str, Any]:
    entry = _model_entry(run, spec)
    kind = entry.get("kind", "")
    details: dict[str, Any] = {
        # Whether a model is self-deployed or its weights open is not something a run knows,
        # except for the embedded local model (an open-weights model we launched ourselves).
        "deployment_type": "self_deployed" if kind == "local" else "unknown",
        "model_availability": "open_weights" if kind == "local" else "unknown",
        "benchaudit.spec": spec,
        "benchaudit.model_kind": kind or None,
        "benchaudit.requested_model_id": entry.get("model_id"),
        "benchaudit.served_model_ids": entry.get("served_model_ids"),
    }
    info: dict[str, Any] = {"name": spec, "id": _model_id(entry, spec), "additional_details": _str_map(details)}
    if kind == "local":
        info["inference_engine"] = {"name": "llama-cpp-python"}
    return info


# ------------------------------------------------------------------ metrics and pipeline


def _metric_bounds(metric: str) -> tuple[float | None, float | None]:
    """Range of a per-item score.  Every metric of the project lies between its best value and
    the value an unreadable answer gets (``invalid_value``, the worst case): 0/1 for binary ones,
    [0, worst] for errors (lower is better), [worst, 1] for the other continuous ones."""
    info = METRIC_INFO.get(metric)
    if info is None:
        return None, None
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


def metric_config(result: dict[str, Any]) -> dict[str, Any]:
    metric = result.get("metric") or ""
    info = METRIC_INFO.get(metric)
    low, high = _metric_bounds(metric)
    details = {
        "denominator": result.get("denominator"),
        "headline": f"mean per-item score over {'the valid items' if result.get('denominator') == 'valid' else 'all items'} "
                    "(scoring.denominator)",
        "invalid_item_score": None if info is None else info.invalid_value,
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


def score_details(result: dict[str, Any]) -> dict[str, Any]:
    info = METRIC_INFO.get(result.get("metric") or "")
    denominator = result.get("denominator")
    out: dict[str, Any] = {"score": float(result["score"])}
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
    out["details"] = _str_map(details)
    ci = result.get("ci95")
    uncertainty: dict[str, Any] = {}
    num = result.get("n_valid") if denominator == "valid" else result.get("n")
    if isinstance(num, int):
        uncertainty["num_samples"] = num
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        binary = info is None or info.kind == "binary"
        uncertainty["confidence_interval"] = {
            "lower": float(ci[0]), "upper": float(ci[1]), "confidence_level": 0.95,
            "method": "wilson" if binary else "student_t",
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
    path = Path(suites_dir) / bench / "suite.toml"
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


def generation_config(card: dict[str, Any], result: dict[str, Any], sent_params: list[dict[str, Any]],
                      suites_dir: Path | None) -> dict[str, Any]:
    fields = card.get("fields", {})
    args: dict[str, Any] = {}
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
    details: dict[str, Any] = {
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
    for key in ("overrides", "unspecified", "notes", "why"):
        if card.get(key):
            details[f"card.{key}"] = card[key]
    if sent_params:
        details["request.params_sent"] = sent_params if len(sent_params) > 1 else sent_params[0]
    out: dict[str, Any] = {"additional_details": _str_map(details)}
    if args:
        out["generation_args"] = args
    return out


def source_data(card: dict[str, Any], bench: str, task: str) -> dict[str, Any]:
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
    out: dict[str, Any] = {"dataset_name": bench, "additional_details": _str_map(details)}
    if isinstance(src, str) and src.startswith(("http://", "https://")):
        out.update(source_type="url", url=[src])
    else:
        out["source_type"] = "other"
    return out


# ------------------------------------------------------------------ samples


def _question_text(request: dict[str, Any]) -> tuple[str, str]:
    """(the question as the model was asked it: last user turn or the prompt; the whole request as text)."""
    messages = request.get("messages") or []
    if messages:
        users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        formatted = "\n\n".join(f"[{m.get('role')}]\n{m.get('content') or ''}" for m in messages)
        return (users[-1] if users else ""), formatted
    prompt = request.get("prompt") or ""
    return str(prompt), str(prompt)


def sample_line(rec: dict[str, Any], evaluation_id: str, model_id: str, card: dict[str, Any],
                include_questions: bool) -> dict[str, Any]:
    request = rec.get("request") or {}
    raw_question, formatted = _question_text(request)
    gold = str(rec.get("gold", ""))
    inp: dict[str, Any] = {"raw": "", "reference": [gold]}
    if include_questions:
        inp["raw"] = raw_question
        inp["formatted"] = formatted
        inp["choices"] = list(rec.get("question_labels") or []) or None
    outputs = [str(o) for o in rec.get("earlier_outputs") or []] + [str(rec.get("raw_output") or "")]
    output: dict[str, Any] = {"raw": outputs,
                              "reasoning_trace": [rec["reasoning"]] if rec.get("reasoning") else None}
    rule = card.get("fields", {}).get("extraction.rule") or "unspecified"
    reasoning = card.get("fields", {}).get("extraction.reasoning")
    attribution = [{
        "turn_idx": 0,
        "source": f"output.raw[{len(outputs) - 1}]",
        "extracted_value": "" if rec.get("prediction") is None else str(rec["prediction"]),
        "extraction_method": f"benchaudit:{rule}" + (f" (reasoning={reasoning})" if reasoning else ""),
        "is_terminal": True,
    }]
    usage = rec.get("usage") or {}
    token_usage = None
    if all(isinstance(usage.get(k), int) for k in ("prompt_tokens", "completion_tokens")):
        token_usage = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                       "total_tokens": usage.get("total_tokens")
                       if isinstance(usage.get("total_tokens"), int)
                       else usage["prompt_tokens"] + usage["completion_tokens"]}
        details = usage.get("completion_tokens_details") or {}
        if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
            token_usage["reasoning_tokens"] = details["reasoning_tokens"]
    latency = rec.get("latency_s")
    performance = {
        "latency_ms": round(float(latency) * 1000, 3) if isinstance(latency, (int, float)) and latency > 0 else None,
        "additional_details": _str_map({"attempts": rec.get("attempts"), "asks": rec.get("asks")}),
    }
    meta: dict[str, Any] = {
        "benchmark": rec.get("benchmark"),
        "task": rec.get("task"),
        "variant": rec.get("variant") or None,
        "question_index": rec.get("question_index"),
        "pipeline": rec.get("pipeline"),
        "pipeline_hash": rec.get("pipeline_hash"),
        "valid": rec.get("valid"),
        "invalid_reason": rec.get("invalid_reason"),
        "invalid_stage": rec.get("invalid_stage"),
        "finish_reason": rec.get("finish_reason"),
        "extraction_detail": rec.get("extraction_detail") or None,
        "score_extras": rec.get("score_extras") or None,
        "top_logprobs": rec.get("top_logprobs") or None,
        "served_model": rec.get("served_model"),
        "question_withheld": not include_questions,
    }
    if include_questions and rec.get("question_meta"):
        meta["question_meta"] = rec["question_meta"]
    for key, value in rec.items():  # an import's own values (released_prediction, released_score, ...)
        if key.startswith("released_") or key == "source_row":
            meta[key] = value
    hashed = raw_question + "\x1f" + gold  # over the question as asked, whether or not it is exported
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model_id,
        "evaluation_name": _evaluation_name(rec["benchmark"], rec["task"], rec.get("variant", "")),
        "evaluation_result_id": _evaluation_name(rec["benchmark"], rec["task"], rec.get("variant", "")),
        "sample_id": str(rec.get("question_id")),
        "sample_hash": hashlib.sha256(hashed.encode("utf-8")).hexdigest(),
        "interaction_type": "single_turn",
        "input": inp,
        "output": output,
        "messages": None,
        "answer_attribution": attribution,
        "evaluation": {"score": float(rec.get("score", 0.0)), "is_correct": bool(rec.get("correct")), "num_turns": 1},
        "token_usage": token_usage,
        "performance": performance,
        "error": rec.get("error"),
        "metadata": _str_map(meta),
    }


# ------------------------------------------------------------------ the export


def _benchmark_result(entry: dict[str, Any], task_results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The benchmark's combined score as one more evaluation result, when the run gives one."""
    if entry.get("score") is None or not task_results:
        return None
    directions = {bool(r.get("lower_is_better")) for r in task_results}
    if len(directions) != 1:
        return None
    bounds = [_metric_bounds(r.get("metric") or "") for r in task_results]
    lows, highs = [b[0] for b in bounds], [b[1] for b in bounds]
    bench, variant = entry["benchmark"], entry.get("variant", "")
    method = entry.get("method") or "unspecified"
    return {
        "evaluation_result_id": bench + (f"|{variant}" if variant else ""),
        "evaluation_name": bench + (f"|{variant}" if variant else ""),
        "source_data": {"dataset_name": bench, "source_type": "other",
                        "additional_details": _str_map({"tasks": entry.get("tasks")})},
        "metric_config": {
            "evaluation_description": f"{bench}: the tasks' headline scores combined by aggregation.method = {method}",
            "metric_id": f"benchaudit.{bench}.{_slug(method)}",
            "metric_name": f"{bench} ({method})",
            "metric_kind": "aggregate",
            "lower_is_better": directions.pop(),
            "score_type": "continuous",
            "min_score": None if None in lows else min(lows),
            "max_score": None if None in highs else max(highs),
            "additional_details": _str_map({"aggregation.method": method, "tasks": entry.get("tasks"),
                                            "note": entry.get("note") or None}),
        },
        "score_details": {"score": float(entry["score"]),
                          "details": _str_map({"n": entry.get("n"), "aggregation.method": method,
                                               "pipeline": entry.get("pipeline")})},
    }


def export_every_eval_ever(run_dir: Path, out: Path, *, samples: bool = False, include_questions: bool = False,
                           suites_dir: Path | None = None, source_organization: str = "unknown",
                           evaluator_relationship: str = "third_party",
                           now: float | None = None) -> list[Path]:
    """Write the Every Eval Ever files for ``run_dir`` under ``out``; returns the paths written."""
    run, summary, records = read_run(run_dir)
    run_id = str(run.get("run_id") or Path(run_dir).name)
    cards: dict[str, Any] = run.get("pipeline_cards") or {}
    retrieved = str(int(now if now is not None else time.time()))
    evaluated_at = run.get("ended") or run.get("started")
    source = run.get("source") if isinstance(run.get("source"), dict) else None
    library_version = str((run.get("versions") or {}).get(LIBRARY) or "unknown")

    by_key: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_key[(rec["benchmark"], rec["task"], rec["model"], rec.get("variant", ""))].append(rec)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for result in summary["results"]:
        groups[(result["model"], result["benchmark"])].append(result)

    written: list[Path] = []
    for (spec, bench), results in groups.items():
        info = model_info(run, spec)
        model_id = info["id"]
        evaluation_id = f"{bench}/{model_id}/{retrieved}"
        org, _, name = model_id.rpartition("/")
        file_id = _uuid4_from(run_id, spec, bench)
        rel_dir = Path("data") / _slug(bench) / _slug(org or "unknown") / _slug(name)
        target_dir = Path(out) / rel_dir
        target_dir.mkdir(parents=True, exist_ok=True)

        evaluation_results = []
        lines: list[dict[str, Any]] = []
        for result in results:
            task, variant = result["task"], result.get("variant", "")
            if result.get("score") is None:
                print(f"warning: {bench}.{task} for {spec}: no headline score (denominator "
                      f"{result.get('denominator')!r}); not exported", file=sys.stderr)
                continue
            card = _card_for(cards, bench, task, variant)
            recs = by_key.get((bench, task, spec, variant), [])
            sent: list[dict[str, Any]] = []
            for rec in recs:
                params = (rec.get("request") or {}).get("params")
                if isinstance(params, dict) and params not in sent:
                    sent.append(params)
            name_ = _evaluation_name(bench, task, variant)
            entry: dict[str, Any] = {
                "evaluation_result_id": name_,
                "evaluation_name": name_,
                "source_data": source_data(card, bench, task),
                "metric_config": metric_config(result),
                "score_details": score_details(result),
                "generation_config": generation_config(card, result, sent[:5], suites_dir),
            }
            if evaluated_at:
                entry["evaluation_timestamp"] = str(evaluated_at)
            evaluation_results.append(entry)
            if samples:
                lines.extend(sample_line(rec, evaluation_id, model_id, card, include_questions) for rec in recs)
        for bench_entry in summary.get("benchmarks") or []:
            if bench_entry.get("benchmark") == bench and bench_entry.get("model") == spec:
                task_results = [r for r in results if r.get("variant", "") == bench_entry.get("variant", "")]
                combined = _benchmark_result(bench_entry, task_results)
                if combined:
                    evaluation_results.append(combined)
        if not evaluation_results:
            continue

        source_details: dict[str, Any] = {"benchaudit.run_id": run_id, "benchaudit.pipeline": run.get("pipeline"),
                                          "benchaudit.overrides": run.get("overrides") or None,
                                          "benchaudit.dataset_checksums": run.get("dataset_checksums") or None}
        if source:
            source_details.update({
                "imported_from": source.get("kind"),
                "imported_files": source.get("file_checksums") or source.get("files"),
                "import_note": source.get("note"),
                "released_scores": run.get("released_scores"),
                "agreement_with_released": run.get("agreement"),
            })
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "retrieved_timestamp": retrieved,
            "source_metadata": {
                "source_name": (f"{source.get('kind')} (imported by benchaudit)" if source
                                else f"benchaudit run {run_id}"),
                "source_type": "evaluation_run",
                "source_organization_name": source_organization,
                "evaluator_relationship": evaluator_relationship,
                "additional_details": _str_map(source_details),
            },
            "eval_library": {"name": LIBRARY, "version": library_version,
                             "additional_details": _str_map({"record_version": (records[0].get("record_version")
                                                                                 if records else None)})},
            "model_info": info,
            "evaluation_results": evaluation_results,
        }
        if evaluated_at:
            doc["evaluation_timestamp"] = str(evaluated_at)
        if samples:
            sample_path = target_dir / f"{file_id}_samples.jsonl"
            body = "".join(json.dumps(redact_obj(line), ensure_ascii=False, separators=(",", ":")) + "\n"
                           for line in lines)
            _write_text(sample_path, body)
            written.append(sample_path)
            doc["detailed_evaluation_results"] = {
                "format": "jsonl",
                "file_path": (rel_dir / sample_path.name).as_posix(),
                "hash_algorithm": "sha256",
                "checksum": hashlib.sha256(body.encode("utf-8")).hexdigest(),
                "total_rows": len(lines),
                "additional_details": {"questions_included": _s(include_questions)},
            }
        agg_path = target_dir / f"{file_id}.json"
        _write_text(agg_path, json.dumps(redact_obj(doc), indent=2, ensure_ascii=False) + "\n")
        written.append(agg_path)
    return written


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# ------------------------------------------------------------------ validation


def validate_export(paths: Iterable[Path], schema_dir: Path) -> list[str]:
    """Check written files against ``eval.schema.json`` / ``instance_level_eval.schema.json``
    in ``schema_dir``; returns one message per problem (empty when all is valid)."""
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - a declared dependency
        raise ExportError("--validate needs the jsonschema package (pip install jsonschema)") from None
    schema_dir = Path(schema_dir)
    validators = {}
    for kind, name in (("aggregate", "eval.schema.json"), ("samples", "instance_level_eval.schema.json")):
        schema = _load_json(schema_dir / name) if (schema_dir / name).is_file() else None
        if schema is None:
            raise ExportError(f"{schema_dir}: no {name} there (give the folder that holds the Every Eval Ever schemas)")
        cls = jsonschema.validators.validator_for(schema)
        validators[kind] = cls(schema)
    problems: list[str] = []
    for path in paths:
        path = Path(path)
        if path.name.endswith("_samples.jsonl"):
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for err in validators["samples"].iter_errors(json.loads(line)):
                    problems.append(f"{path}:{lineno}: {'/'.join(map(str, err.absolute_path)) or '(top)'}: {err.message}")
        else:
            for err in validators["aggregate"].iter_errors(json.loads(path.read_text(encoding="utf-8"))):
                problems.append(f"{path}: {'/'.join(map(str, err.absolute_path)) or '(top)'}: {err.message}")
    return problems


# ------------------------------------------------------------------ command line


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``export`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "export", help="write a run in another format (Every Eval Ever: aggregate JSON + per-sample JSONL)",
        description="Write a run directory's results in another project's format. every-eval-ever: one aggregate "
                    "JSON per model x benchmark (schema 0.3.0) and, with --samples, a per-sample JSONL. Question "
                    "content is withheld unless --include-questions.")
    p.add_argument("run_dir", type=Path, help="a benchaudit run directory (run.json, records.jsonl, summary.json)")
    p.add_argument("--format", dest="export_format", default="every-eval-ever", metavar="FORMAT",
                   help=f"output format: {', '.join(FORMATS)} (default: every-eval-ever)")
    p.add_argument("--out", type=Path, help="output folder (default: exports/<run-id>)")
    p.add_argument("--samples", action="store_true", help="also write per-sample JSONL files")
    p.add_argument("--include-questions", action="store_true",
                   help="put question text, the prompt as sent and option labels into the samples (withheld by default)")
    p.add_argument("--validate", type=Path, metavar="SCHEMA_DIR",
                   help="check the written files against eval.schema.json / instance_level_eval.schema.json in SCHEMA_DIR")
    p.add_argument("--source-org", default="unknown", help="source_metadata.source_organization_name (default: unknown)")
    p.add_argument("--evaluator-relationship", default="third_party",
                   choices=("first_party", "third_party", "collaborative", "other"),
                   help="who ran the evaluation relative to the model's developer (default: third_party)")
    p.add_argument("--suites-dir", type=Path, default=Path("suites"),
                   help="where suites live, to export prompt template text (default: suites/; optional)")
    return p


def run_export(args: argparse.Namespace) -> int:
    """Run ``benchaudit export``: 0 written (and valid), 1 written but invalid, 2 on bad input."""
    fmt = getattr(args, "export_format", None) or getattr(args, "format", None) or "every-eval-ever"
    try:
        if fmt not in FORMATS:
            raise ExportError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
        if args.validate is not None and not Path(args.validate).is_dir():
            raise ExportError(f"--validate {args.validate}: not a directory")
        run_dir = Path(args.run_dir)
        out = args.out
        if out is None:
            out = Path("exports") / run_dir.resolve().name
        suites_dir = getattr(args, "suites_dir", None)
        paths = export_every_eval_ever(
            run_dir, Path(out), samples=args.samples, include_questions=args.include_questions,
            suites_dir=suites_dir if suites_dir and Path(suites_dir).is_dir() else None,
            source_organization=getattr(args, "source_org", "unknown"),
            evaluator_relationship=getattr(args, "evaluator_relationship", "third_party"))
        problems = validate_export(paths, args.validate) if args.validate is not None else []
    except ExportError as err:
        print(f"benchaudit export: {err}", file=sys.stderr)
        return 2
    except BenchauditError as err:  # a run directory that is missing, corrupt or empty
        print(f"benchaudit export: {err}", file=sys.stderr)
        return cli_exit_code(err)
    except OSError as err:
        print(f"benchaudit export: {err}", file=sys.stderr)
        return 2
    n_agg = sum(1 for p in paths if p.suffix == ".json")
    print(f"{n_agg} aggregate file(s) and {len(paths) - n_agg} sample file(s) written under {out}")
    if args.validate is not None:
        for message in problems[:20]:
            print(f"invalid: {message}", file=sys.stderr)
        if problems:
            print(f"benchaudit export: {len(problems)} schema violation(s)", file=sys.stderr)
            return 1
        print(f"all {len(paths)} file(s) valid against the schemas in {args.validate}")
    return 0
