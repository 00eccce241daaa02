"""``benchaudit import lm-eval DIR...``: what ``lm_eval --output_path DIR --log_samples`` writes, as run directories.

lm-eval writes, per model, a folder holding ``results_<date>.json`` (the tasks' configs and
aggregate metrics, ``"acc,none"``: metric and filter) and one ``samples_<task>_<date>.jsonl`` per
task (one line per document and filter: ``doc_id``, ``target``, ``arguments``, ``resps``,
``filtered_resps``, the per-document metric values).  Read without lm-eval installed, through the
typed models below (lm-eval 0.4.13).  One run directory per task, filter and model; each document
is a question (``doc_id``), asked once.

What a record takes from a line (docs/import.md has the whole mapping):

- ``multiple_choice`` (log-likelihood): the request is the completion prompt ``arguments[i].arg_0``
  with the continuations ``arg_1`` (`` A`` .. `` D``), one request each; ``resps[i]`` gives each
  continuation's log-likelihood (kept as that continuation's summed log-probability, what the
  ``lm_eval_loglikelihood`` rule reads again) and the gold is the continuation ``target`` points
  to; lm-eval's answer is the continuation with the highest log-likelihood;
- ``generate_until``: the prompt with ``until`` (``inference.stop``) and ``max_gen_toks``
  (``inference.max_tokens``) where the line states them; ``resps[0][0]`` is the raw output,
  ``filtered_resps[0]`` lm-eval's answer;
- the per-document value of the task's first metric is lm-eval's score; the other metrics the
  results file reports for the same filter (``acc_norm``) are checked as the mean of theirs.

lm-eval does not log why a generation ended: ``finish_reason`` stays unknown, so a generation cut
at ``max_gen_toks`` cannot be told from a complete one (no record is marked ``truncated``); a generation
task's run says so (``source.not_recorded``: ``runs.run_meta.not_recorded``), which ``show``, ``diagnose`` and
``audit`` read, so its truncation reads "not recorded by lm-eval", never 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from pytest_benchaudit.importers.common import ImportedRun, ImportSourceError
from pytest_benchaudit.importers.imported_runs import HarnessTask, ImportedSample, ImportOptions, import_task
from pytest_benchaudit.importers.log_samples import LogImporter
from pytest_benchaudit.importers.peer_match import candidates
from pytest_benchaudit.pipeline.record_documents import ContinuationRow

__all__ = ["LM_EVAL", "LmEvalImporter"]

_RESULTS = re.compile(r"^results_(?P<date>.+)\.json$")
_KNOWN_TYPES = ("multiple_choice", "generate_until")
# A generation request's parameter (as _generation_params names it) -> (card field, lm-eval's argument name)
_STATED_PARAMS = {
    "stop": ("inference.stop", "until"),
    "max_tokens": ("inference.max_tokens", "max_gen_toks"),
    "temperature": ("inference.decoding.temperature", "temperature"),
}


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TaskConfig(_Read):
    task: str
    output_type: str = "generate_until"
    num_fewshot: int | None = None
    metric_list: list[dict[str, JsonValue]] = Field(default_factory=list)
    generation_kwargs: dict[str, JsonValue] | None = None


class ResultsFile(_Read):
    """``results_<date>.json``."""

    results: dict[str, dict[str, JsonValue]]
    configs: dict[str, TaskConfig] = Field(default_factory=dict)
    n_samples: dict[str, dict[str, int]] = Field(default_factory=dict, alias="n-samples")
    config: dict[str, JsonValue] = Field(default_factory=dict)
    lm_eval_version: str | None = None
    model_name: str | None = None


class SampleLine(_Read):
    """One line of ``samples_<task>_<date>.jsonl``: a document under one filter (the per-document
    metric values are its other keys, kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    doc_id: int
    target: JsonValue = None
    arguments: dict[str, dict[str, JsonValue]] | list[list[JsonValue]]
    resps: list[JsonValue] = Field(default_factory=list)
    filtered_resps: list[JsonValue] = Field(default_factory=list)
    filter: str = "none"
    metrics: list[str] = Field(default_factory=list)


def _args(line: SampleLine) -> list[tuple[str, JsonValue]]:
    """``(context, second argument)`` of each request of the line, in order."""
    if isinstance(line.arguments, dict):
        return [(str(a.get("arg_0", "")), a.get("arg_1")) for a in line.arguments.values()]
    return [(str(a[0]), a[1] if len(a) > 1 else None) for a in line.arguments]


def _number(value: JsonValue) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, (bool, dict, list)) else None
    except (TypeError, ValueError):
        return None


def _generation_params(arg: JsonValue) -> dict[str, JsonValue]:
    params: dict[str, JsonValue] = {}
    if isinstance(arg, dict):
        if arg.get("until") is not None:
            params["stop"] = arg["until"]
        if arg.get("max_gen_toks") is not None:
            params["max_tokens"] = arg["max_gen_toks"]
        if arg.get("temperature") is not None:
            params["temperature"] = arg["temperature"]
    return params


class _TaskFile:
    """One task x filter of one results file: its header and its samples file."""

    def __init__(
        self,
        results_path: Path,
        results: ResultsFile,
        task: str,
        samples: Path,
        filter_: str,
        metric: str,
        reported: float,
        others: dict[str, float],
    ) -> None:
        self.results_path, self.results, self.task, self.samples_path = results_path, results, task, samples
        self.filter, self.metric, self.reported, self.others = filter_, metric, reported, others
        self.config = results.configs.get(task) or TaskConfig(task=task)

    def lines(self) -> Iterator[tuple[str, SampleLine]]:
        with open(self.samples_path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                where = f"{self.samples_path}:{number}"
                if not raw.strip():
                    continue
                try:
                    line = SampleLine.model_validate_json(raw)
                except ValidationError as err:
                    first = err.errors()[0]
                    raise ImportSourceError(
                        f"{where}: not an lm-eval sample line: {'.'.join(map(str, first['loc']))}: {first['msg']}"
                    ) from None
                if line.filter == self.filter:
                    yield where, line

    def samples(self) -> Iterator[ImportedSample]:
        kind = self.config.output_type
        for where, line in self.lines():
            yield (_choice_sample if kind == "multiple_choice" else _generated_sample)(line, where, self)


def _choice_sample(line: SampleLine, where: str, task: _TaskFile) -> ImportedSample:
    args = _args(line)
    context = args[0][0] if args else ""
    conts: list[str] = [str(a[1]) for a in args]
    lls: list[float | None] = []
    for resp in line.resps:
        first = resp[0] if isinstance(resp, list) and resp else resp
        lls.append(_number(first[0] if isinstance(first, list) and first else first))
    rows: list[ContinuationRow] = [
        {
            "continuation": c,
            "tokens": [],
            "logprobs": [] if ll is None else [ll],
            "missing": None if ll is not None else "lm-eval logged no log-likelihood",
        }
        for c, ll in zip(conts, lls)
    ]
    target = _number(line.target)
    gold = conts[int(target)].strip() if target is not None and 0 <= int(target) < len(conts) else str(line.target)
    known = [(ll, i) for i, ll in enumerate(lls) if ll is not None]
    answer = conts[max(known, key=lambda p: (p[0], -p[1]))[1]].strip() if known else None
    value = _number(line.model_extra.get(task.metric) if line.model_extra else None)
    return ImportedSample(
        sample_id=str(line.doc_id),
        epoch=1,
        target=gold,
        request={"mode": "completion", "prompt": context, "continuations": list[JsonValue](conts), "params": {}},
        peer_answer=answer,
        peer_score=line.model_extra.get(task.metric) if line.model_extra else None,
        peer_value=value,
        continuations=rows,
        choices={c.strip(): c.strip() for c in conts},
        question_text=context,
        source_row=where,
        meta=_metric_values(line, task),
    )


def _generated_sample(line: SampleLine, where: str, task: _TaskFile) -> ImportedSample:
    args = _args(line)
    context, second = args[0] if args else ("", None)
    first = line.resps[0] if line.resps else None
    output = first[0] if isinstance(first, list) and first else first
    answer = line.filtered_resps[0] if line.filtered_resps else None
    extra = line.model_extra or {}
    return ImportedSample(
        sample_id=str(line.doc_id),
        epoch=1,
        target=str(line.target),
        request={"mode": "completion", "prompt": context, "params": _generation_params(second)},
        output=str(output) if output is not None else "",
        peer_answer=None if answer is None else str(answer),
        peer_score=extra.get(task.metric),
        peer_value=_number(extra.get(task.metric)),
        question_text=context,
        source_row=where,
        meta=_metric_values(line, task),
    )


def _metric_values(line: SampleLine, task: _TaskFile) -> dict[str, JsonValue]:
    extra = line.model_extra or {}
    return {name: extra.get(name) for name in task.others}


def _results_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if path.is_file() and _RESULTS.match(path.name):
            out.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("results_*.json") if _RESULTS.match(p.name))
            if not found:
                raise ImportSourceError(
                    f"{path}: no lm-eval results_*.json here (expected what "
                    "`lm_eval --output_path DIR --log_samples` writes)"
                )
            out += found
        else:
            raise ImportSourceError(f"{path}: not an lm-eval results file or folder")
    return out


def _read_results(path: Path) -> ResultsFile:
    try:
        return ResultsFile.model_validate(orjson.loads(path.read_bytes()))
    except (orjson.JSONDecodeError, ValidationError) as err:
        raise ImportSourceError(f"{path}: not an lm-eval results file: {str(err).splitlines()[0]}") from None


def _tasks(path: Path, results: ResultsFile) -> list[_TaskFile]:
    date = _RESULTS.match(path.name).group("date")  # type: ignore[union-attr]  # _results_files matched it
    out: list[_TaskFile] = []
    for task, values in results.results.items():
        config = results.configs.get(task)
        if config is None:
            continue  # a group's aggregate: its subtasks are imported
        samples = path.parent / f"samples_{task}_{date}.jsonl"
        if not samples.is_file():
            raise ImportSourceError(
                f"{path}: task {task!r} has no {samples.name} beside it: the run was made without "
                "--log_samples, so there are no per-sample outputs to import"
            )
        if config.output_type not in _KNOWN_TYPES:
            raise ImportSourceError(
                f"{samples}: output_type {config.output_type!r} is not one this importer reads "
                f"({', '.join(_KNOWN_TYPES)})"
            )
        first_metric = str((config.metric_list[0] if config.metric_list else {}).get("metric", "acc"))
        by_filter: dict[str, dict[str, float]] = {}
        for key, value in values.items():
            metric, sep, filter_ = key.partition(",")
            number = _number(value)
            if sep and not metric.endswith("_stderr") and number is not None:
                by_filter.setdefault(filter_, {})[metric] = number
        for filter_, metrics in by_filter.items():
            if first_metric not in metrics:
                continue
            others = {m: v for m, v in metrics.items() if m != first_metric}
            out.append(_TaskFile(path, results, task, samples, filter_, first_metric, metrics[first_metric], others))
    return out


def _model(results: ResultsFile) -> str:
    """The model as lm-eval was told it (``model_args.model``), else its ``model_name``."""
    args = results.config.get("model_args")
    if isinstance(args, dict) and args.get("model"):
        return str(args["model"])
    return results.model_name or "model"


def _harness_task(tf: _TaskFile) -> HarnessTask:
    results, config = tf.results, tf.config
    model = _model(results)
    name = tf.task if tf.filter == "none" else f"{tf.task}|{tf.filter}"
    first_line = next((line for _where, line in tf.lines()), None)
    if first_line is None:
        raise ImportSourceError(f"{tf.samples_path}: no sample lines for filter {tf.filter!r}: nothing to import")
    args = _args(first_line)
    loglikelihood = config.output_type == "multiple_choice"
    stated: dict[str, Any] = {
        "prompt.format.mode": ("completion", f"configs.{tf.task}.output_type {config.output_type} (prompt strings)"),
        "scoring.metric": (f"lm_eval:{tf.metric}", f"results.{tf.task}['{tf.metric},{tf.filter}']"),
        "scoring.denominator": ("total", f"n-samples.{tf.task}.effective: every document counts"),
        "dataset.source": (tf.task, "the task name"),
    }
    if loglikelihood:
        stated["inference.request"] = ("loglikelihood", f"configs.{tf.task}.output_type multiple_choice")
    else:
        for key, value in _generation_params(args[0][1] if args else None).items():
            field, logged = _STATED_PARAMS[key]
            stated[field] = (value, f"arguments[0].arg_1.{logged}")
    if config.num_fewshot is not None:
        stated["prompt.format.few_shot"] = (config.num_fewshot, f"configs.{tf.task}.num_fewshot")
    stated_params = tuple(f"params.{k}" for k in _generation_params(args[0][1] if args else None))
    n = (results.n_samples.get(tf.task) or {}).get("effective")
    return HarnessTask(
        harness="lm-eval",
        harness_version=results.lm_eval_version or "unknown",
        task=name,
        model=model,
        files=[tf.results_path, tf.samples_path],
        metric=tf.metric,
        reported=tf.reported,
        reported_n=n,
        stated=stated,
        candidates=candidates("lm-eval", tf.task) if tf.filter in ("none", "get_response") else [],
        compared=("prompt", "continuations", *stated_params),
        benchmark="lm_eval",
        notes=[
            f"Imported from lm-eval {results.lm_eval_version}: {tf.task}, filter {tf.filter}, "
            f"{config.output_type}; lm-eval does not log why a generation ended (finish_reason unknown)."
        ],
        other_metrics=tf.others,
        # A generation cut at max_gen_toks looks like one that ended: truncation is not recorded, not 0.
        not_recorded={} if loglikelihood else {"finish_reason": "not recorded by lm-eval"},
    )


class LmEvalImporter(LogImporter):
    """The ``lm-eval`` importer: ``--output_path`` folders (``results_*.json`` + ``samples_*.jsonl``)."""

    name = "lm-eval"
    help = "lm-eval --output_path folders written with --log_samples (results_*.json, samples_*.jsonl)"

    def detect(self, path: Path) -> bool:
        if path.is_file():
            return bool(_RESULTS.match(path.name))
        return path.is_dir() and any(_RESULTS.match(p.name) for p in path.rglob("results_*.json"))

    def import_logs(self, paths: list[Path], options: ImportOptions) -> list[ImportedRun]:
        files = _results_files(paths)
        tasks: list[_TaskFile] = []
        seen: dict[tuple[str, str, str], Path] = {}
        for path in files:
            results = _read_results(path)
            for tf in _tasks(path, results):
                ht_model = _model(results)
                key = (tf.task, tf.filter, ht_model)
                if key in seen:
                    raise ImportSourceError(
                        f"{path} and {seen[key]} both hold task {tf.task!r} for model {ht_model!r}: "
                        "import one of them (one run directory per task and model)"
                    )
                seen[key] = path
                tasks.append(tf)
        return [import_task(_harness_task(tf), tf.samples, options) for tf in tasks]


LM_EVAL = LmEvalImporter()
