"""``benchaudit import every-eval-ever DIR...``: Every Eval Ever (schema 0.3.0) files as run directories.

An aggregate file (``eval.schema.json``) holds a model's ``evaluation_results`` (one per task: the
score, its metric, ``generation_config``) and may point to a per-sample JSONL
(``detailed_evaluation_results.file_path``, ``instance_level_eval.schema.json`` lines: the sample
id, ``input.reference`` (the gold), ``output.raw`` (the outputs), ``answer_attribution`` (the
extracted answer), ``evaluation.score`` and ``is_correct``, ``error``, ``token_usage``).  One run
directory per task (evaluation result) and model; each sample line a question.

What ``benchaudit export --format every-eval-ever --samples`` writes comes back as it was: the
card's fields (``generation_config.additional_details``, one per card field), each record's
validity and why (``metadata.valid`` / ``invalid_reason`` / ``finish_reason``), so the imported
run's headline is the exported one, under the same denominator.  Files from other producers
carry no such details: their fields stay unspecified and every sample without an error counts.
An aggregate result without a sample file is left out, named in the output (nothing per sample
to import).  The benchmark's combined score (an entry whose ``metric_kind`` is ``aggregate``) is
not a task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from pytest_benchaudit.importers.common import ImportedRun, ImportSourceError
from pytest_benchaudit.importers.imported_runs import HarnessTask, ImportedSample, ImportOptions, import_task
from pytest_benchaudit.importers.log_samples import LogImporter
from pytest_benchaudit.pipeline.stages import field_paths

__all__ = ["EVERY_EVAL_EVER", "EveryEvalEverImporter"]

KNOWN_SCHEMA = "0.3.0"


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class MetricConfig(_Read):
    metric_id: str = ""
    metric_name: str = ""
    metric_kind: str | None = None
    lower_is_better: bool = False


class ScoreDetails(_Read):
    score: float
    details: dict[str, str] = Field(default_factory=dict)
    uncertainty: dict[str, JsonValue] | None = None


class GenerationConfig(_Read):
    additional_details: dict[str, str] = Field(default_factory=dict)


class EvaluationResult(_Read):
    evaluation_name: str
    metric_config: MetricConfig = MetricConfig()
    score_details: ScoreDetails
    generation_config: GenerationConfig | None = None


class Detailed(_Read):
    file_path: str


class ModelInfo(_Read):
    name: str
    id: str = ""


class Library(_Read):
    name: str = "unknown"
    version: str = "unknown"


class AggregateFile(_Read):
    schema_version: str
    model_info: ModelInfo
    eval_library: Library = Library()
    evaluation_results: list[EvaluationResult]
    detailed_evaluation_results: Detailed | None = None


class SampleLine(_Read):
    evaluation_name: str
    sample_id: str
    input: dict[str, JsonValue] = Field(default_factory=dict)
    output: dict[str, JsonValue] | None = None
    answer_attribution: list[dict[str, JsonValue]] | None = None
    evaluation: dict[str, JsonValue] = Field(default_factory=dict)
    token_usage: dict[str, JsonValue] | None = None
    error: str | None = None
    metadata: dict[str, str] | None = None


def _decoded(text: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(text)
        return value
    except ValueError:
        return text


def _aggregates(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not found:
                raise ImportSourceError(f"{path}: no Every Eval Ever aggregate files (*.json) here")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise ImportSourceError(f"{path}: no such file or folder")
    return out


def _read(path: Path) -> AggregateFile:
    try:
        doc = AggregateFile.model_validate(orjson.loads(path.read_bytes()))
    except (orjson.JSONDecodeError, ValidationError) as err:
        raise ImportSourceError(f"{path}: not an Every Eval Ever aggregate file: {str(err).splitlines()[0]}") from None
    major = doc.schema_version.split(".")[:2]
    if major > KNOWN_SCHEMA.split(".")[:2]:
        raise ImportSourceError(
            f"{path}: schema_version {doc.schema_version} is newer than this reader knows ({KNOWN_SCHEMA})"
        )
    return doc


def _samples_file(path: Path, doc: AggregateFile) -> Path | None:
    if doc.detailed_evaluation_results is None:
        return None
    rel = Path(doc.detailed_evaluation_results.file_path)
    for root in [path.parent, *path.parents]:  # file_path is relative to the datastore's root
        if (root / rel).is_file():
            return root / rel
    if (path.parent / rel.name).is_file():
        return path.parent / rel.name
    raise ImportSourceError(f"{path}: its sample file {rel} is not there")


def _sample(line: SampleLine, where: str, denominator: str) -> ImportedSample:
    meta = {k: _decoded(v) for k, v in (line.metadata or {}).items()}
    raw = (line.output or {}).get("raw")
    outputs = [str(o) for o in raw] if isinstance(raw, list) else []
    refs = line.input.get("reference")
    gold = str(refs[0]) if isinstance(refs, list) and refs else ""
    answer = str((line.answer_attribution or [{}])[-1].get("extracted_value") or "") or None
    score = line.evaluation.get("score")
    value = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
    valid = meta.get("valid")
    reason = meta.get("invalid_reason")
    invalid = isinstance(reason, str) and valid is False
    usage = line.token_usage or {}
    repeat = meta.get("repeat")
    epoch = repeat + 1 if isinstance(repeat, int) and not isinstance(repeat, bool) else 1
    finish = meta.get("finish_reason")
    return ImportedSample(
        sample_id=line.sample_id,
        epoch=epoch,
        target=gold,
        request={"mode": "chat", "messages": [], "params": {}},
        output=outputs[-1] if outputs else "",
        finish_reason=finish if isinstance(finish, str) else None,
        error=line.error,
        usage={
            "prompt_tokens": usage.get("input_tokens"),
            "completion_tokens": usage.get("output_tokens"),
            "total_tokens": usage.get("total_tokens"),
        }
        if usage
        else {},
        peer_answer=None if invalid else answer,
        peer_score=score,
        peer_value=None if line.error is not None or (invalid and denominator == "valid") else value,
        invalid_reason=str(reason) if invalid else None,
        source_row=where,
    )


class EveryEvalEverImporter(LogImporter):
    """The ``every-eval-ever`` importer: aggregate JSON files and the sample JSONL they point to."""

    name = "every-eval-ever"
    help = "Every Eval Ever 0.3.0 aggregate files and their per-sample JSONL"

    def detect(self, path: Path) -> bool:
        files = [path] if path.is_file() else sorted(path.rglob("*.json"))[:1] if path.is_dir() else []
        for file in files:
            with open(file, "rb") as handle:
                head = handle.read(4096)
            if (
                b'"schema_version"' in head
                and b'"evaluation_results"' in head
                or b'"evaluation_id"' in head
                and b'"source_metadata"' in head
            ):
                return True
        return False

    def import_logs(self, paths: list[Path], options: ImportOptions) -> list[ImportedRun]:
        runs: list[ImportedRun] = []
        for path in _aggregates(paths):
            doc = _read(path)
            samples = _samples_file(path, doc)
            for result in doc.evaluation_results:
                if result.metric_config.metric_kind == "aggregate":
                    continue
                if samples is None:
                    options.log(f"{path}: {result.evaluation_name}: no sample file, left out (nothing per sample)")
                    continue
                runs.append(import_task(*self._task(path, doc, result, samples), options))
        return runs

    def _task(
        self, path: Path, doc: AggregateFile, result: EvaluationResult, samples: Path
    ) -> tuple[HarnessTask, Callable[[], Iterator[ImportedSample]]]:
        details = result.generation_config.additional_details if result.generation_config else {}
        known = set(field_paths())
        stated = {
            k: (_decoded(v), f"generation_config.additional_details.{k}")
            for k, v in details.items()
            if k in known and _decoded(v) != "unspecified"
        }
        denominator = str(stated.get("scoring.denominator", ("total", ""))[0])
        stated.setdefault("scoring.denominator", ("total", "every sample line counts (the file states none)"))
        stated.setdefault(
            "scoring.metric", (result.metric_config.metric_id or "every_eval_ever:score", "metric_config.metric_id")
        )
        bench, _, task = result.evaluation_name.partition(".")
        name = result.evaluation_name

        def lines() -> Iterator[ImportedSample]:
            finish_reasons = 0
            with open(samples, "rb") as handle:
                for number, raw in enumerate(handle, 1):
                    if not raw.strip():
                        continue
                    where = f"{samples}:{number}"
                    try:
                        line = SampleLine.model_validate_json(raw)
                    except ValidationError as err:
                        first = err.errors()[0]
                        raise ImportSourceError(
                            f"{where}: not an Every Eval Ever sample line: "
                            f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
                        ) from None
                    if line.evaluation_name == name:
                        sample = _sample(line, where, denominator)
                        finish_reasons += sample.finish_reason is not None
                        yield sample
            if not finish_reasons and stated.get("inference.request", ("generate", ""))[0] != "loglikelihood":
                # No line says why its generation ended (an export of an lm-eval import, or a file that keeps
                # none): its truncation is unknown, which the run says rather than count 0 truncated.
                task_obj.not_recorded["finish_reason"] = "not recorded in the Every Eval Ever file"

        uncertainty = result.score_details.uncertainty or {}
        n = uncertainty.get("num_samples")
        task_obj = HarnessTask(
            harness="every-eval-ever",
            harness_version=f"{doc.eval_library.name} {doc.eval_library.version}",
            task=task or bench,
            model=doc.model_info.name,
            files=[path, samples],
            metric=result.metric_config.metric_id or "score",
            reported=result.score_details.score,
            reported_n=n if isinstance(n, int) else None,
            stated=stated,
            reducer=str(stated.get("aggregation.reducer", ("mean", ""))[0]),
            benchmark=bench if task else "eee",
            notes=[
                f"Imported from Every Eval Ever {doc.schema_version} ({doc.eval_library.name} "
                f"{doc.eval_library.version}): {name}."
            ],
        )
        return task_obj, lines


EVERY_EVAL_EVER = EveryEvalEverImporter()
