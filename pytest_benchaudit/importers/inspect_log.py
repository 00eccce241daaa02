"""``benchaudit import inspect LOG_OR_DIR...``: Inspect eval logs (``.eval`` and ``.json``) as run directories.

One run directory per (task, model) (:func:`pytest_benchaudit.importers.imported_runs.import_task`);
each epoch is a repeat, each sample a question.  Read without inspect_ai, through
:mod:`.inspect_records` (log format version 2, inspect_ai 0.3.140 to 0.3.285) and, for ``.eval``
archives, :mod:`.eval_archive` (one sample entry in memory at a time).

What each record takes from a sample (docs/import.md has the whole mapping):

- the request as sent: the first model event's ``call.request`` (the body given to the provider:
  messages and generation parameters), attachments and ``events_data`` references resolved; without
  a call, the event's ``input`` messages and its ``config``;
- ``output.completion`` (the raw output), ``output.choices[0].stop_reason`` (``max_tokens`` and
  ``model_length`` are ``finish_reason`` ``length``: truncated), ``output.usage``;
- ``error.message``: an errored sample, an ``inference_error`` that Inspect's metrics leave out;
- the headline scorer's ``answer`` and ``value`` (``C``/``I``/``P``/``N`` read as 1 / 0 / 0.5 / 0,
  as Inspect's ``value_to_float``): the harness's own answer and score.

The headline is the first scorer's first metric (Inspect's own headline), over
``scored_samples``, epochs reduced by ``epochs_reducer``; ``reductions.json`` gives each sample's
reduced value, which names the first sample that differs on a mismatch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import JsonValue, ValidationError

from pytest_benchaudit.importers.common import ImportedRun, ImportSourceError
from pytest_benchaudit.importers.eval_archive import EvalArchive, is_zip
from pytest_benchaudit.importers.imported_runs import HarnessTask, ImportedSample, ImportOptions, import_task
from pytest_benchaudit.importers.inspect_records import KNOWN_VERSION, InspectHeader, InspectSample, ModelEvent, resolve
from pytest_benchaudit.importers.log_samples import LogImporter
from pytest_benchaudit.importers.peer_match import candidates
from pytest_benchaudit.importers.sample_feed import feed

__all__ = ["INSPECT", "InspectImporter", "read_header"]

_VALUES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # inspect_ai/scorer/_metric.py value_to_float
_LENGTH_STOPS = {"max_tokens", "model_length"}
# GenerateConfig / request body key -> card field
_PARAMS = {
    "temperature": "inference.decoding.temperature",
    "top_p": "inference.decoding.top_p",
    "seed": "inference.decoding.seed",
    "max_tokens": "inference.max_tokens",
    "max_completion_tokens": "inference.max_tokens",
    "stop": "inference.stop",
    "stop_seqs": "inference.stop",
}
_NOT_SENT = {
    "model",
    "messages",
    "tools",
    "tool_choice",
    "extra_headers",
    "extra_body",
    "extra_query",
    "stream",
    "stream_options",
    "timeout",
}


def _value(value: JsonValue) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return _VALUES.get(value.upper())
    return None


def _validate(model: type[Any], data: bytes, where: str) -> Any:
    try:
        return model.model_validate_json(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ImportSourceError(f"{where}: not an Inspect log entry as documented: {loc}: {first['msg']}") from None


def read_header(path: Path) -> InspectHeader:
    """The log's header (spec, plan, results, status), checked for what an import needs."""
    if path.suffix == ".eval" or is_zip(path):
        with EvalArchive(path) as archive:
            name = "header.json" if archive.has("header.json") else "_journal/start.json"
            if not archive.has(name):
                raise ImportSourceError(f"{path}: no header.json in the archive: not an Inspect log")
            header: InspectHeader = _validate(InspectHeader, _with_status(archive.read(name), name), f"{path}: {name}")
    else:
        header = _validate(InspectHeader, path.read_bytes(), str(path))
    if header.version > KNOWN_VERSION:
        raise ImportSourceError(
            f"{path}: Inspect log format version {header.version} is newer than this reader "
            f"knows ({KNOWN_VERSION}); update pytest-benchaudit"
        )
    if header.status != "success":
        why = f" ({header.error.message.splitlines()[0]})" if header.error and header.error.message else ""
        raise ImportSourceError(
            f"{path}: the eval's status is {header.status!r}{why}, not 'success': its results "
            "are not final, so there is no reported metric to check the import against"
        )
    return header


def _with_status(data: bytes, name: str) -> bytes:
    """``_journal/start.json`` of a log that never finished has no status: it is still ``started``."""
    if name == "header.json":
        return data
    obj = orjson.loads(data)
    obj.setdefault("status", "started")
    return orjson.dumps(obj)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return ""


def _request(event: ModelEvent, sample: InspectSample) -> dict[str, JsonValue]:
    """The request the event sent, in a record's shape: ``{"mode": "chat", "messages", "params"}``."""
    pool = sample.events_data
    if event.call is not None:
        body = dict(event.call.request)
        if event.call.call_refs is not None and pool is not None:
            body[event.call.call_key or "messages"] = [
                m for start, end in event.call.call_refs for m in pool.calls[start:end]
            ]
        body = resolve(body, sample.attachments)
        messages: list[JsonValue] = [
            {"role": str(m.get("role")), "content": _message_text(m.get("content"))}
            for m in body.get("messages") or []
            if isinstance(m, dict)
        ]
        params = {k: v for k, v in body.items() if k not in _NOT_SENT and v is not None}
        return {"mode": "chat", "messages": messages, "params": params}
    inputs = list(event.input)
    if event.input_refs is not None and pool is not None:
        inputs = [m for start, end in event.input_refs for m in pool.messages[start:end]]
    sent: list[JsonValue] = [
        {"role": m.role, "content": _message_text(resolve(m.content, sample.attachments))} for m in inputs
    ]
    params = {k: v for k, v in event.config.items() if v is not None}
    return {"mode": "chat", "messages": sent, "params": params}


class _LogFile:
    """One log: its header and a way to stream its samples (again, after a near miss)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.header = read_header(path)
        self.archive = path.suffix == ".eval" or is_zip(path)

    def raw_samples(self) -> Iterator[tuple[str, bytes]]:
        if self.archive:
            with EvalArchive(self.path) as archive:
                yield from archive.iter_entries("samples/")
            return
        data = orjson.loads(self.path.read_bytes())
        for i, sample in enumerate(data.get("samples") or []):
            yield f"samples[{i}]", orjson.dumps(sample)

    def reductions(self) -> dict[str, float]:
        if not self.archive:
            data = orjson.loads(self.path.read_bytes()).get("reductions") or []
        else:
            with EvalArchive(self.path) as archive:
                data = orjson.loads(archive.read("reductions.json")) if archive.has("reductions.json") else []
        scorer = self._scorer()
        out: dict[str, float] = {}
        for block in data:
            if block.get("scorer") == scorer:
                for s in block.get("samples") or []:
                    value = _value(s.get("value"))
                    if value is not None:
                        out[str(s.get("sample_id"))] = value
        return out

    def _scorer(self) -> str | None:
        results = self.header.results
        return results.scores[0].name if results and results.scores else None

    def samples(self) -> Iterator[ImportedSample]:
        """The samples, read on the second core for a large archive (:mod:`.sample_feed`)."""
        expected = 0
        if self.archive:
            with EvalArchive(self.path) as archive:
                expected = sum(1 for name in archive.names() if name.startswith("samples/"))
        for sample in feed(self._read_samples, expected):
            assert isinstance(sample, ImportedSample)
            yield sample

    def _read_samples(self) -> Iterator[ImportedSample]:
        scorer = self._scorer()
        for name, data in self.raw_samples():
            where = f"{self.path}: {name}"
            try:
                sample = InspectSample.from_json(data)
            except ValidationError as err:
                first = err.errors()[0]
                raise ImportSourceError(
                    f"{where}: not an Inspect sample as documented: "
                    f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
                ) from None
            except ValueError as err:
                raise ImportSourceError(f"{where}: not an Inspect sample (not a JSON object: {err})") from None
            yield _imported(sample, scorer, where)


def _imported(sample: InspectSample, scorer: str | None, where: str) -> ImportedSample:
    if sample.model_event is not None:
        request = _request(sample.model_event, sample)
    else:  # no model call logged (an error before generate): the sample's own messages
        request = {
            "mode": "chat",
            "params": {},
            "messages": [
                {"role": str(m.get("role")), "content": _message_text(resolve(m.get("content"), sample.attachments))}
                for m in sample.messages
                if isinstance(m, dict) and m.get("role") != "assistant"
            ],
        }
    output = sample.output
    stop = output.choices[0].stop_reason if output.choices else None
    finish = "length" if stop in _LENGTH_STOPS else stop
    usage: dict[str, JsonValue] = {}
    if output.usage is not None:
        usage = {
            "prompt_tokens": output.usage.input_tokens,
            "completion_tokens": output.usage.output_tokens,
            "total_tokens": output.usage.total_tokens,
        }
    score = (sample.scores or {}).get(scorer or "") if scorer else None
    error = sample.error.message.splitlines()[0] if sample.error is not None else None
    target = sample.target if isinstance(sample.target, str) else ",".join(sample.target)
    labels = [chr(ord("A") + i) for i in range(len(sample.choices or []))]
    return ImportedSample(
        sample_id=str(sample.id),
        epoch=sample.epoch,
        target=target,
        request=request,
        output=output.completion,
        finish_reason=finish,
        error=error,
        usage=usage,
        peer_answer=score.answer if score is not None else None,
        peer_score=score.value if score is not None else None,
        peer_value=None if score is None or error is not None else _value(score.value),
        choices=dict(zip(labels, sample.choices or [])),
        question_text=_input_text(sample.input),
        source_row=where,
        served_model=output.model,
    )


def _input_text(value: Any) -> str:
    """A sample's ``input``: its text, or the last message's text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return _message_text(value[-1].get("content"))
    return ""


def _task(log: _LogFile) -> HarnessTask:
    header, path = log.header, log.path
    spec = header.eval
    results = header.results
    if results is None or not results.scores:
        raise ImportSourceError(
            f"{path}: the log has no scores (results.scores is empty): nothing to check the import against"
        )
    score = results.scores[0]
    if not score.metrics:
        raise ImportSourceError(f"{path}: scorer {score.name!r} reports no metric")
    metric_name, metric = next(iter(score.metrics.items()))
    reducers = spec.config.epochs_reducer or ["mean"]
    epochs = spec.config.epochs or 1
    stated: dict[str, tuple[JsonValue, str]] = {
        "prompt.format.mode": ("chat", "eval.model (a chat model API: every model call sends messages)"),
        "scoring.metric": (
            f"inspect:{score.name}/{metric_name}",
            f"results.scores[0] ({score.name}), metric {metric_name}",
        ),
        "scoring.denominator": (
            "valid",
            "results.scores[0].scored_samples: Inspect's metrics leave out the samples that errored",
        ),
        "inference.repeats": (epochs, "eval.config.epochs"),
        "aggregation.reducer": (
            {"mean": "mean", "max": "any"}.get(reducers[0], "mean"),
            f"eval.config.epochs_reducer {reducers}",
        ),
        "dataset.source": (spec.dataset.name or spec.task, "eval.dataset.name"),
    }
    config = {**header.plan.config, **spec.model_generate_config}
    for key, value in config.items():
        if key in _PARAMS and value is not None:
            stated[_PARAMS[key]] = (
                list(value) if isinstance(value, list) else value,
                f"plan.config / eval.model_generate_config.{key}",
            )
    notes = [
        f"Imported from {path.name}: inspect_ai {spec.packages.get('inspect_ai', '?')}, task {spec.task}, "
        f"{results.total_samples} samples x epochs, {score.scored_samples} scored."
    ]
    if reducers[0] not in ("mean", "max"):
        notes.append(
            f"epochs_reducer {reducers[0]!r} has no benchaudit reducer: the headline check uses it, "
            "the summary's reducer is the mean"
        )
    subject = str(spec.task_args.get("subjects", ""))
    return HarnessTask(
        harness="inspect",
        harness_version=spec.packages.get("inspect_ai", "unknown"),
        task=spec.task,
        model=spec.model,
        files=[path],
        metric=metric_name,
        reported=metric.value,
        reported_n=score.scored_samples,
        reducer=reducers[0],
        stated=stated,
        candidates=candidates("inspect", spec.task, subject),
        compared=("messages", "params"),
        benchmark="inspect",
        notes=notes,
        reduced=log.reductions(),
        dataset_questions=spec.dataset.samples,
    )


def _log_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.suffix in (".eval", ".json") and p.is_file() and not p.name.startswith(("logs.json", "."))
            )
            if not found:
                raise ImportSourceError(f"{path}: no Inspect logs (*.eval, *.json) in this folder")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise ImportSourceError(f"{path}: no such file or folder")
    return out


class InspectImporter(LogImporter):
    """The ``inspect`` importer: ``.eval`` archives and ``.json`` logs, or folders of them."""

    name = "inspect"
    help = "Inspect eval logs (.eval archives or .json), or folders of them"

    def detect(self, path: Path) -> bool:
        """True for an ``.eval`` archive, a ``.json`` Inspect log, or a folder holding ``.eval`` files."""
        if path.is_dir():
            return any(path.glob("*.eval"))
        if path.suffix == ".eval":
            return True
        if path.suffix == ".json":
            with open(path, "rb") as handle:
                head = handle.read(4096)
            return b'"eval"' in head and b'"version"' in head and b'"plan"' in head
        return False

    def import_logs(self, paths: list[Path], options: ImportOptions) -> list[ImportedRun]:
        logs = [_LogFile(p) for p in _log_files(paths)]
        by_pair: dict[tuple[str, str], _LogFile] = {}
        for log in logs:
            pair = (log.header.eval.task, log.header.eval.model)
            if pair in by_pair:
                raise ImportSourceError(
                    f"{log.path} and {by_pair[pair].path} are both logs of task {pair[0]!r} with "
                    f"model {pair[1]!r}: import one of them (one run directory per task and model)"
                )
            by_pair[pair] = log
        return [import_task(_task(log), log.samples, options) for log in logs]


INSPECT = InspectImporter()
