"""The human-validation loop: a stratified, seeded sample for people to check, and what they said.

    benchaudit sample RUN... --for judge|gold --n 120 [--strata K,...] [--seed S] --out sample.csv
    (annotators fill verdict_1, verdict_2, ... : one column each)
    benchaudit judge-agreement --human sample.csv     judge accuracy against people, kappa between two
    benchaudit audit-gold --confirm sample.csv        confirmed label-error rate among the checked flags

Units: ``--for judge`` samples records that carry a judge verdict (``rec["judge"]``: an
extraction reading or a CORRECT/INCORRECT grade); ``--for gold`` samples the flags of
``audit-gold`` (questions where most models agree on one answer against the gold).

Sampling: units are grouped by the ``--strata`` keys; every stratum gets an equal share of
``n`` (capped at its size, what is left over goes to the strata that still have units), so
rare strata (fallback-parsed judge answers, judge vs regex disagreements, small tasks) are
over-represented: the sample is meant to find the judge's and the labels' failures, as the
paper's adversarial sample was, and its rates are rates *of this sample*.  Each row carries
its stratum and the stratum's size so a reweighted estimate can be made.  Inside a stratum
units are drawn with ``random.Random(f"{seed}:{stratum}")`` from a sorted list: the same
runs and seed give the same sample on any machine.

The CSV holds the question text and the model's response so that people can judge them: it
is a local working file.  Question text is never written by ``export`` or any report, and the
commands that read the filled file print counts and rates only.

The statistics of the filled file (:func:`human_judge_report`, :func:`gold_confirm_report`, and
:func:`cohen_kappa`, which ``judge-agreement`` shares) are in :mod:`.agreement`, re-exported here so
that ``judge_agreement``, ``gold_audit`` and the commands import one module.  Pure apart from
:func:`write_sample` and :func:`read_sample` (CSV files).
"""

from __future__ import annotations

import csv
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Required

from typing_extensions import TypedDict

from pytest_benchaudit.annotation.agreement import (
    GOLD_CONFIRM,
    GOLD_VERDICTS,
    HUMAN_JUDGE,
    KAPPA_METHOD,
    NOT_BENCHMARK_WIDE,
    AnnotatorRate,
    Between,
    GoldConfirmReport,
    HumanJudgeReport,
    KappaResult,
    Rate,
    SampleError,
    StratumRate,
    TaskRate,
    cohen_kappa,
    gold_confirm_report,
    human_judge_report,
    render_gold_confirm,
    render_human_judge,
    wilson,
)
from pytest_benchaudit.annotation.gold_audit import FlagRow
from pytest_benchaudit.common.errors import UsageError, did_you_mean
from pytest_benchaudit.pipeline.record_documents import RecordRow

__all__ = [
    "AnnotatorRate",
    "Between",
    "DEFAULT_STRATA",
    "GOLD_CONFIRM",
    "GOLD_VERDICTS",
    "GoldConfirmReport",
    "GoldUnit",
    "HUMAN_JUDGE",
    "HumanJudgeReport",
    "JudgeUnit",
    "KappaResult",
    "Rate",
    "SampleRow",
    "GOLD_STRATA",
    "JUDGE_STRATA",
    "KAPPA_METHOD",
    "LOCAL_NOTE",
    "NOT_BENCHMARK_WIDE",
    "SampleError",
    "StratumRate",
    "TaskRate",
    "allocate",
    "cohen_kappa",
    "gold_confirm_report",
    "gold_units",
    "human_judge_report",
    "judge_units",
    "read_sample",
    "render_gold_confirm",
    "render_human_judge",
    "stratified_sample",
    "verdict_columns",
    "wilson",
    "write_sample",
]

JUDGE_STRATA = ("benchmark", "task", "model", "purpose", "judge_label", "parse_status", "regex_disagrees")
GOLD_STRATA = ("benchmark", "task", "n_agreeing", "consensus_answer")
DEFAULT_STRATA = {"judge": ("task", "purpose", "parse_status", "regex_disagrees"), "gold": ("benchmark", "task")}
_COMMON = ["sample_for", "sample_id", "stratum", "stratum_size", "benchmark", "task", "question_id"]
COLUMNS = {
    "judge": [*_COMMON, "model", "purpose", "judge_label", "parse_status", "gold", "question", "response"],
    "gold": [*_COMMON, "gold", "consensus_answer", "n_agreeing", "n_models", "agreeing_models", "question"],
}
LOCAL_NOTE = (
    "holds question text (and, for a judge sample, model responses) for the annotators: keep it local; it is "
    "never exported, and judge-agreement --human and audit-gold --confirm print counts and rates only"
)


class JudgeUnit(TypedDict):
    """A record with a judge verdict, as a unit to sample (``--for judge``)."""

    benchmark: str
    task: str
    question_id: str
    model: str
    purpose: str
    judge_label: str
    parse_status: str
    regex_disagrees: str  # "true", "false", or "n/a" (no regex_prediction)
    gold: str
    question: str
    response: str


class GoldUnit(TypedDict):
    """An ``audit-gold`` flag (its CSV row, every value as text) with its question, as a unit (``--for gold``)."""

    benchmark: str
    task: str
    question_id: str
    gold: str
    consensus_answer: str
    n_agreeing: str
    agreeing_models: str
    n_models: str
    n_valid: str
    min_models: str
    question: str


class SampleRow(TypedDict, total=False):
    """A drawn row of the sample file: the unit's columns (a judge or a gold unit) and where it was drawn."""

    sample_id: Required[str]
    stratum: Required[str]
    stratum_size: Required[int]
    benchmark: Required[str]
    task: Required[str]
    question_id: Required[str]
    question: Required[str]
    gold: Required[str]
    # --for judge
    model: str
    purpose: str
    judge_label: str
    parse_status: str
    regex_disagrees: str
    response: str
    # --for gold
    consensus_answer: str
    n_agreeing: str
    agreeing_models: str
    n_models: str
    n_valid: str
    min_models: str


def prompt_text(rec: RecordRow) -> str:
    """The question as the model saw it: the last user message (chat) or the prompt (completion)."""
    req = rec.get("request") or {}
    if req.get("prompt"):
        return str(req["prompt"])
    messages = req.get("messages") or []
    users = [
        m.get("content", "")
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict) and m.get("role") == "user"
    ]
    return str(users[-1]) if users else ""


def judge_units(records: Iterable[RecordRow]) -> tuple[list[JudgeUnit], int]:
    """(units, n without a verdict): one unit per base record with a parsed judge verdict."""
    units: list[JudgeUnit] = []
    failed = 0
    for rec in records:
        judge = rec.get("judge")
        if rec.get("variant") or not isinstance(judge, dict):
            continue
        verdict = judge.get("verdict")
        if verdict is None:
            failed += 1  # no judge label to check against people
            continue
        purpose = str(judge.get("purpose", ""))
        label = str(verdict).strip().upper() if purpose == "grading" else str(verdict).strip()
        regex = rec.get("regex_prediction")
        disagrees = (
            "n/a"
            if "regex_prediction" not in rec
            else str(str(regex or "").strip().casefold() != label.casefold()).lower()
        )
        units.append(
            {
                "benchmark": str(rec["benchmark"]),
                "task": str(rec["task"]),
                "question_id": str(rec["question_id"]),
                "model": str(rec["model"]),
                "purpose": purpose,
                "judge_label": label,
                "parse_status": str(judge.get("parse_status", "")),
                "regex_disagrees": disagrees,
                "gold": str(rec.get("gold", "")),
                "question": prompt_text(rec),
                "response": str(rec.get("raw_output") or ""),
            }
        )
    return units, failed


def gold_units(flag_rows: Iterable[FlagRow], records: Iterable[RecordRow]) -> list[GoldUnit]:
    """One unit per ``audit-gold`` flag (its CSV row), with the question text from any record of it."""
    texts: dict[tuple[str, str, str], str] = {}
    for rec in records:
        key = (str(rec["benchmark"]), str(rec["task"]), str(rec["question_id"]))
        if key not in texts:
            texts[key] = prompt_text(rec)
    return [
        {
            "benchmark": str(row["benchmark"]),
            "task": str(row["task"]),
            "question_id": str(row["question_id"]),
            "gold": str(row["gold"]),
            "consensus_answer": str(row["consensus_answer"]),
            "n_agreeing": str(row["n_agreeing"]),
            "agreeing_models": str(row["agreeing_models"]),
            "n_models": str(row["n_models"]),
            "n_valid": str(row["n_valid"]),
            "min_models": str(row["min_models"]),
            "question": texts.get((str(row["benchmark"]), str(row["task"]), str(row["question_id"])), ""),
        }
        for row in flag_rows
    ]


def allocate(sizes: Mapping[tuple[str, ...], int], n: int) -> dict[tuple[str, ...], int]:
    """Equal shares of ``n`` per stratum, capped at each stratum's size, leftovers spread round-robin."""
    take = {s: 0 for s in sizes}
    left = min(n, sum(sizes.values()))
    while left:
        open_ = [s for s in sorted(sizes) if take[s] < sizes[s]]
        share = max(1, left // len(open_))
        for s in open_:
            add = min(share, sizes[s] - take[s], left)
            take[s] += add
            left -= add
            if not left:
                break
    return take


def stratified_sample(
    units: Sequence[JudgeUnit] | Sequence[GoldUnit],
    n: int,
    strata: Sequence[str],
    seed: int = 0,
    allowed: Sequence[str] = JUDGE_STRATA,
) -> list[SampleRow]:
    """``n`` units (all if fewer) over ``strata``; each row gains ``sample_id``, ``stratum``, ``stratum_size``."""
    if n < 1:
        raise SampleError(f"--n {n}: the sample needs at least one unit")
    unknown = [k for k in strata if k not in allowed]
    if unknown:
        raise SampleError(
            f"--strata: unknown key(s) {', '.join(unknown)}{did_you_mean(unknown[0], allowed)}; "
            f"allowed: {', '.join(allowed)}"
        )
    groups: dict[tuple[str, ...], list[JudgeUnit | GoldUnit]] = defaultdict(list)
    for unit in units:
        groups[tuple(str(unit.get(k, "")) for k in strata)].append(unit)
    take = allocate({s: len(v) for s, v in groups.items()}, n)
    out: list[SampleRow] = []
    for stratum in sorted(groups):
        pool = sorted(groups[stratum], key=lambda u: (u["benchmark"], u["task"], u["question_id"], u.get("model", "")))
        label = "|".join(f"{k}={v}" for k, v in zip(strata, stratum)) or "all"
        for unit in random.Random(f"{seed}:{label}").sample(pool, take[stratum]):
            out.append({**unit, "stratum": label, "stratum_size": len(pool), "sample_id": ""})
    for i, row in enumerate(out, 1):
        row["sample_id"] = f"s{i:04d}"
    return out


def verdict_columns(n_annotators: int) -> list[str]:
    return [f"verdict_{i}" for i in range(1, n_annotators + 1)]


def write_sample(rows: Sequence[SampleRow], kind: str, path: Path, n_annotators: int = 2) -> None:
    """The sample as CSV: the unit's columns, then one empty verdict column per annotator."""
    columns = [*COLUMNS[kind], *verdict_columns(n_annotators)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "sample_for": kind})


def read_sample(path: Path, kind: str) -> tuple[list[dict[str, str]], list[str]]:
    """(rows, verdict columns) of a filled sample file made with ``--for kind``; one clear error otherwise."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            columns = list(reader.fieldnames or [])
    except FileNotFoundError:
        raise SampleError(
            f"{path}: not found (make one with `benchaudit sample RUN... --for {kind} --out {path}`)"
        ) from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise SampleError(f"{path}: cannot be read as a sample CSV ({err})") from None
    missing = [c for c in ("sample_for", "sample_id", "benchmark", "task", "question_id") if c not in columns]
    if missing:
        raise SampleError(f"{path}: not a benchaudit sample (no column {', '.join(missing)})")
    kinds = {r.get("sample_for", "") for r in rows}
    if rows and kinds != {kind}:
        raise SampleError(
            f"{path}: a sample for {', '.join(sorted(kinds))}, not for {kind} "
            f"(use {'audit-gold --confirm' if kind == 'judge' else 'judge-agreement --human'})"
        )
    verdicts = [c for c in columns if c.startswith("verdict_")]
    if not verdicts:
        raise SampleError(f"{path}: no verdict_1, verdict_2, ... column for the annotators' verdicts")
    return rows, verdicts


def check_usage(kind: str, n: int, annotators: int) -> None:
    """Bad option values as one usage error."""
    if kind not in COLUMNS:
        raise UsageError(f"--for {kind!r}: choose judge or gold")
    if n < 1:
        raise UsageError(f"--n {n}: the sample needs at least one unit")
    if annotators < 1:
        raise UsageError(f"--annotators {annotators}: at least one verdict column is needed")
