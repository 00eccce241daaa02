"""Writing an Every Eval Ever export: one aggregate JSON per model x benchmark, samples on request, validation."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from pydantic import JsonValue

from pytest_benchaudit.aggregate.summary_documents import BenchmarkScore, TaskResult
from pytest_benchaudit.common.secrets import redact_obj
from pytest_benchaudit.pipeline.record_documents import Cards, RecordRow
from pytest_benchaudit.report.export.export_documents import AggregateDocument, EvaluationResult, SampleLine
from pytest_benchaudit.report.export.fields import (
    LIBRARY,
    SCHEMA_VERSION,
    ExportError,
    _card_for,
    _evaluation_name,
    _load_json,
    _metric_bounds,
    _s,
    _slug,
    _str_map,
    _uuid4_from,
    generation_config,
    metric_config,
    model_info,
    read_run,
    score_details,
    source_data,
)
from pytest_benchaudit.report.export.samples import (
    sample_line,
)

# ------------------------------------------------------------------ the export


def _benchmark_result(entry: BenchmarkScore, task_results: list[TaskResult]) -> EvaluationResult | None:
    """The benchmark's combined score as one more evaluation result, when the run gives one."""
    score = entry.get("score")
    if score is None or not task_results:
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
        "source_data": {
            "dataset_name": bench,
            "source_type": "other",
            "additional_details": _str_map({"tasks": entry.get("tasks")}),
        },
        "metric_config": {
            "evaluation_description": f"{bench}: the tasks' headline scores combined by aggregation.method = {method}",
            "metric_id": f"benchaudit.{bench}.{_slug(method)}",
            "metric_name": f"{bench} ({method})",
            "metric_kind": "aggregate",
            "lower_is_better": directions.pop(),
            "score_type": "continuous",
            "min_score": None if None in lows else min(v for v in lows if v is not None),
            "max_score": None if None in highs else max(v for v in highs if v is not None),
            "additional_details": _str_map(
                {"aggregation.method": method, "tasks": entry.get("tasks"), "note": entry.get("note") or None}
            ),
        },
        "score_details": {
            "score": float(score),
            "details": _str_map({"n": entry.get("n"), "aggregation.method": method, "pipeline": entry.get("pipeline")}),
        },
    }


def export_every_eval_ever(
    run_dir: Path,
    out: Path,
    *,
    samples: bool = False,
    include_questions: bool = False,
    suites_dir: Path | None = None,
    source_organization: str = "unknown",
    evaluator_relationship: str = "third_party",
    now: float | None = None,
) -> list[Path]:
    """Write the Every Eval Ever files for ``run_dir`` under ``out``; returns the paths written."""
    run, summary, records = read_run(run_dir)
    run_id = str(run.get("run_id") or Path(run_dir).name)
    cards: Cards = run.get("pipeline_cards") or {}
    retrieved = str(int(now if now is not None else time.time()))
    evaluated_at = run.get("ended") or run.get("started")
    source = run.get("source") if isinstance(run.get("source"), dict) else None
    library_version = str((run.get("versions") or {}).get(LIBRARY) or "unknown")

    by_key: dict[tuple[str, str, str, str], list[RecordRow]] = defaultdict(list)
    for rec in records:
        by_key[(rec["benchmark"], rec["task"], rec["model"], rec.get("variant", ""))].append(rec)
    groups: dict[tuple[str, str], list[TaskResult]] = defaultdict(list)
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

        evaluation_results: list[EvaluationResult] = []
        lines: list[SampleLine] = []
        for result in results:
            task, variant = result["task"], result.get("variant", "")
            if result.get("score") is None:
                print(
                    f"warning: {bench}.{task} for {spec}: no headline score (denominator "
                    f"{result.get('denominator')!r}); not exported",
                    file=sys.stderr,
                )
                continue
            card = _card_for(cards, bench, task, variant)
            recs = by_key.get((bench, task, spec, variant), [])
            sent: list[dict[str, JsonValue]] = []
            for rec in recs:
                params = (rec.get("request") or {}).get("params")
                if isinstance(params, dict) and params not in sent:
                    sent.append(params)
            name_ = _evaluation_name(bench, task, variant)
            entry: EvaluationResult = {
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

        source_details: dict[str, object] = {
            "benchaudit.run_id": run_id,
            "benchaudit.pipeline": run.get("pipeline"),
            "benchaudit.overrides": run.get("overrides") or None,
            "benchaudit.dataset_checksums": run.get("dataset_checksums") or None,
        }
        if source:
            source_details.update(
                {
                    "imported_from": source.get("kind"),
                    "imported_files": source.get("file_checksums") or source.get("files"),
                    "import_note": source.get("note"),
                    "released_scores": run.get("released_scores"),
                    "agreement_with_released": run.get("agreement"),
                }
            )
        doc: AggregateDocument = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "retrieved_timestamp": retrieved,
            "source_metadata": {
                "source_name": (
                    f"{source.get('kind')} (imported by benchaudit)" if source else f"benchaudit run {run_id}"
                ),
                "source_type": "evaluation_run",
                "source_organization_name": source_organization,
                "evaluator_relationship": evaluator_relationship,
                "additional_details": _str_map(source_details),
            },
            "eval_library": {
                "name": LIBRARY,
                "version": library_version,
                "additional_details": _str_map(
                    {"record_version": (records[0].get("record_version") if records else None)}
                ),
            },
            "model_info": info,
            "evaluation_results": evaluation_results,
        }
        if evaluated_at:
            doc["evaluation_timestamp"] = str(evaluated_at)
        if samples:
            sample_path = target_dir / f"{file_id}_samples.jsonl"
            body = "".join(
                json.dumps(redact_obj(line), ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines
            )
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
                    problems.append(
                        f"{path}:{lineno}: {'/'.join(map(str, err.absolute_path)) or '(top)'}: {err.message}"
                    )
        else:
            for err in validators["aggregate"].iter_errors(json.loads(path.read_text(encoding="utf-8"))):
                problems.append(f"{path}: {'/'.join(map(str, err.absolute_path)) or '(top)'}: {err.message}")
    return problems
