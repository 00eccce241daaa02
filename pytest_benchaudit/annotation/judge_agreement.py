"""``benchaudit judge-agreement``: how far two readers of the same outputs agree.

Two modes:

- ``judge-agreement RUN_A RUN_B`` (two judges, or a judge run against a regex-pipeline run):
  records are paired by ``(benchmark, task, question_id, model, variant)`` and each side's
  *label* compared.  For grading the label is the judge's verdict (``CORRECT``/``INCORRECT``)
  or, for a run without a grading judge, ``CORRECT``/``INCORRECT`` from the record's
  ``correct``; for extraction it is the record's ``prediction`` (``None`` -> ``"NONE"``).
- ``judge-agreement RUN`` (within one run that used judge extraction): the judge's verdict
  against ``regex_prediction``, what the pipeline's regex rule would have read.

Judge information is read from ``rec["judge"] = {"model", "purpose": "extraction"|"grading",
"prompt_version", "raw_output", "parse_status": "json"|"fallback"|"failed", "verdict"}``.
A judge call whose verdict is ``None`` (its output could not be parsed) is not a label: such
items are left out of the pairs and counted as ``n_judge_failed``.

Labels are compared after the normalisation of :func:`.gold_audit.normalize_answer`
(case-insensitive; multi-letter MCQ answers as sorted letter sets).

Reported: pairs, raw agreement, Cohen's kappa, the confusion table, per-model score under
A and under B (difference in percentage points), per-task agreement, and strata over the
regex/judge extraction data when records carry it: items where the regex found nothing,
and items where the regex and the judge disagree (count and A-vs-B agreement within each).

Cohen's kappa is ``(p_o - p_e) / (1 - p_e)`` from the confusion matrix: ``p_o`` the share
on the diagonal, ``p_e`` the sum over labels of the product of the two marginal shares.
scikit-learn's ``cohen_kappa_score`` is used when scikit-learn is installed; it is not a
dependency of this project (and scipy has no kappa), so otherwise the same formula is
computed here.  When ``p_e == 1`` (both sides gave one and the same label throughout)
kappa is undefined and reported as ``None``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict

from pytest_benchaudit.annotation.gold_audit import normalize_answer

# Shared with the human-validation loop (judge-agreement --human, audit-gold --confirm).
from pytest_benchaudit.annotation.sample import KAPPA_METHOD, cohen_kappa
from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.pipeline.record_documents import JudgeCallRow, RecordRow

__all__ = [
    "JudgeAgreementError",
    "cohen_kappa",
    "pair_runs",
    "within_run",
    "agreement_report",
    "KAPPA_METHOD",
    "AgreementDocument",
    "AgreementPair",
    "AgreementSide",
    "ConfusionCell",
    "ModelScore",
    "Pairing",
    "Stratum",
    "TaskAgreement",
    "AGREEMENT",
]

NONE_LABEL = "NONE"
_FORBID = ConfigDict(extra="forbid")

PairKey = tuple[str, str, str, str, str]  # (benchmark, task, question_id, model, variant)


@with_config(_FORBID)
class AgreementSide(TypedDict):
    """One side of the comparison: its name and what read the labels."""

    name: str
    source: str


class AgreementPair(TypedDict):
    """One paired item (internal to :func:`agreement_report`, never written): both labels, both
    records, and (regex label, judge extraction label) when a record carries both."""

    key: PairKey
    a: str
    b: str
    rec_a: RecordRow
    rec_b: RecordRow
    regex: tuple[str, str | None] | None


class Pairing(TypedDict):
    """What :func:`pair_runs` / :func:`within_run` return (internal): the pairs and what was left out."""

    mode: Literal["two_runs", "within_run"]
    purpose: str
    pairs: list[AgreementPair]
    n_judge_failed: int
    n_only_a: int
    n_only_b: int
    n_without_judge_extraction: NotRequired[int]
    a: AgreementSide
    b: AgreementSide


@with_config(_FORBID)
class Stratum(TypedDict):
    n: int
    n_agree: int
    agreement: float | None


@with_config(_FORBID)
class ConfusionCell(TypedDict):
    a: str
    b: str
    n: int


@with_config(_FORBID)
class ModelScore(TypedDict):
    """A model's score under A and under B, and their difference in percentage points."""

    model: str
    n: int
    score_a: float
    score_b: float
    diff_pp: float


@with_config(_FORBID)
class TaskAgreement(TypedDict):
    """Agreement and kappa within one task (a :class:`~.sample.KappaResult` with the task)."""

    task: str
    n: int
    agreement: float | None
    expected_agreement: float | None
    kappa: float | None


@with_config(_FORBID)
class AgreementStrata(TypedDict):
    with_regex_and_judge_extraction: Stratum
    regex_found_nothing: Stratum
    regex_found_an_answer: Stratum
    regex_and_judge_disagree: Stratum


class _WithoutJudge(TypedDict, total=False):
    n_without_judge_extraction: int


@with_config(_FORBID)
class AgreementDocument(TypedDict):
    """The JSON document of ``judge-agreement --json`` (:func:`agreement_report`)."""

    mode: Literal["two_runs", "within_run"]
    purpose: str
    a: AgreementSide
    b: AgreementSide
    n_paired: int
    n_only_a: int
    n_only_b: int
    n_judge_failed: int
    n_without_judge_extraction: NotRequired[int]
    agreement: float | None
    expected_agreement: float | None
    kappa: float | None
    kappa_method: str
    labels: list[str]
    confusion: list[ConfusionCell]
    per_model: list[ModelScore]
    score_basis: str
    per_task: list[TaskAgreement]
    strata: AgreementStrata | None


AGREEMENT: TypeAdapter[AgreementDocument] = TypeAdapter(AgreementDocument)


class JudgeAgreementError(BenchauditError):
    """The runs cannot be compared as asked; the message says why."""


# --------------------------------------------------------------------------- labels


def _judge(rec: RecordRow) -> JudgeCallRow | None:
    judge = rec.get("judge")
    return judge if isinstance(judge, dict) else None


def _answer_label(value: str | None, rec: RecordRow) -> str:
    """An extracted answer as a label: None/blank/"NONE" -> "NONE", else normalised."""
    if value is None or not str(value).strip() or str(value).strip().upper() == NONE_LABEL:
        return NONE_LABEL
    return normalize_answer(value, rec.get("question_labels") or ())


def grading_label(rec: RecordRow) -> str | None:
    """The judge's grading verdict, or CORRECT/INCORRECT from ``correct`` when no grading judge; None: judge failed."""
    judge = _judge(rec)
    if judge is not None and judge.get("purpose") == "grading":
        verdict = judge.get("verdict")
        return None if verdict is None else str(verdict).strip().upper()
    return "CORRECT" if rec.get("correct") else "INCORRECT"


def extraction_label(rec: RecordRow) -> str:
    """The record's prediction as a label (None -> "NONE")."""
    return _answer_label(rec.get("prediction"), rec)


def _regex_info(rec: RecordRow) -> tuple[str, str | None] | None:
    """(regex label, judge extraction label or None if the judge failed), when the record carries both."""
    judge = _judge(rec)
    if judge is None or judge.get("purpose") != "extraction" or "regex_prediction" not in rec:
        return None
    verdict = judge.get("verdict")
    return _answer_label(rec.get("regex_prediction"), rec), None if verdict is None else _answer_label(verdict, rec)


# --------------------------------------------------------------------------- pairing


def _key(rec: RecordRow) -> PairKey:
    return (
        str(rec["benchmark"]),
        str(rec["task"]),
        str(rec["question_id"]),
        str(rec["model"]),
        str(rec.get("variant") or ""),
    )


def _index(records: Iterable[RecordRow], name: str, pipeline: str | None) -> dict[PairKey, RecordRow]:
    out: dict[PairKey, RecordRow] = {}
    for rec in records:
        if pipeline is not None and rec.get("pipeline") != pipeline:
            continue
        key = _key(rec)
        if key in out:
            raise JudgeAgreementError(
                f"{name}: more than one record for {key[0]}.{key[1]} question {key[2]} of {key[3]}"
                f"{' variant ' + key[4] if key[4] else ''} (several pipelines?); choose one with --pipeline"
            )
        out[key] = rec
    return out


def _purposes(records: Iterable[RecordRow]) -> set[str]:
    return {str(j.get("purpose")) for j in map(_judge, records) if j is not None}


def _source(records: Sequence[RecordRow]) -> str:
    models = sorted({str(j.get("model")) for j in map(_judge, records) if j is not None})
    versions = sorted({str(j.get("prompt_version")) for j in map(_judge, records) if j is not None})
    if not models:
        return "pipeline (no judge)"
    return f"judge {', '.join(models)} (prompt {', '.join(versions)})"


def pair_runs(
    records_a: Sequence[RecordRow],
    records_b: Sequence[RecordRow],
    purpose: str = "auto",
    pipeline: str | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> Pairing:
    """Mode (a): pair two runs' records and label each side; returns the pairs and what was left out."""
    ia, ib = _index(records_a, names[0], pipeline), _index(records_b, names[1], pipeline)
    if purpose == "auto":
        found = _purposes(ia.values()) | _purposes(ib.values())
        if len(found) > 1:
            raise JudgeAgreementError(
                f"the runs hold judge records of several purposes ({', '.join(sorted(found))}); "
                f"choose one with --purpose"
            )
        purpose = "grading" if found == {"grading"} else "extraction"
    label = grading_label if purpose == "grading" else extraction_label
    pairs: list[AgreementPair] = []
    failed = 0
    for key in sorted(set(ia) & set(ib)):
        ra, rb = ia[key], ib[key]
        la, lb = label(ra), label(rb)
        if la is None or lb is None:
            failed += 1
            continue
        regex = _regex_info(ra) or _regex_info(rb)
        pairs.append({"key": key, "a": la, "b": lb, "rec_a": ra, "rec_b": rb, "regex": regex})
    return {
        "mode": "two_runs",
        "purpose": purpose,
        "pairs": pairs,
        "n_judge_failed": failed,
        "n_only_a": len(set(ia) - set(ib)),
        "n_only_b": len(set(ib) - set(ia)),
        "a": {"name": names[0], "source": _source(list(ia.values()))},
        "b": {"name": names[1], "source": _source(list(ib.values()))},
    }


def within_run(records: Sequence[RecordRow], pipeline: str | None = None, name: str = "RUN") -> Pairing:
    """Mode (b): regex extraction (A) vs judge extraction (B) within one run."""
    index = _index(records, name, pipeline)
    pairs: list[AgreementPair] = []
    failed, considered = 0, 0
    for key in sorted(index):
        rec = index[key]
        info = _regex_info(rec)
        if info is None:
            continue
        considered += 1
        regex, judged = info
        if judged is None:
            failed += 1
            continue
        pairs.append({"key": key, "a": regex, "b": judged, "rec_a": rec, "rec_b": rec, "regex": info})
    if not considered:
        raise JudgeAgreementError(
            f"{name}: no record carries judge extraction (judge.purpose 'extraction') together "
            f"with regex_prediction; give two runs to compare instead"
        )
    return {
        "mode": "within_run",
        "purpose": "extraction",
        "pairs": pairs,
        "n_judge_failed": failed,
        "n_only_a": 0,
        "n_only_b": 0,
        "n_without_judge_extraction": len(index) - considered,
        "a": {"name": "regex", "source": "the pipeline's regex rule (regex_prediction)"},
        "b": {"name": "judge", "source": _source([index[k] for k in index if _regex_info(index[k])])},
    }


# --------------------------------------------------------------------------- report


def _side_score(pairing: Pairing, pair: AgreementPair, side: Literal["a", "b"]) -> float:
    """One item's score under a side: grading -> CORRECT; two runs -> the record's score; within -> exact vs gold."""
    if pairing["purpose"] == "grading":
        return 1.0 if pair[side] == "CORRECT" else 0.0
    rec = pair["rec_a"] if side == "a" else pair["rec_b"]
    if pairing["mode"] == "two_runs":
        return float(rec.get("score", 0.0))
    gold = normalize_answer(rec.get("gold", ""), rec.get("question_labels") or ())
    return 1.0 if pair[side] == gold else 0.0


def _stratum(pairs: list[AgreementPair]) -> Stratum:
    n = len(pairs)
    agree = sum(p["a"] == p["b"] for p in pairs)
    return {"n": n, "n_agree": agree, "agreement": agree / n if n else None}


def agreement_report(pairing: Pairing) -> AgreementDocument:
    """The JSON document of ``judge-agreement`` from :func:`pair_runs` or :func:`within_run`."""
    pairs = pairing["pairs"]
    a = [p["a"] for p in pairs]
    b = [p["b"] for p in pairs]
    k = cohen_kappa(a, b)
    counts = Counter(zip(a, b))
    totals = Counter(a) + Counter(b)
    labels = sorted(totals, key=lambda lab: (-totals[lab], lab))
    per_model: list[ModelScore] = []
    by_model: dict[str, list[AgreementPair]] = defaultdict(list)
    by_task: dict[str, list[AgreementPair]] = defaultdict(list)
    for p in pairs:
        by_model[p["key"][3]].append(p)
        by_task[f"{p['key'][0]}.{p['key'][1]}"].append(p)
    for model, ps in sorted(by_model.items()):
        sa = sum(_side_score(pairing, p, "a") for p in ps) / len(ps)
        sb = sum(_side_score(pairing, p, "b") for p in ps) / len(ps)
        per_model.append({"model": model, "n": len(ps), "score_a": sa, "score_b": sb, "diff_pp": 100 * (sb - sa)})
    per_task: list[TaskAgreement] = []
    for task, ps in sorted(by_task.items()):
        kt = cohen_kappa([p["a"] for p in ps], [p["b"] for p in ps])
        per_task.append(
            {
                "task": task,
                "n": kt["n"],
                "agreement": kt["agreement"],
                "expected_agreement": kt["expected_agreement"],
                "kappa": kt["kappa"],
            }
        )
    with_regex = [(p, p["regex"]) for p in pairs if p["regex"] is not None]
    strata: AgreementStrata | None = None
    if with_regex:
        strata = {
            "with_regex_and_judge_extraction": _stratum([p for p, _rx in with_regex]),
            "regex_found_nothing": _stratum([p for p, (rx, _j) in with_regex if rx == NONE_LABEL]),
            "regex_found_an_answer": _stratum([p for p, (rx, _j) in with_regex if rx != NONE_LABEL]),
            "regex_and_judge_disagree": _stratum([p for p, (rx, jx) in with_regex if jx is not None and rx != jx]),
        }
    score_basis = (
        "share of CORRECT labels"
        if pairing["purpose"] == "grading"
        else "mean of each run's record score"
        if pairing["mode"] == "two_runs"
        else "exact match of the extracted answer with the gold (normalised; the task metric is not re-applied)"
    )
    without: _WithoutJudge = (
        {"n_without_judge_extraction": pairing["n_without_judge_extraction"]}
        if "n_without_judge_extraction" in pairing
        else {}
    )
    return {
        "mode": pairing["mode"],
        "purpose": pairing["purpose"],
        "a": pairing["a"],
        "b": pairing["b"],
        "n_paired": k["n"],
        "n_only_a": pairing["n_only_a"],
        "n_only_b": pairing["n_only_b"],
        "n_judge_failed": pairing["n_judge_failed"],
        **without,
        "agreement": k["agreement"],
        "expected_agreement": k["expected_agreement"],
        "kappa": k["kappa"],
        "kappa_method": KAPPA_METHOD,
        "labels": labels,
        "confusion": [{"a": la, "b": lb, "n": n} for (la, lb), n in sorted(counts.items())],
        "per_model": per_model,
        "score_basis": score_basis,
        "per_task": per_task,
        "strata": strata,
    }


def _f(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def render(doc: AgreementDocument, max_labels: int = 12) -> str:
    from tabulate import tabulate

    out = [
        f"judge-agreement ({doc['mode'].replace('_', ' ')}, {doc['purpose']})",
        f"  A = {doc['a']['name']}: {doc['a']['source']}",
        f"  B = {doc['b']['name']}: {doc['b']['source']}",
        f"  paired items: {doc['n_paired']}   only in A: {doc['n_only_a']}   only in B: {doc['n_only_b']}   "
        f"left out, judge output unparsed: {doc['n_judge_failed']}",
        f"  raw agreement: {_f(doc['agreement'])}   chance agreement: {_f(doc['expected_agreement'])}   "
        f"Cohen's kappa: {_f(doc['kappa'])}",
        f"  kappa: {doc['kappa_method']}",
        "",
    ]
    shown = doc["labels"][:max_labels]
    pooled = len(doc["labels"]) > max_labels
    other = "(other)"
    cols = shown + ([other] if pooled else [])
    grid = {(ra, cb): 0 for ra in cols for cb in cols}
    for cell in doc["confusion"]:
        ra = cell["a"] if cell["a"] in shown else other
        cb = cell["b"] if cell["b"] in shown else other
        grid[(ra, cb)] += cell["n"]
    rows = [[f"A={ra}"] + [grid[(ra, cb)] for cb in cols] for ra in cols]
    if rows:
        out += [
            "confusion (rows A, columns B)"
            + (f"; the {max_labels} most frequent labels, the rest as (other)" if pooled else ""),
            tabulate(rows, headers=[""] + [f"B={cb}" for cb in cols]),
            "",
        ]
    if doc["per_model"]:
        out += [
            f"per-model score (basis: {doc['score_basis']})",
            tabulate(
                [
                    [
                        m["model"],
                        m["n"],
                        f"{100 * m['score_a']:.1f}",
                        f"{100 * m['score_b']:.1f}",
                        f"{m['diff_pp']:+.1f}",
                    ]
                    for m in doc["per_model"]
                ],
                headers=["model", "n", "A %", "B %", "B - A (pp)"],
                disable_numparse=True,
            ),
            "",
        ]
    if len(doc["per_task"]) > 1:
        out += [
            tabulate(
                [[t["task"], t["n"], _f(t["agreement"]), _f(t["kappa"])] for t in doc["per_task"]],
                headers=["task", "n", "agreement", "kappa"],
            ),
            "",
        ]
    if doc["strata"]:
        st = doc["strata"]
        named = [
            ("items with regex + judge extraction data", st["with_regex_and_judge_extraction"]),
            ("regex found nothing", st["regex_found_nothing"]),
            ("regex found an answer", st["regex_found_an_answer"]),
            ("regex and judge disagree", st["regex_and_judge_disagree"]),
        ]
        out += [
            "strata (agreement of A and B within each"
            + (
                "; within one run A is the regex and B the judge, so 'disagree' agrees 0 by definition"
                if doc["mode"] == "within_run"
                else ""
            )
            + ")",
            tabulate(
                [[name, v["n"], v["n_agree"], _f(v["agreement"])] for name, v in named],
                headers=["stratum", "n", "agree", "agreement"],
                disable_numparse=True,
            ),
        ]
    return "\n".join(out).rstrip()
