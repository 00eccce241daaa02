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

The statistics of the filled file live here too (:func:`human_judge_report`,
:func:`gold_confirm_report`, and :func:`cohen_kappa`, which ``judge-agreement`` shares), so that
``judgeagree`` and ``goldaudit`` only add an option each.  Pure apart from :func:`write_sample`
and :func:`read_sample` (CSV files).
"""

from __future__ import annotations

import csv
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import NotRequired, Required, TypedDict

from pytest_benchaudit.aggregate.results import confidence_interval
from pytest_benchaudit.audit.goldaudit import FlagRow
from pytest_benchaudit.common.errors import DataError, UsageError
from pytest_benchaudit.pipeline.documents import RecordRow

__all__ = [
    "Between",
    "DEFAULT_STRATA",
    "GOLD_CONFIRM",
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
try:  # optional: only if already installed; never a dependency
    from sklearn.metrics import cohen_kappa_score as _sk_kappa  # type: ignore[import-not-found]
except ImportError:  # not installed, or a compiled part that does not load (also an ImportError): not available
    _sk_kappa = None

KAPPA_METHOD = ("sklearn.metrics.cohen_kappa_score" if _sk_kappa is not None else
                "computed here from the confusion matrix (scikit-learn is not installed; scipy has no Cohen's kappa)")
GOLD_VERDICTS = ("error", "ok", "unclear")
NOT_BENCHMARK_WIDE = ("This is the share of the checked flags that people confirmed, not a benchmark-wide label-error "
                      "rate: flags are questions where most models agree against the gold (a selected, not a random, "
                      "subset), and questions without a flag were not checked.")
LOCAL_NOTE = ("holds question text (and, for a judge sample, model responses) for the annotators: keep it local; it is "
              "never exported, and judge-agreement --human and audit-gold --confirm print counts and rates only")


class SampleError(DataError):
    """A sample cannot be drawn or read as asked; the message names the file or the option."""


_FORBID = ConfigDict(extra="forbid")


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


@with_config(_FORBID)
class KappaResult(TypedDict):
    """Observed agreement, chance agreement and Cohen's kappa of two label sequences (None: no labels, or undefined)."""

    n: int
    agreement: float | None
    expected_agreement: float | None
    kappa: float | None


@with_config(_FORBID)
class Rate(TypedDict):
    """``k`` of ``n`` with the rate and its 95% Wilson interval (None when n is 0)."""

    n: int
    k: int
    rate: float | None
    ci95: list[float] | None


@with_config(_FORBID)
class Between(KappaResult):
    """Agreement between the first two annotators."""

    annotators: list[str]
    kappa_method: str


@with_config(_FORBID)
class AnnotatorRate(Rate):
    annotator: str


@with_config(_FORBID)
class StratumRate(Rate):
    stratum: str


@with_config(_FORBID)
class TaskRate(Rate):
    task: str


@with_config(_FORBID)
class HumanJudgeReport(TypedDict):
    """``judge-agreement --human --json`` (:func:`human_judge_report`)."""

    n_rows: int
    n_unannotated: int
    annotators: list[str]
    basis: str
    judge_accuracy: Rate
    per_annotator: list[AnnotatorRate]
    between_annotators: Between | None
    per_stratum: list[StratumRate]
    note: str


@with_config(_FORBID)
class GoldConfirmReport(TypedDict):
    """``audit-gold --confirm --json`` (:func:`gold_confirm_report`)."""

    n_rows: int
    n_unchecked: int
    annotators: list[str]
    rule: str
    confirmed: Rate
    n_unclear: int
    between_annotators: Between | None
    per_task: list[TaskRate]
    note: str


HUMAN_JUDGE: TypeAdapter[HumanJudgeReport] = TypeAdapter(HumanJudgeReport)
GOLD_CONFIRM: TypeAdapter[GoldConfirmReport] = TypeAdapter(GoldConfirmReport)


def prompt_text(rec: RecordRow) -> str:
    """The question as the model saw it: the last user message (chat) or the prompt (completion)."""
    req = rec.get("request") or {}
    if req.get("prompt"):
        return str(req["prompt"])
    messages = req.get("messages") or []
    users = [m.get("content", "") for m in (messages if isinstance(messages, list) else [])
             if isinstance(m, dict) and m.get("role") == "user"]
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
        disagrees = "n/a" if "regex_prediction" not in rec else \
            str(str(regex or "").strip().casefold() != label.casefold()).lower()
        units.append({"benchmark": str(rec["benchmark"]), "task": str(rec["task"]),
                      "question_id": str(rec["question_id"]), "model": str(rec["model"]), "purpose": purpose,
                      "judge_label": label, "parse_status": str(judge.get("parse_status", "")),
                      "regex_disagrees": disagrees, "gold": str(rec.get("gold", "")),
                      "question": prompt_text(rec), "response": str(rec.get("raw_output") or "")})
    return units, failed


def gold_units(flag_rows: Iterable[FlagRow], records: Iterable[RecordRow]) -> list[GoldUnit]:
    """One unit per ``audit-gold`` flag (its CSV row), with the question text from any record of it."""
    texts: dict[tuple[str, str, str], str] = {}
    for rec in records:
        key = (str(rec["benchmark"]), str(rec["task"]), str(rec["question_id"]))
        if key not in texts:
            texts[key] = prompt_text(rec)
    return [{"benchmark": str(row["benchmark"]), "task": str(row["task"]), "question_id": str(row["question_id"]),
             "gold": str(row["gold"]), "consensus_answer": str(row["consensus_answer"]),
             "n_agreeing": str(row["n_agreeing"]), "agreeing_models": str(row["agreeing_models"]),
             "n_models": str(row["n_models"]), "n_valid": str(row["n_valid"]), "min_models": str(row["min_models"]),
             "question": texts.get((str(row["benchmark"]), str(row["task"]), str(row["question_id"])), "")}
            for row in flag_rows]


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


def stratified_sample(units: Sequence[JudgeUnit] | Sequence[GoldUnit], n: int, strata: Sequence[str], seed: int = 0,
                      allowed: Sequence[str] = JUDGE_STRATA) -> list[SampleRow]:
    """``n`` units (all if fewer) over ``strata``; each row gains ``sample_id``, ``stratum``, ``stratum_size``."""
    if n < 1:
        raise SampleError(f"--n {n}: the sample needs at least one unit")
    unknown = [k for k in strata if k not in allowed]
    if unknown:
        raise SampleError(f"--strata: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
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
        raise SampleError(f"{path}: not found (make one with `benchaudit sample RUN... --for {kind} --out {path}`)") \
            from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise SampleError(f"{path}: cannot be read as a sample CSV ({err})") from None
    missing = [c for c in ("sample_for", "sample_id", "benchmark", "task", "question_id") if c not in columns]
    if missing:
        raise SampleError(f"{path}: not a benchaudit sample (no column {', '.join(missing)})")
    kinds = {r.get("sample_for", "") for r in rows}
    if rows and kinds != {kind}:
        raise SampleError(f"{path}: a sample for {', '.join(sorted(kinds))}, not for {kind} "
                          f"(use {'audit-gold --confirm' if kind == 'judge' else 'judge-agreement --human'})")
    verdicts = [c for c in columns if c.startswith("verdict_")]
    if not verdicts:
        raise SampleError(f"{path}: no verdict_1, verdict_2, ... column for the annotators' verdicts")
    return rows, verdicts


def wilson(k: int, n: int) -> list[float] | None:
    """95% Wilson interval of ``k`` successes in ``n`` (None when n is 0)."""
    return confidence_interval([1.0] * k + [0.0] * (n - k), binary=True) if n else None


def check_usage(kind: str, n: int, annotators: int) -> None:
    """Bad option values as one usage error."""
    if kind not in COLUMNS:
        raise UsageError(f"--for {kind!r}: choose judge or gold")
    if n < 1:
        raise UsageError(f"--n {n}: the sample needs at least one unit")
    if annotators < 1:
        raise UsageError(f"--annotators {annotators}: at least one verdict column is needed")


# --------------------------------------------------------------------------- agreement statistics


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> KappaResult:
    """Observed agreement, chance agreement and Cohen's kappa of two label sequences.

    ``(p_o - p_e) / (1 - p_e)``; None when ``p_e == 1`` (both sides one and the same label throughout).
    """
    if len(a) != len(b):
        raise ValueError("label sequences differ in length")
    n = len(a)
    if n == 0:
        return {"n": 0, "agreement": None, "expected_agreement": None, "kappa": None}
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if p_e >= 1.0:
        kappa = None  # both sides constant and equal: undefined
    elif _sk_kappa is not None:
        kappa = float(_sk_kappa(list(a), list(b)))
    else:
        kappa = (p_o - p_e) / (1 - p_e)
    return {"n": n, "agreement": p_o, "expected_agreement": p_e, "kappa": kappa}


def _norm(text: str) -> str:
    return " ".join(str(text or "").strip().casefold().split())


def _annotators(rows: Sequence[Mapping[str, str]], verdicts: Sequence[str]) -> list[str]:
    return [c for c in verdicts if any(_norm(r.get(c, "")) for r in rows)]


def _rate(k: int, n: int) -> Rate:
    return {"n": n, "k": k, "rate": k / n if n else None, "ci95": wilson(k, n)}


def _between(rows: Sequence[Mapping[str, str]], annot: Sequence[str]) -> Between | None:
    if len(annot) < 2:
        return None
    a, b = annot[:2]
    both = [r for r in rows if _norm(r.get(a, "")) and _norm(r.get(b, ""))]
    return {"annotators": [a, b], **cohen_kappa([_norm(r[a]) for r in both], [_norm(r[b]) for r in both]),
            "kappa_method": KAPPA_METHOD}


def human_judge_report(rows: Sequence[Mapping[str, str]], verdicts: Sequence[str]) -> HumanJudgeReport:
    """Judge accuracy against each annotator and against their consensus; kappa between the first two.

    A judge label counts as correct when it equals the person's label (case and spacing folded).
    With two annotators the headline is against the rows where both gave the same label.
    """
    annot = _annotators(rows, verdicts)
    if not annot:
        raise SampleError("no verdict filled in: annotators write their label in verdict_1, verdict_2, ...")
    per: list[AnnotatorRate] = []
    for col in annot:
        filled = [r for r in rows if _norm(r.get(col, ""))]
        per.append({"annotator": col, **_rate(sum(_norm(r["judge_label"]) == _norm(r[col]) for r in filled),
                                              len(filled))})
    between = _between(rows, annot)
    if between is not None:
        a, b = annot[:2]
        ref = [r for r in rows if _norm(r.get(a, "")) and _norm(r.get(a, "")) == _norm(r.get(b, ""))]
        ref_col, basis = a, f"rows where {a} and {b} agree"
    else:
        ref, ref_col, basis = [r for r in rows if _norm(r.get(annot[0], ""))], annot[0], annot[0]
    hits = [r for r in ref if _norm(r["judge_label"]) == _norm(r[ref_col])]
    strata: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in ref:
        strata[r.get("stratum", "")][0] += 1
        strata[r.get("stratum", "")][1] += _norm(r["judge_label"]) == _norm(r[ref_col])
    return {"n_rows": len(rows), "n_unannotated": sum(1 for r in rows if not any(_norm(r.get(c, "")) for c in annot)),
            "annotators": annot, "basis": basis, "judge_accuracy": _rate(len(hits), len(ref)),
            "per_annotator": per, "between_annotators": between,
            "per_stratum": [{"stratum": s, **_rate(k, n)} for s, (n, k) in sorted(strata.items())],
            "note": "accuracy of this stratified sample (rare strata over-represented), not of the whole run"}


def gold_confirm_report(rows: Sequence[Mapping[str, str]], verdicts: Sequence[str],
                        rule: str = "all") -> GoldConfirmReport:
    """Confirmed label-error rate among the checked flags, with its Wilson CI; kappa between two annotators.

    Verdicts: ``error`` (the gold label is wrong), ``ok``, ``unclear``.  A flag is checked when at
    least one annotator gave a verdict; it is confirmed when all of them (``rule="all"``) or any of
    them (``rule="any"``) said ``error``.
    """
    if rule not in ("all", "any"):
        raise UsageError(f"--rule {rule!r}: choose all or any")
    annot = _annotators(rows, verdicts)
    if not annot:
        raise SampleError("no verdict filled in: annotators write error, ok or unclear in verdict_1, verdict_2, ...")
    checked, confirmed, unclear = 0, 0, 0
    tasks: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for i, r in enumerate(rows, 2):
        vals = [_norm(r.get(c, "")) for c in annot if _norm(r.get(c, ""))]
        for v in vals:
            if v not in GOLD_VERDICTS:
                raise SampleError(f"line {i} ({r.get('sample_id')}): verdict {v!r}; write one of "
                                  f"{', '.join(GOLD_VERDICTS)}")
        if not vals:
            continue
        checked += 1
        yes = all(v == "error" for v in vals) if rule == "all" else any(v == "error" for v in vals)
        confirmed += yes
        unclear += (not yes) and "unclear" in vals
        key = f"{r['benchmark']}.{r['task']}"
        tasks[key][0] += 1
        tasks[key][1] += yes
    return {"n_rows": len(rows), "n_unchecked": len(rows) - checked, "annotators": annot, "rule": rule,
            "confirmed": _rate(confirmed, checked), "n_unclear": unclear, "between_annotators": _between(rows, annot),
            "per_task": [{"task": t, **_rate(k, n)} for t, (n, k) in sorted(tasks.items())],
            "note": NOT_BENCHMARK_WIDE}


def _pct(r: Rate) -> str:
    rate, ci95 = r["rate"], r["ci95"]
    if rate is None or ci95 is None:
        return "n/a"
    lo, hi = ci95
    return f"{r['k']} of {r['n']} = {100 * rate:.1f}% (95% Wilson CI {100 * lo:.1f}-{100 * hi:.1f}%)"


def _kappa_line(between: Between | None) -> str:
    if not between:
        return "one annotator: no kappa between annotators"
    k, agree = between["kappa"], between["agreement"]
    kappa = "n/a" if k is None else f"{k:.3f}"
    raw = "n/a" if agree is None else f"{100 * agree:.1f}%"
    return (f"Cohen's kappa between {' and '.join(between['annotators'])}: {kappa} over {between['n']} rows both "
            f"labelled (raw agreement {raw})")


def render_human_judge(doc: HumanJudgeReport) -> str:
    from tabulate import tabulate

    lines = [f"judge-agreement --human: {doc['n_rows']} sampled rows, {doc['n_unannotated']} without a verdict",
             f"  judge accuracy against people ({doc['basis']}): {_pct(doc['judge_accuracy'])}",
             f"  {_kappa_line(doc['between_annotators'])}", ""]
    lines.append(tabulate([[p["annotator"], _pct(p)] for p in doc["per_annotator"]],
                          headers=["annotator", "judge agrees"], disable_numparse=True))
    if len(doc["per_stratum"]) > 1:
        lines += ["", tabulate([[s["stratum"], _pct(s)] for s in doc["per_stratum"]],
                               headers=["stratum", "judge agrees"], disable_numparse=True)]
    return "\n".join(lines + ["", f"Note: {doc['note']}."])


def render_gold_confirm(doc: GoldConfirmReport) -> str:
    from tabulate import tabulate

    lines = [f"audit-gold --confirm: {doc['n_rows']} sampled flags, {doc['n_unchecked']} not checked; a flag is "
             f"confirmed when {'every annotator' if doc['rule'] == 'all' else 'any annotator'} says 'error'",
             f"  confirmed label errors among the checked flags: {_pct(doc['confirmed'])}; {doc['n_unclear']} unclear",
             f"  {_kappa_line(doc['between_annotators'])}", ""]
    if len(doc["per_task"]) > 1:
        lines += [tabulate([[t["task"], _pct(t)] for t in doc["per_task"]], headers=["task", "confirmed"],
                           disable_numparse=True), ""]
    return "\n".join(lines + [doc["note"]])
