"""``--resume RUN_DIR``: which records a run already holds, and which items it then does not ask again.

A record is identified by :func:`record_key` (benchmark, task, question id, model, variant,
repeat); an item writes :func:`item_keys`.  In a serial run the controller deselects the items
whose every key is recorded (:func:`deselect_recorded`); under xdist the controller does not
collect, so it hands the keys to each worker (``workerinput[RESUME_KEYS]``) and the worker's
:class:`ResumeFilter` deselects the same items.  :func:`recorded_repeats` tells the runner
which repeats of an item are recorded (it asks the others; its verdict counts them too).
Before the records are read, :func:`drop_not_asked` removes the placeholders of questions a
dead endpoint never got; :func:`check_same_invocation` refuses a resume with other options.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pytest
from typing_extensions import TypedDict

from pytest_benchaudit.common.safe_text import printable
from pytest_benchaudit.common.secrets import redact
from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.pytest_plugin.options import RunOptions
from pytest_benchaudit.pytest_plugin.prerun_checks import RESUME_RUN, ResumeRun, resume_mismatch
from pytest_benchaudit.pytest_plugin.runmeta import redact_json
from pytest_benchaudit.runs.run_meta import RunMeta

__all__ = [
    "RECORDED",
    "RESUME_CORRECT",
    "RESUME_KEYS",
    "RecordKey",
    "ResumeFilter",
    "ResumeWarning",
    "check_same_collection",
    "check_same_invocation",
    "deselect_recorded",
    "drop_not_asked",
    "item_key",
    "item_keys",
    "not_asked",
    "record_key",
    "recorded_repeats",
    "resume_command",
    "resume_workerinput",
    "write_stopped",
]

RESUME_KEYS: Final = (
    "benchaudit_resume_keys"  # workerinput key: the (benchmark, task, question_id, model, variant, repeat) recorded
)
RESUME_CORRECT: Final = (
    "benchaudit_resume_correct"  # workerinput key: of those, the correct ones (a run with repeats only)
)

RecordKey = tuple[str, str, str, str, str, str]
# What a resumed run recorded, for the runner (the repeats an item still asks, and their verdicts):
# (the keys recorded, those of them correct).
RECORDED = pytest.StashKey[tuple[set[RecordKey], set[RecordKey]]]()


class ResumeWarning(UserWarning):
    """Something about the run directory given to --resume that the run worked around."""


def record_key(record: RecordRow) -> RecordKey:
    """What identifies a record within a run: benchmark, task, question id, model, variant, repeat
    (a record from before repeats is repeat 0)."""
    return (
        str(record.get("benchmark")),
        str(record.get("task")),
        str(record.get("question_id")),
        str(record.get("model")),
        str(record.get("variant") or ""),
        str(record.get("repeat") or 0),
    )


def item_key(item: pytest.Item) -> RecordKey | None:
    """The record key an item would write first (repeat 0; ``None`` for anything that is not a benchmark item)."""
    keys = item_keys(item)
    return keys[0] if keys else None


def item_keys(item: pytest.Item) -> list[RecordKey]:
    """The record keys an item writes: one per repeat of its pipeline's ``inference.repeats``."""
    bench = getattr(item, "bench", None)
    if bench is None:
        return []
    from pytest_benchaudit.pytest_plugin.repeat_items import repeats_of

    q = bench.question
    stem = (str(q.benchmark), str(q.task), str(q.id), str(bench.model.label), str(bench.variant or ""))
    return [(*stem, str(k)) for k in range(repeats_of(bench.pipeline))]


def recorded_repeats(config: pytest.Config, item: pytest.Item) -> dict[int, bool]:
    """The repeats of ``item`` a resumed run recorded (repeat -> whether it was correct): the item
    asks only the others, and its verdict counts these too."""
    recorded, correct = config.stash.get(RECORDED, (set(), set()))
    if not recorded:
        return {}
    return {k: key in correct for k, key in enumerate(item_keys(item)) if key in recorded}


def deselect_recorded(config: pytest.Config, items: list[pytest.Item], recorded: set[RecordKey]) -> int:
    """Remove the items whose record is already there; report them as deselected."""
    if not recorded:
        return 0
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:  # an item whose every repeat is recorded (one, as a rule)
        keys = item_keys(item)
        (drop if keys and all(k in recorded for k in keys) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    return len(drop)


class ResumeFilter:
    """xdist worker side of ``--resume``: deselect the items the controller says are recorded.

    Registered on workers only (the controller deselects in a serial run); the keys
    come from ``workerinput``, so every worker drops the same items and their
    collections still agree.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keys = getattr(config, "workerinput", {}).get(RESUME_KEYS)
        if keys:
            recorded: set[RecordKey] = {tuple(k) for k in keys}
            correct: set[RecordKey] = {tuple(k) for k in getattr(config, "workerinput", {}).get(RESUME_CORRECT) or ()}
            config.stash[RECORDED] = (recorded, correct)
            deselect_recorded(config, items, recorded)


def not_asked(record: RecordRow) -> bool:
    """A placeholder record of a question the circuit breaker never sent (``--resume`` asks it)."""
    return record.get("invalid_reason") == "endpoint_down"


def drop_not_asked(path: Path) -> None:
    """Rewrite ``path/records.jsonl`` without its ``endpoint_down`` placeholders (atomically,
    other lines byte for byte), so that ``--resume`` asks those questions and each key keeps
    one record.  A line that does not parse is kept for :meth:`RunDirectory.reopen` to judge."""
    import os

    records = path / "records.jsonl"
    if not records.is_file():
        return
    marker = b'"invalid_reason":"endpoint_down"'
    with records.open("rb") as fh:  # line by line: a paper-scale records.jsonl is hundreds of MiB
        if not any(marker in line.replace(b" ", b"") for line in fh):
            return
    import orjson

    tmp = records.with_name("records.jsonl.resume-tmp")
    with records.open("rb") as src, tmp.open("wb") as fh:
        for line in src:
            try:
                if not_asked(orjson.loads(line)):
                    continue
            except orjson.JSONDecodeError:
                pass
            fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, records)


def check_same_invocation(path: Any, meta: RunMeta, opts: RunOptions) -> None:
    """A resumed run must ask with the same pipeline, layers, ``--set``, models, ``--limit`` and ``--vary``
    as the run in ``path`` (its run.json ``meta``), or its summary would mix two: a usage error naming which."""
    if "pipeline" in meta and meta["pipeline"] != opts.pipeline:
        raise pytest.UsageError(
            f"--resume {path}: the run used --pipeline {meta['pipeline']}, "
            f"not {opts.pipeline}; resume it with the same pipeline"
        )
    if (meta.get("pipelines") or []) != opts.pipelines:  # a --pipelines run resumes with the same list
        was, now = (",".join(p or []) or "(none)" for p in (meta.get("pipelines"), opts.pipelines))
        raise pytest.UsageError(
            f"--resume {path}: the run used --pipelines {was}, this invocation {now}; resume it with the same layers"
        )
    if "overrides" in meta:
        now = redact_json({k: v for k, v in opts.overrides})
        if meta["overrides"] != now:
            raise pytest.UsageError(
                f"--resume {path}: {_override_difference(meta['overrides'], now, opts)}; resume "
                "it with the same options"
            )
    stored_models = [str(m["spec"]) for m in meta.get("models") or [] if m.get("spec")]
    models = [m.label for m in opts.models]
    if stored_models and sorted(stored_models) != sorted(models):
        raise pytest.UsageError(
            f"--resume {path}: the run used --model {', '.join(stored_models)}, this "
            f"invocation {', '.join(models)}; resume it with the same models"
        )
    stored: list[tuple[str, bool, object, object]] = [
        ("--limit", "limit" in meta, meta.get("limit"), opts.limit),
        ("--vary", "vary" in meta, meta.get("vary"), redact_json([[f, v] for f, v in opts.vary])),
    ]
    for option, given, then, now_value in stored:
        if given and then != now_value:
            raise pytest.UsageError(
                f"--resume {path}: the run used {option} {then}, this invocation "
                f"{now_value}; resume it with the same {option}"
            )


def _override_difference(then: Mapping[str, Any], now: Mapping[str, Any], opts: RunOptions) -> str:
    """Each field the run and this invocation set differently, naming the option as this invocation
    gave it (``--repeats 5``, not a ``--set inference.repeats`` never typed)."""
    parts = []
    for key in sorted(k for k in {*then, *now} if then.get(k, _UNSET) != now.get(k, _UNSET)):
        was = f"{then[key]!r}" if key in then else "nothing"
        given = opts.override_options.get(key) or (f"--set {key}={json.dumps(now[key])}" if key in now else None)
        parts.append(
            f"the run set {key} to {was}, this invocation "
            + (f"to {now[key]!r} ({given})" if given else "does not set it")
        )
    return "; ".join(parts)


_UNSET = object()


def resume_command(args: list[str], run_path: Path | str) -> str:
    """The command that continues the run in ``run_path``: ``pytest`` with ``args`` (its own arguments,
    secrets already masked), a ``--resume`` among them replaced by ``--resume run_path``."""
    import shlex

    kept: list[str] = []
    skip = False
    for arg in args:  # a resumed run's own --resume gives way to this one
        if skip:
            skip = False
        elif arg == "--resume":
            skip = True
        elif not arg.startswith("--resume="):
            kept.append(arg)
    command = shlex.join(["pytest", *kept, "--resume", str(run_path)])
    if "***" in command:  # a key or a URL's credentials, masked: the user gives them again
        command += "  # *** stands for a secret that was masked: put it back"
    return command


def check_same_collection(
    path: Any, resumed_from: RunMeta, cards: Mapping[str, PipelineCard], checksums: Mapping[str, str]
) -> None:
    """After collection (serial run): the same suites and tasks, pipelines and data files as the run in
    ``path`` (its run.json ``resumed_from``) — this collection's ``cards`` and ``checksums`` — or a usage error."""
    problem = resume_mismatch(
        resumed_from.get("pipeline_cards") or {}, resumed_from.get("dataset_checksums") or {}, cards, checksums
    )
    if problem:
        raise pytest.UsageError(f"--resume {path}: {problem}")


class ResumeWorkerInput(TypedDict, total=False):
    """What an xdist worker is handed of a resumed run (``workerinput``; see :func:`resume_workerinput`)."""

    benchaudit_resume_keys: list[list[str]]  # RESUME_KEYS
    benchaudit_resume_correct: list[list[str]]  # RESUME_CORRECT
    benchaudit_resume_run: ResumeRun  # RESUME_RUN


def resume_workerinput(
    recorded: set[RecordKey], correct: set[RecordKey], resumed_from: RunMeta | None, path: Any
) -> ResumeWorkerInput:
    """What each xdist worker is handed of a resumed run: the keys recorded (its :class:`ResumeFilter`
    deselects them), the correct ones where the run has repeats, and the run's cards and checksums
    (the worker checks its collection against them, ``checks.PreRunChecks``); empty otherwise."""
    out: ResumeWorkerInput = {}
    if recorded:
        out[RESUME_KEYS] = [list(k) for k in sorted(recorded)]
        if any(k[-1] != "0" for k in recorded):  # repeats: an item's verdict counts those recorded
            out[RESUME_CORRECT] = [list(k) for k in sorted(correct)]
    if resumed_from:  # (None, or {}: not a resumed run)
        out[RESUME_RUN] = {
            "path": str(path),
            "cards": resumed_from.get("pipeline_cards") or {},  # what resume_mismatch compares
            "checksums": resumed_from.get("dataset_checksums") or {},
        }
    return out


def write_stopped(terminalreporter: Any, stopped: str, records_kept: bool, command: str, status: int = 2) -> None:
    """An abnormal end on the terminal: why, what is kept, the exit status (``status``) and the command
    that continues it (``records_kept``: records.jsonl is still there; else the run must start again)."""
    if not records_kept:
        terminalreporter.write_line(
            printable(redact(f"STOPPED: {stopped}; the run directory is gone (run again); exit status {status}")),
            red=True,
            bold=True,
        )
        return
    terminalreporter.write_line(
        printable(
            redact(
                f"STOPPED: {stopped}; the records written before it are kept; exit status {status}. Continue it (asks "
                "only what is not recorded):"
            )
        ),
        red=True,
        bold=True,
    )
    terminalreporter.write_line(f"  {redact(command)}")
