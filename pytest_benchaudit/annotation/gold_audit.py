"""``benchaudit audit-gold``: questions where several models agree on the same wrong answer.

Over the runs of several models, a question is *flagged* when at least K models gave the
same valid prediction and that prediction differs from the gold answer.  Such a consensus
is a hint that the gold label (or the question) may be wrong or ambiguous; it is a
candidate for manual review, never a verdict.  The command therefore prints the number
of flags per task and writes them to a CSV for review; from the runs alone it does not
print, and this module does not compute, any "label error rate".  Only people can confirm a
flag: ``audit-gold --confirm SAMPLE.csv`` reads their verdicts on a sample drawn by
``benchaudit sample --for gold`` (:mod:`.sample`) and prints the *confirmed* share among the
checked flags, with a Wilson CI and the sentence that it is not a benchmark-wide rate.

Choices (documented in the command's help as well):

- **Who counts.** Each model's base record of the question (``variant == ""``).  A model
  counts toward an answer only if its record is ``valid`` (an invalid or unreadable
  prediction never agrees with anything).  When one model has several records for the
  same question (several pipelines in one run, or the same model in two runs), the command
  stops and asks for ``--pipeline``; it never picks one silently.
- **Default K.** A strict majority of the models *that have a record for the question*
  (valid or not), and never fewer than two: ``max(2, n_models // 2 + 1)``.  Counting invalid
  answers in the denominator is the conservative choice: two agreeing models out of twelve,
  ten of which could not answer, are not a consensus; one model's wrong answer (a run of one
  model, or the only record of a question) is a wrong answer, not a consensus.  Records of
  fewer than two models are refused (:class:`GoldAuditError`): ``audit-gold`` and
  ``sample --for gold`` both apply this rule, here.  ``--min-models K`` sets an absolute K
  (at least 2).
- **Same answer.** Predictions and gold are compared after normalisation: surrounding
  whitespace dropped, case folded, and, when the question has option labels
  (``question_labels``) and the text is made only of those letters (with optional
  separators such as ``,`` or spaces), as the sorted set of letters, so ``"C, A"`` equals
  ``"ac"``.  A consensus answer "differs from the gold" only if its normalised form differs
  *and* the agreeing records were scored incorrect by the task's own metric, so a metric's
  leniency (e.g. ATE's parent-technique match, TAA's alias graph) never produces a flag.
- **Which tasks.** Only tasks whose metric is discrete (``MetricInfo.kind == "binary"``)
  and not judge-graded.  Tasks scored with continuous metrics (VSP/CVSS closeness or
  error, set F1 such as RMS, ...) are skipped and listed as skipped: a "same answer" there
  is not a yes/no disagreement with the gold.  Free-text answers (e.g. TAA) are compared
  as normalised strings, so aliases of one actor do not agree with each other; flags there
  are undercounted, not overcounted.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from typing_extensions import TypedDict

from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.pipeline.record_documents import RecordRow
from pytest_benchaudit.scoring.metrics import METRIC_INFO

__all__ = [
    "Flag",
    "FlagRow",
    "GoldAuditError",
    "MIN_CONSENSUS",
    "audit_gold",
    "normalize_answer",
    "CSV_COLUMNS",
    "REVIEW_NOTE",
]

CSV_COLUMNS = [
    "benchmark",
    "task",
    "question_id",
    "gold",
    "consensus_answer",
    "n_agreeing",
    "agreeing_models",
    "n_models",
    "n_valid",
    "min_models",
]

REVIEW_NOTE = (
    "Flags are candidates for manual review, not label errors: a shared wrong answer can come from a "
    "wrong gold label, an ambiguous question, or a shared misconception of the models."
)

_SEPARATORS = re.compile(r"[\s,;/&+]+|\band\b", re.IGNORECASE)


MIN_CONSENSUS = 2  # one model agreeing with itself is no consensus


class GoldAuditError(BenchauditError):
    """The runs cannot be audited as asked; the message says why."""


def normalize_answer(text: str | None, labels: Sequence[str] = ()) -> str:
    """Case-folded, stripped answer; a multi-letter MCQ answer as its sorted letter set.

    ``labels`` are the question's option labels: when ``text`` consists only of those
    letters (separated or not), the answer is the sorted, de-duplicated letters joined,
    upper-case (``"C, a"`` -> ``"AC"``).  Anything else is ``text.strip().casefold()``.
    """
    s = "" if text is None else str(text).strip()
    if labels:
        letters = {str(label).strip().upper() for label in labels if len(str(label).strip()) == 1}
        compact = _SEPARATORS.sub("", s).upper()
        if compact and letters and all(ch in letters for ch in compact):
            return "".join(sorted(set(compact)))
    return s.casefold()


def _discrete(metric: str) -> tuple[bool, str]:
    info = METRIC_INFO.get(metric)
    if info is None:
        return False, f"metric {metric!r} unknown here"
    if info.needs_judge:
        return False, f"metric {metric!r} is judge-graded (no discrete answer to compare)"
    if info.kind != "binary":
        return False, f"metric {metric!r} gives continuous scores; no yes/no disagreement with the gold to flag"
    return True, ""


class FlagRow(TypedDict):
    """A flag as a row of the ``--csv`` file (:data:`CSV_COLUMNS`) and a unit of ``benchaudit sample --for gold``."""

    benchmark: str
    task: str
    question_id: str
    gold: str
    consensus_answer: str
    n_agreeing: int
    agreeing_models: str  # ";"-joined
    n_models: int
    n_valid: int
    min_models: int


@dataclass
class Flag:
    benchmark: str
    task: str
    question_id: str
    gold: str
    consensus_answer: str
    agreeing_models: list[str]
    n_models: int
    n_valid: int
    min_models: int

    @property
    def n_agreeing(self) -> int:
        return len(self.agreeing_models)

    def row(self) -> FlagRow:
        return {
            "benchmark": self.benchmark,
            "task": self.task,
            "question_id": self.question_id,
            "gold": self.gold,
            "consensus_answer": self.consensus_answer,
            "n_agreeing": self.n_agreeing,
            "agreeing_models": ";".join(self.agreeing_models),
            "n_models": self.n_models,
            "n_valid": self.n_valid,
            "min_models": self.min_models,
        }


@dataclass
class AuditResult:
    flags: list[Flag] = field(default_factory=list)
    # "bench.task" -> {"questions": n audited, "flags": n, "models": n}
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)
    # "bench.task" -> why it was skipped
    skipped: dict[str, str] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)


def audit_gold(records: Iterable[RecordRow], min_models: int | None = None, pipeline: str | None = None) -> AuditResult:
    """Flag questions where >= K models share one valid prediction that differs from the gold.

    ``min_models`` None: a strict majority of the models with a record for the question.
    Only base records (no variant) under ``pipeline`` (if given) are read.
    """
    if min_models is not None and min_models < MIN_CONSENSUS:
        raise GoldAuditError(f"--min-models {min_models}: a consensus needs at least {MIN_CONSENSUS} models")
    by_question: dict[tuple[str, str, str], dict[str, RecordRow]] = defaultdict(dict)
    metrics: dict[tuple[str, str], set[str]] = defaultdict(set)
    models: set[str] = set()
    for rec in records:
        if rec.get("variant") or (pipeline is not None and rec.get("pipeline") != pipeline):
            continue
        key = (str(rec["benchmark"]), str(rec["task"]), str(rec["question_id"]))
        model = str(rec["model"])
        if model in by_question[key]:
            raise GoldAuditError(
                f"{model} has more than one record for {key[0]}.{key[1]} question {key[2]} (several pipelines or "
                f"the same model in two runs); choose one with --pipeline, or pass each model's run once"
            )
        by_question[key][model] = rec
        metrics[key[:2]].add(str(rec.get("metric", "")))
        models.add(model)
    if len(models) < MIN_CONSENSUS:
        raise GoldAuditError(
            f"records of {len(models)} model(s); a consensus needs runs of at least {MIN_CONSENSUS} models"
        )
    result = AuditResult(models=sorted(models))
    discrete: dict[tuple[str, str], bool] = {}
    for (bench, task), names in sorted(metrics.items()):
        label = f"{bench}.{task}"
        if len(names) != 1:
            result.skipped[label] = f"records carry several metrics ({', '.join(sorted(names))})"
            discrete[(bench, task)] = False
            continue
        ok, why = _discrete(next(iter(names)))
        discrete[(bench, task)] = ok
        if ok:
            result.tasks[label] = {"questions": 0, "flags": 0, "models": 0}
        else:
            result.skipped[label] = why
    task_models: dict[str, set[str]] = defaultdict(set)
    for (bench, task, qid), recs in sorted(
        by_question.items(), key=lambda kv: (kv[0][0], kv[0][1], _qid_key(kv[0][2]))
    ):
        if not discrete[(bench, task)]:
            continue
        label = f"{bench}.{task}"
        task_models[label].update(recs)
        result.tasks[label]["questions"] += 1
        n_models = len(recs)
        k = min_models if min_models is not None else max(MIN_CONSENSUS, n_models // 2 + 1)
        any_rec = next(iter(recs.values()))
        gold = str(any_rec.get("gold", ""))
        groups: dict[str, list[str]] = defaultdict(list)
        shown: dict[str, str] = {}
        n_valid = 0
        for model, rec in sorted(recs.items()):
            if not rec.get("valid") or rec.get("prediction") is None or not str(rec["prediction"]).strip():
                continue
            n_valid += 1
            if rec.get("correct"):
                continue  # right under the task's own metric: never part of a wrong consensus
            norm = normalize_answer(rec["prediction"], rec.get("question_labels") or ())
            groups[norm].append(model)
            shown.setdefault(norm, str(rec["prediction"]).strip())
        gold_norm = normalize_answer(gold, any_rec.get("question_labels") or ())
        for norm, agreeing in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            if norm == gold_norm or len(agreeing) < k:
                continue
            labels = any_rec.get("question_labels") or ()
            answer = norm if labels and norm.isupper() else shown[norm]
            result.flags.append(Flag(bench, task, qid, gold, answer, agreeing, n_models, n_valid, k))
            result.tasks[label]["flags"] += 1
    for label, names in task_models.items():
        result.tasks[label]["models"] = len(names)
    return result


def _qid_key(qid: str) -> tuple[int, int | str]:
    return (0, int(qid)) if qid.isdigit() else (1, qid)


def write_csv(flags: list[Flag], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for flag in flags:
            writer.writerow(flag.row())


def render(result: AuditResult, min_models: int | None) -> str:
    from tabulate import tabulate

    k = (
        f"at least {min_models} models"
        if min_models is not None
        else "a strict majority of the models with a record for the question"
    )
    lines = [
        f"audit-gold: {len(result.models)} models; a question is flagged when {k} give the same valid answer, "
        f"scored incorrect, that differs from the gold",
        "",
    ]
    rows = [[label, v["models"], v["questions"], v["flags"]] for label, v in sorted(result.tasks.items())]
    if rows:
        lines.append(tabulate(rows, headers=["task", "models", "questions audited", "flags for review"]))
    else:
        lines.append("no task with a discrete metric in these runs")
    for label, why in sorted(result.skipped.items()):
        lines.append(f"skipped {label}: {why}")
    lines += ["", REVIEW_NOTE]
    return "\n".join(lines)
