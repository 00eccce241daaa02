"""What people said about a sample: the statistics of a filled sample file (:mod:`.sample` draws it).

    benchaudit judge-agreement --human sample.csv     judge accuracy against people, kappa between two
    benchaudit audit-gold --confirm sample.csv        confirmed label-error rate among the checked flags

:func:`human_judge_report`, :func:`gold_confirm_report` and :func:`cohen_kappa` (which ``judge-agreement``
shares) with their documents and renderers, so that ``judge_agreement`` and ``gold_audit`` only add an option
each.  :class:`SampleError` lives here, the lower of the two modules, because reading the filled file and
drawing the sample raise the same error; :mod:`.sample` re-exports every name, so callers import from there.
Pure: no file is read or written here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.results import confidence_interval
from pytest_benchaudit.common.errors import DataError, UsageError

__all__ = [
    "AnnotatorRate",
    "Between",
    "GOLD_CONFIRM",
    "GOLD_VERDICTS",
    "GoldConfirmReport",
    "HUMAN_JUDGE",
    "HumanJudgeReport",
    "KAPPA_METHOD",
    "KappaResult",
    "NOT_BENCHMARK_WIDE",
    "Rate",
    "SampleError",
    "StratumRate",
    "TaskRate",
    "cohen_kappa",
    "gold_confirm_report",
    "human_judge_report",
    "render_gold_confirm",
    "render_human_judge",
    "wilson",
]

try:  # optional: only if already installed; never a dependency
    from sklearn.metrics import cohen_kappa_score as _sk_kappa  # type: ignore[import-not-found]
except ImportError:  # not installed, or a compiled part that does not load (also an ImportError): not available
    _sk_kappa = None

KAPPA_METHOD = (
    "sklearn.metrics.cohen_kappa_score"
    if _sk_kappa is not None
    else "computed here from the confusion matrix (scikit-learn is not installed; scipy has no Cohen's kappa)"
)
GOLD_VERDICTS = ("error", "ok", "unclear")
NOT_BENCHMARK_WIDE = (
    "This is the share of the checked flags that people confirmed, not a benchmark-wide label-error "
    "rate: flags are questions where most models agree against the gold (a selected, not a random, "
    "subset), and questions without a flag were not checked."
)


class SampleError(DataError):
    """A sample cannot be drawn or read as asked; the message names the file or the option."""


_FORBID = ConfigDict(extra="forbid")


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


def wilson(k: int, n: int) -> list[float] | None:
    """95% Wilson interval of ``k`` successes in ``n`` (None when n is 0)."""
    return confidence_interval([1.0] * k + [0.0] * (n - k), binary=True) if n else None


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
    return {
        "annotators": [a, b],
        **cohen_kappa([_norm(r[a]) for r in both], [_norm(r[b]) for r in both]),
        "kappa_method": KAPPA_METHOD,
    }


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
        per.append(
            {"annotator": col, **_rate(sum(_norm(r["judge_label"]) == _norm(r[col]) for r in filled), len(filled))}
        )
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
    return {
        "n_rows": len(rows),
        "n_unannotated": sum(1 for r in rows if not any(_norm(r.get(c, "")) for c in annot)),
        "annotators": annot,
        "basis": basis,
        "judge_accuracy": _rate(len(hits), len(ref)),
        "per_annotator": per,
        "between_annotators": between,
        "per_stratum": [{"stratum": s, **_rate(k, n)} for s, (n, k) in sorted(strata.items())],
        "note": "accuracy of this stratified sample (rare strata over-represented), not of the whole run",
    }


def gold_confirm_report(
    rows: Sequence[Mapping[str, str]], verdicts: Sequence[str], rule: str = "all"
) -> GoldConfirmReport:
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
                raise SampleError(
                    f"line {i} ({r.get('sample_id')}): verdict {v!r}; write one of {', '.join(GOLD_VERDICTS)}"
                )
        if not vals:
            continue
        checked += 1
        yes = all(v == "error" for v in vals) if rule == "all" else any(v == "error" for v in vals)
        confirmed += yes
        unclear += (not yes) and "unclear" in vals
        key = f"{r['benchmark']}.{r['task']}"
        tasks[key][0] += 1
        tasks[key][1] += yes
    return {
        "n_rows": len(rows),
        "n_unchecked": len(rows) - checked,
        "annotators": annot,
        "rule": rule,
        "confirmed": _rate(confirmed, checked),
        "n_unclear": unclear,
        "between_annotators": _between(rows, annot),
        "per_task": [{"task": t, **_rate(k, n)} for t, (n, k) in sorted(tasks.items())],
        "note": NOT_BENCHMARK_WIDE,
    }


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
    return (
        f"Cohen's kappa between {' and '.join(between['annotators'])}: {kappa} over {between['n']} rows both "
        f"labelled (raw agreement {raw})"
    )


def render_human_judge(doc: HumanJudgeReport) -> str:
    from tabulate import tabulate

    lines = [
        f"judge-agreement --human: {doc['n_rows']} sampled rows, {doc['n_unannotated']} without a verdict",
        f"  judge accuracy against people ({doc['basis']}): {_pct(doc['judge_accuracy'])}",
        f"  {_kappa_line(doc['between_annotators'])}",
        "",
    ]
    lines.append(
        tabulate(
            [[p["annotator"], _pct(p)] for p in doc["per_annotator"]],
            headers=["annotator", "judge agrees"],
            disable_numparse=True,
        )
    )
    if len(doc["per_stratum"]) > 1:
        lines += [
            "",
            tabulate(
                [[s["stratum"], _pct(s)] for s in doc["per_stratum"]],
                headers=["stratum", "judge agrees"],
                disable_numparse=True,
            ),
        ]
    return "\n".join(lines + ["", f"Note: {doc['note']}."])


def render_gold_confirm(doc: GoldConfirmReport) -> str:
    from tabulate import tabulate

    lines = [
        f"audit-gold --confirm: {doc['n_rows']} sampled flags, {doc['n_unchecked']} not checked; a flag is "
        f"confirmed when {'every annotator' if doc['rule'] == 'all' else 'any annotator'} says 'error'",
        f"  confirmed label errors among the checked flags: {_pct(doc['confirmed'])}; {doc['n_unclear']} unclear",
        f"  {_kappa_line(doc['between_annotators'])}",
        "",
    ]
    if len(doc["per_task"]) > 1:
        lines += [
            tabulate(
                [[t["task"], _pct(t)] for t in doc["per_task"]], headers=["task", "confirmed"], disable_numparse=True
            ),
            "",
        ]
    return "\n".join(lines + [doc["note"]])
