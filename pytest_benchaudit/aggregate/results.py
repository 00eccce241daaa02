"""Aggregation: records -> per task/model/variant results and per-benchmark scores.

Both denominators are always computed (``score_total`` over every item,
``score_valid`` over items with a readable answer); the pipeline's
``scoring.denominator`` only decides which one is the headline ``score``.
Stage rates are cumulative pass rates: the share of items that got through
inference, through extraction (valid), and that were correct.

Pure: no pytest, no I/O.  Works on record dicts, so it serves pytest runs and
offline re-scoring alike.  Each per-task result is built and checked as a :class:`TaskResult`
(the contract of a ``summary.json`` ``results`` row) and handed on as that row.

Why ~460 lines: task results, benchmark scores and variant deltas read the same rows and
cards; the variant-delta attribution (the stage that moved a score) is the next to move
to a module of its own.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict

from pytest_benchaudit.pipeline.variants import card_for, card_key
from pytest_benchaudit.pipeline.stages import is_unspecified
from pytest_benchaudit.aggregate.repeats import (REDUCERS, Reducer, clt_se, clustered_se, normal_ci, reduce_scores,
                                                  retest_agreement, sampling_sd)
from pytest_benchaudit.scoring.metrics import METRIC_INFO, invalid_score

__all__ = ["TaskResult", "Summarizer", "summarize", "benchmark_scores", "confidence_interval", "group_key", "variant_deltas", "summary_document"]


def group_key(rec: dict[str, Any]) -> tuple[str, str, str, str]:
    return (rec["benchmark"], rec["task"], rec["model"], rec.get("variant", ""))


# The 0.975 quantile of the standard normal: the Wilson interval needs only this constant.
_Z95 = 1.959963984540054


def confidence_interval(values: list[float], binary: bool) -> list[float] | None:
    """95% interval for a mean: Wilson for 0/1 values, Student t otherwise.

    Wilson's closed form (the one ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``
    computes; the tests check they agree) needs no scipy import, which alone cost ~1.4 s of every
    run's start-up; the t quantile comes from ``scipy.special.stdtrit``, a much lighter import.
    """
    n = len(values)
    if n == 0:
        return None
    if binary:
        p = sum(values) / n
        z2 = _Z95 * _Z95
        centre = (p + z2 / (2 * n)) / (1 + z2 / n)
        half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        return [round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)]
    mean = sum(values) / n
    if n < 2:
        return [mean, mean]
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    if sd == 0 or math.isnan(sd):
        return [mean, mean]
    from scipy.special import stdtrit  # lazy: only continuous metrics need it

    half = float(stdtrit(n - 1, 0.975)) * sd / math.sqrt(n)
    return [round(mean - half, 6), round(mean + half, 6)]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class StageRates(BaseModel):
    """Cumulative pass rates: through inference, through extraction (valid), correct."""

    model_config = ConfigDict(extra="forbid")

    inference_ok: float
    extraction_ok: float
    correct: float


class TaskResult(BaseModel):
    """One benchmark x task x model x variant: both denominators, stage rates, the headline and its CI."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    task: str
    model: str
    variant: str
    pipeline: str
    pipeline_hash: str
    metric: str
    lower_is_better: bool
    denominator: str
    n: int
    n_valid: int
    n_correct: int
    score: float | None  # under the pipeline's denominator; None while it is unspecified
    score_total: float | None
    score_valid: float | None
    invalid_rate: float
    invalid_reasons: dict[str, int]
    stage_rates: StageRates
    ci95: list[float] | None
    # What an invalid answer scores where it is counted (score_total): the card's
    # scoring.invalid_credit (a share of full credit, 0 = none) and the per-item value it gives
    # (0 on a share, the metric's worst case on an error metric).  Old summaries lack both.
    invalid_credit: float = 0.0
    invalid_score: float | None = None
    # Repeated generations (inference.repeats; docs/statistics.md).  ``n`` counts records (questions x
    # repeats), ``n_questions`` questions; the headline is the mean over questions of each question's
    # repeats reduced by ``reducer``.  ``se``: CLT standard error of the headline over questions;
    # ``se_clustered``: clustered by ``aggregation.by`` (null without); ``ci95_clustered`` from it;
    # ``sampling_sd``: SD of the headline computed per repeat index; ``retest_agreement``: share of
    # questions whose verdicts all agree (both null when asked once).  Old summaries lack them.
    repeats: int = 1
    reducer: str = "mean"
    n_questions: int | None = None
    se: float | None = None
    se_clustered: float | None = None
    ci95_clustered: list[float] | None = None
    sampling_sd: float | None = None
    retest_agreement: float | None = None
    extras: dict[str, float] | None = None  # per-item numbers beside the headline (e.g. TAA plausible)
    breakdown: dict[str, dict[str, dict[str, Any]]] | None = None  # aggregation.by field -> value -> n, score

    def row(self) -> dict[str, Any]:
        """The ``summary.json`` row: optional parts only when present."""
        return self.model_dump(exclude_none=False, exclude={k for k in ("extras", "breakdown")
                                                             if getattr(self, k) is None})


class _Group:
    """What one benchmark x task x model x variant's result needs, in compact columns.

    Built record by record (:meth:`add`): counts, one float and one flag per record (the score,
    and whether it is valid), and the few per-record fields the card asks for (score extras, the
    ``aggregation.by`` value), never the record itself, so a run of any size is summarised in
    memory of ~10 bytes per record (``records.jsonl`` can be streamed through it).
    """

    __slots__ = ("first", "denominator", "credit", "by", "reducer", "pass_k", "scores", "valid", "correct",
                 "n_correct", "inference_failed", "reasons", "extras", "breakdown", "question", "repeat",
                 "cluster", "cluster_ids")

    def __init__(self, first: dict[str, Any], card: dict[str, Any] | None) -> None:
        fields = (card or {}).get("fields", {})
        self.first = {"benchmark": first["benchmark"], "task": first["task"], "model": first["model"],
                      "variant": first.get("variant", ""), "pipeline": first["pipeline"],
                      "pipeline_hash": first["pipeline_hash"],
                      "metric": fields.get("scoring.metric", first.get("metric", ""))}
        self.denominator = fields.get("scoring.denominator", "unspecified")
        credit = fields.get("scoring.invalid_credit", 0.0)  # a card from before the field: no credit
        self.credit = float(credit) if isinstance(credit, (int, float)) and not isinstance(credit, bool) else 0.0
        self.by = fields.get("aggregation.by")
        reducer = fields.get("aggregation.reducer", "mean")  # a card from before the field: the mean
        self.reducer: Reducer = reducer if reducer in REDUCERS else "mean"
        pass_k = fields.get("aggregation.pass_k")
        self.pass_k = pass_k if isinstance(pass_k, int) and not isinstance(pass_k, bool) else None
        self.scores = array("d")
        self.valid = bytearray()
        self.correct = bytearray()
        # Per record, which question (a 64-bit hash of its id) and repeat it is, and its cluster
        # (the aggregation.by value, as an index into ``cluster_ids``): 17 bytes a record, so the
        # K records of a question are joined only when the result is made.
        self.question = array("q")
        self.repeat = array("l")
        self.cluster = array("l")
        self.cluster_ids: dict[str | None, int] = {}
        self.n_correct = 0
        self.inference_failed = 0
        self.reasons: Counter[Any] = Counter()
        self.extras: dict[str, tuple[array[float], bytearray]] = {}  # name -> (values, valid flags)
        self.breakdown: dict[str, tuple[array[float], bytearray]] = {}  # by-value -> (scores, valid flags)

    def _cluster(self, r: dict[str, Any]) -> int:
        value = r.get("question_meta", {}).get(self.by) if self.by else None
        key = None if value is None else "\x1f".join(map(str, value)) if isinstance(value, list) else str(value)
        return self.cluster_ids.setdefault(key, len(self.cluster_ids))

    def add(self, r: dict[str, Any]) -> None:
        valid = bool(r["valid"])
        score = float(r["score"])
        self.scores.append(score)
        self.valid.append(valid)
        self.correct.append(bool(r["correct"]))
        digest = hashlib.blake2b(str(r.get("question_id")).encode(), digest_size=8).digest()
        self.question.append(int.from_bytes(digest, "little", signed=True))
        self.repeat.append(int(r.get("repeat") or 0))
        self.cluster.append(self._cluster(r))
        if r["correct"]:
            self.n_correct += 1
        if r.get("invalid_stage") == "inference":
            self.inference_failed += 1
        if not valid:
            self.reasons[r["invalid_reason"]] += 1
        for name, value in (r.get("score_extras") or {}).items():
            values, flags = self.extras.setdefault(name, (array("d"), bytearray()))
            values.append(float(value))
            flags.append(valid)
        if self.by:
            value = r.get("question_meta", {}).get(self.by)
            for v in value if isinstance(value, list) else [value]:
                scores, flags = self.breakdown.setdefault(str(v), (array("d"), bytearray()))
                scores.append(score)
                flags.append(valid)

    def _repeats(self, lower_is_better: bool) -> _Reduced:
        """Each question's repeats reduced by ``aggregation.reducer`` (every question is one value
        under ``total``; under ``valid``, over its valid repeats, and a question with none is left
        out), and the headline per repeat index (``sampling_sd``).  Asked once, the per-question
        values are the records' scores in record order: the headline is the one it always was."""
        names = {i: key for key, i in self.cluster_ids.items()}
        if not any(self.repeat):
            # Asked once: every record is a question of its own, in record order (as before repeats).
            scores, flags = self.scores.tolist(), self.valid
            clusters = [names[c] for c in self.cluster]
            return _Reduced(k=1, total=scores, clusters=clusters,
                            valid=[v for v, ok in zip(scores, flags) if ok],
                            valid_clusters=[c for c, ok in zip(clusters, flags) if ok],
                            per_repeat_total=[], per_repeat_valid=[], verdicts=[])
        # A question's slot: its id, and which occurrence of (id, repeat) the record is, so that a
        # second record of one question and repeat (a merged file) is a question of its own.
        seen: Counter[tuple[int, int]] = Counter()
        slot_of: dict[tuple[int, int], int] = {}
        slots: list[int] = []
        slot_cluster: list[str | None] = []
        for question, repeat, cluster in zip(self.question, self.repeat, self.cluster):
            occurrence = seen[(question, repeat)]
            seen[(question, repeat)] += 1
            slot = slot_of.setdefault((occurrence, question), len(slot_of))
            if slot == len(slot_cluster):
                slot_cluster.append(names[cluster])
            slots.append(slot)
        n_slots = len(slot_cluster)
        per_slot: list[list[float]] = [[] for _ in range(n_slots)]
        valid: list[list[float]] = [[] for _ in range(n_slots)]
        verdicts: list[list[bool]] = [[] for _ in range(n_slots)]
        by_repeat: dict[int, tuple[list[float], list[float]]] = {}
        for score, ok, correct, slot, repeat in zip(self.scores, self.valid, self.correct, slots, self.repeat):
            per_slot[slot].append(score)
            verdicts[slot].append(bool(correct))
            all_r, valid_r = by_repeat.setdefault(repeat, ([], []))
            all_r.append(score)
            if ok:
                valid[slot].append(score)
                valid_r.append(score)

        def reduce(values: list[float]) -> float:
            if len(values) == 1:
                return values[0]
            return reduce_scores(values, self.reducer, lower_is_better, self.pass_k)

        kept = [i for i in range(n_slots) if valid[i]]
        return _Reduced(
            k=max(len(v) for v in per_slot),
            total=[reduce(v) for v in per_slot], clusters=slot_cluster,
            valid=[reduce(valid[i]) for i in kept], valid_clusters=[slot_cluster[i] for i in kept],
            per_repeat_total=[sum(a) / len(a) for _, (a, _v) in sorted(by_repeat.items())],
            per_repeat_valid=[sum(v) / len(v) for _, (_a, v) in sorted(by_repeat.items()) if v],
            verdicts=verdicts)

    def result(self) -> dict[str, Any]:
        first, denominator = self.first, self.denominator
        metric = first["metric"]
        info = METRIC_INFO.get(metric)
        n = len(self.scores)
        all_scores = self.scores.tolist()
        n_valid = sum(self.valid)
        lib = bool(info.lower_is_better) if info else False
        rep = self._repeats(lib)
        score_total = _mean(rep.total)
        score_valid = _mean(rep.valid)
        use_valid = denominator == "valid"
        headline_values = rep.valid if use_valid else rep.total
        headline = None if is_unspecified(denominator) else (score_valid if use_valid else score_total)
        binary = info is None or info.kind == "binary"
        # Asked once (or reduced to verdicts) the per-question scores are 0/1: Wilson's interval, as before.
        binary_values = binary and all(v in (0.0, 1.0) for v in headline_values)
        se = clt_se(headline_values) if headline is not None else None
        se_clustered = (clustered_se(headline_values, rep.valid_clusters if use_valid else rep.clusters)
                        if headline is not None and self.by else None)
        # What the invalid items scored, read from them (an old run keeps its own value), else what they would.
        invalid_scores = [s for s, ok in zip(all_scores, self.valid) if not ok]
        invalid_value = (sum(invalid_scores) / len(invalid_scores) if invalid_scores
                         else invalid_score(info, self.credit) if info else None)
        result: dict[str, Any] = {
            **first,
            "lower_is_better": bool(info.lower_is_better) if info else False,
            "denominator": denominator,
            "n": n,
            "n_valid": n_valid,
            "n_correct": self.n_correct,
            "score": headline,
            "score_total": score_total,
            "score_valid": score_valid,
            "invalid_rate": 1 - n_valid / n,
            "invalid_reasons": dict(self.reasons),
            "stage_rates": {
                "inference_ok": 1 - self.inference_failed / n,
                "extraction_ok": n_valid / n,
                "correct": self.n_correct / n,
            },
            "ci95": None if headline is None else confidence_interval(headline_values, binary=binary_values),
            "invalid_credit": self.credit,
            "invalid_score": invalid_value,
            "repeats": rep.k,
            "reducer": self.reducer,
            "n_questions": len(rep.total),
            "se": se,
            "se_clustered": se_clustered,
            "ci95_clustered": normal_ci(headline, se_clustered),
            "sampling_sd": None if headline is None else sampling_sd(rep.per_repeat_valid if use_valid
                                                                     else rep.per_repeat_total),
            "retest_agreement": retest_agreement(rep.verdicts) if rep.k > 1 else None,
        }
        extras = {name: [v for v, ok in zip(values, flags) if ok or denominator != "valid"]
                  for name, (values, flags) in self.extras.items()}
        extras = {name: vals for name, vals in extras.items() if vals}
        if extras:
            # Per-item numbers a benchmark reports beside the headline (e.g. TAA plausible),
            # averaged over the same denominator as the headline.
            result["extras"] = {name: sum(vals) / len(vals) for name, vals in extras.items()}
        if self.by:
            # Score per value of a question metadata field; a list value counts in each of its entries.
            result["breakdown"] = {self.by: {
                key: {"n": len(scores), "score": _mean([s for s, ok in zip(scores, flags)
                                                        if ok or denominator != "valid"])}
                for key, (scores, flags) in sorted(self.breakdown.items())}}
        return TaskResult.model_validate(result).row()


@dataclass
class _Reduced:
    """A group's questions after their repeats are reduced (see :meth:`_Group._repeats`)."""

    k: int  # the most repeats a question has
    total: list[float]  # per question: the reduced score over all its repeats
    clusters: list[str | None]  # per question of ``total``: its cluster
    valid: list[float]  # per question with a valid repeat: the reduced score over those
    valid_clusters: list[str | None]
    per_repeat_total: list[float]  # per repeat index: the headline over all its records
    per_repeat_valid: list[float]  # per repeat index with a valid record: over its valid records
    verdicts: list[list[bool]]  # per question: its repeats' verdicts


class Summarizer:
    """:func:`summarize`, record by record: :meth:`add` each record (in run order), then
    :meth:`results`.  Holds compact columns per group (see :class:`_Group`), not the records."""

    def __init__(self, cards: dict[str, dict[str, Any]] | None = None) -> None:
        self.cards = cards or {}
        self.groups: dict[tuple[str, str, str, str], _Group] = {}

    def add(self, rec: dict[str, Any]) -> None:
        key = group_key(rec)
        group = self.groups.get(key)
        if group is None:
            bench, task, _model, variant = key
            group = self.groups[key] = _Group(rec, card_for(self.cards, bench, task, variant))
        group.add(rec)

    def results(self) -> list[dict[str, Any]]:
        """One result per group, in first-seen order."""
        return [group.result() for group in self.groups.values()]


def summarize(records: Iterable[dict[str, Any]], cards: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One result per benchmark x task x model x variant, in first-seen order.

    ``cards`` maps ``"<benchmark>.<task>"`` (or ``"<benchmark>.<task>|<variant>"``)
    to the pipeline card the records were scored under.  ``records`` is read once and
    not kept (a generator over ``records.jsonl`` is summarised in constant memory per group).
    """
    summary = Summarizer(cards)
    for rec in records:
        summary.add(rec)
    return summary.results()


def benchmark_scores(results: list[dict[str, Any]], cards: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per benchmark x model x variant: the tasks' headline scores combined by ``aggregation.method``.

    ``micro`` pools items (each question weighs the same, under each task's
    denominator); ``macro`` is the unweighted mean of task scores.  If the tasks
    disagree on the method or leave it unspecified, the score is ``None`` and the
    reason is given: the project does not pick a method silently.
    """
    cards = cards or {}
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[(r["benchmark"], r["model"], r["variant"])].append(r)
    out = []
    for (bench, model, variant), rs in groups.items():
        methods = {
            card_for(cards, bench, r["task"], variant).get("fields", {}).get("aggregation.method", "unspecified")
            for r in rs
        }
        entry: dict[str, Any] = {"benchmark": bench, "model": model, "variant": variant,
                                 "tasks": [r["task"] for r in rs], "pipeline": rs[0]["pipeline"],
                                 "n": sum(r["n"] for r in rs), "score": None, "method": None, "note": ""}
        method = methods.pop() if len(methods) == 1 else None
        scores = [r["score"] for r in rs]
        if len({r["lower_is_better"] for r in rs}) > 1:
            # An accuracy and an error (lower is better) cannot be averaged into one number.
            entry["note"] = "tasks mix higher-is-better and lower-is-better metrics: " + ", ".join(
                sorted({r["metric"] for r in rs}))
        elif method is None or is_unspecified(method):
            entry["note"] = "aggregation unspecified" if method else "tasks disagree on aggregation.method"
            if len(rs) == 1:  # one task: its score is the benchmark's, whatever the method
                entry["score"], entry["method"], entry["note"] = scores[0], "single task", ""
        elif any(s is None for s in scores):
            entry["note"] = "a task has no headline score"
        elif method == "macro":
            entry["score"], entry["method"] = sum(scores) / len(scores), "macro"
        else:
            denominators = [r["n_valid"] if r["denominator"] == "valid" else r["n"] for r in rs]
            total = sum(denominators)
            entry["score"] = sum(s * d for s, d in zip(scores, denominators)) / total if total else None
            entry["method"] = "micro"
        out.append(entry)
    return out


# -- single-field counterfactuals (--vary) ---------------------------------------------

_EPS = 1e-9
_STAGES = ("inference", "extraction", "scoring")


def _order(results: list[dict[str, Any]], cards: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Variant name -> position: the order the cards were made in (the --vary order), else first seen."""
    order: dict[str, int] = {"": -1}
    for key in cards:
        if "|" in key:
            order.setdefault(key.split("|", 1)[1], len(order))
    for r in results:
        order.setdefault(r["variant"], len(order))
    return order


def _invalid_value(r: dict[str, Any]) -> float:
    """What an invalid item scored in this result (read back from the two denominators)."""
    n, n_valid = r["n"], r["n_valid"]
    if n > n_valid and r["score_total"] is not None:
        valid_sum = (r["score_valid"] or 0.0) * n_valid
        return float((r["score_total"] * n - valid_sum) / (n - n_valid))
    if r.get("invalid_score") is not None:  # none invalid: what one would score (scoring.invalid_credit)
        return float(r["invalid_score"])
    info = METRIC_INFO.get(r["metric"])
    return float(info.invalid_value) if info else 0.0


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"


def _reason_changes(base: dict[str, Any], var: dict[str, Any]) -> dict[str, int]:
    """Invalid reasons whose count changed (variant minus base), largest change first."""
    b, v = base.get("invalid_reasons") or {}, var.get("invalid_reasons") or {}
    changes = [(reason, v.get(reason, 0) - b.get(reason, 0)) for reason in dict.fromkeys([*v, *b])]
    return dict(sorted((c for c in changes if c[1]), key=lambda c: -abs(c[1])))


def reason_text(changes: dict[str, int], limit: int | None = None) -> str:
    """``truncated +11, empty -1``; with ``limit``, the largest changes and an ellipsis."""
    items = list(changes.items())
    text = ", ".join(f"{reason} {d:+d}" for reason, d in items[:limit])
    return text + (", …" if limit is not None and len(items) > limit else "")


def _contributions(base: dict[str, Any], var: dict[str, Any], delta: float) -> dict[str, float]:
    """Chain decomposition of the headline change over the stages (they add up to ``delta``).

    Over all items an item scores ``v`` (the mean score of valid answers) when it gets
    through inference (share ``i``) and extraction (share ``x`` of those), else the
    metric's invalid value ``w``: ``T = i*x*v + (1 - i*x)*w``.  Changing the stages one
    at a time in pipeline order gives the inference part (``i``), the extraction part
    (``x``); the rest (verdicts among valid answers, the denominator) is scoring's.
    """
    w = _invalid_value(base)
    i0, i1 = base["stage_rates"]["inference_ok"], var["stage_rates"]["inference_ok"]
    e0, e1 = base["stage_rates"]["extraction_ok"], var["stage_rates"]["extraction_ok"]
    # With no item through inference a side's extraction rate is undefined: take the other
    # side's, so that a base with 0% inference ok credits the recovery to inference.
    x0 = e0 / i0 if i0 else (e1 / i1 if i1 else 0.0)
    x1 = e1 / i1 if i1 else x0
    v0 = base["score_valid"] if base["score_valid"] is not None else var["score_valid"]
    v0 = w if v0 is None else v0

    def total(i: float, x: float) -> float:
        return i * x * v0 + (1 - i * x) * w

    c_inf = total(i1, x0) - total(i0, x0)
    c_ext = total(i1, x1) - total(i1, x0)
    return {"inference": c_inf, "extraction": c_ext, "scoring": delta - c_inf - c_ext}


def _moved_by(base: dict[str, Any], var: dict[str, Any], delta: float, same: bool) -> tuple[str, str, dict[str, float]]:
    """Which stage moved the headline: ``none``, ``inference``, ``extraction`` or ``scoring``.

    The rule (documented in :func:`variant_deltas`): no move -> ``none``; the same
    validity (inference-ok and extraction-ok rates equal) -> ``scoring``; both
    headlines over valid answers only -> the validity stage whose failure share changed
    most (the set of scored items changed); otherwise the stage with the largest part
    in the chain decomposition of :func:`_contributions` (ties: the earlier stage).
    """
    sr0, sr1 = base["stage_rates"], var["stage_rates"]
    d_inf = sr1["inference_ok"] - sr0["inference_ok"]
    d_ext_fail = (sr1["inference_ok"] - sr1["extraction_ok"]) - (sr0["inference_ok"] - sr0["extraction_ok"])
    same_validity = abs(d_inf) < _EPS and abs(d_ext_fail) < _EPS
    parts = {s: 0.0 for s in _STAGES}
    if abs(delta) < _EPS:
        return "none", "same pipeline as the base" if same else "headline unchanged", parts
    if same_validity:
        parts["scoring"] = delta
        stage = "scoring"
    elif base["denominator"] == var["denominator"] == "valid":
        stage = "inference" if abs(d_inf) >= abs(d_ext_fail) else "extraction"
        parts[stage] = delta
    else:
        parts = _contributions(base, var, delta)
        stage = max(_STAGES, key=lambda s: (abs(parts[s]) - _EPS * _STAGES.index(s)))
    reasons = reason_text(_reason_changes(base, var))
    if stage == "inference":
        detail = (f"inference ok {100 * sr0['inference_ok']:.1f}% -> {100 * sr1['inference_ok']:.1f}%"
                  + (f" ({reasons})" if reasons else ""))
    elif stage == "extraction":
        detail = (f"extraction ok {100 * sr0['extraction_ok']:.1f}% -> {100 * sr1['extraction_ok']:.1f}%"
                  + (f" ({reasons})" if reasons else ""))
    elif base["denominator"] != var["denominator"]:
        detail = f"denominator {base['denominator']} -> {var['denominator']}"
    else:
        detail = (f"same validity, different verdicts: correct {100 * sr0['correct']:.1f}% -> "
                  f"{100 * sr1['correct']:.1f}%" if same_validity else
                  f"verdicts among valid answers: score/valid {_fmt(base['score_valid'])} -> {_fmt(var['score_valid'])}")
    return stage, detail, parts


def variant_deltas(results: list[dict[str, Any]], cards: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per benchmark x task x model, one row per non-base variant: how it moved the score.

    Each row holds the variant's headline ``score`` and the base's (``base_score``), the
    change ``delta`` in the metric's own unit and ``delta_pp`` in percentage points
    (``None`` for lower-is-better metrics such as MAD, whose ``delta`` is in the metric's
    unit; ``lower_is_better`` says so, ``better`` says whether the variant scores better),
    the invalid rate of both, the stage rates of both and their change, the varied
    ``field``/``value``/``kind`` (from the variant's pipeline card when ``cards`` is given)
    and ``moved_by``: the stage that moved the score, with ``moved_by_detail``.

    The ``moved_by`` rule compares the cumulative stage rates (``inference_ok``,
    ``extraction_ok``, ``correct``) of variant and base:

    * ``none``: the headline did not move (``same pipeline as the base`` when the varied
      value equals the base's);
    * ``scoring``: inference-ok and extraction-ok rates are equal, so the same items are
      valid: the verdicts or the denominator changed the score;
    * when validity changed, the headline change is split over the stages by changing
      them one at a time in pipeline order (see :func:`_contributions`): the share of
      items that got through inference (``inference``: more/fewer errors, empty,
      truncated or unclosed-reasoning outputs), the share of those with a readable answer
      (``extraction``: more/fewer unreadable answers), and the rest (``scoring``: verdicts
      among valid answers, denominator); the largest part names the stage, ties going to
      the earlier stage.  When both headlines count valid answers only, validity moves the
      score only through which items are scored: the validity stage whose failure share
      changed most is named.

    A variant whose group has no base result (base items deselected) gets ``None`` scores
    and ``moved_by`` ``None``.
    """
    cards = cards or {}
    order = _order(results, cards)
    groups: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["benchmark"], r["task"], r["model"]), {})[r["variant"]] = r
    out: list[dict[str, Any]] = []
    for (bench, task, model), by_variant in groups.items():
        base = by_variant.get("")
        for name in sorted((v for v in by_variant if v), key=lambda v: order.get(v, len(order))):
            var = by_variant[name]
            info = (cards.get(card_key(bench, task, name)) or {}).get("variant") or {}
            lib = bool(var["lower_is_better"])
            row: dict[str, Any] = {
                "benchmark": bench, "task": task, "model": model, "variant": name,
                "field": info.get("field"), "value": info.get("value"), "base_value": info.get("base_value"),
                "kind": info.get("kind"), "same_as_base": bool(info.get("same_as_base", False)),
                "metric": var["metric"], "lower_is_better": lib,
                "unit": var["metric"] if lib else "pp",
                "denominator": var["denominator"], "base_denominator": base["denominator"] if base else None,
                "n": var["n"], "base_n": base["n"] if base else None,
                "score": var["score"], "base_score": base["score"] if base else None,
                "delta": None, "delta_pp": None, "better": None,
                "invalid_rate": var["invalid_rate"], "base_invalid_rate": base["invalid_rate"] if base else None,
                "stage_rates": dict(var["stage_rates"]),
                "base_stage_rates": dict(base["stage_rates"]) if base else None,
                "stage_deltas": None, "contributions": None,
                "moved_by": None, "moved_by_detail": "no base result (base items not run)" if base is None else "",
                "invalid_reason_changes": _reason_changes(base, var) if base else None,
            }
            if base is not None:
                row["stage_deltas"] = {k: var["stage_rates"][k] - base["stage_rates"][k] for k in var["stage_rates"]}
                if var["score"] is None or base["score"] is None:
                    row["moved_by_detail"] = "no headline score (denominator unspecified)"
                elif var["metric"] != base["metric"]:
                    # e.g. MAD vs 1 - MAD/7.7: two units, so a difference would mean nothing.
                    row["moved_by"] = "scoring"
                    row["moved_by_detail"] = (f"metric changed: {base['metric']} -> {var['metric']} "
                                              "(different scales; no delta)")
                else:
                    delta = var["score"] - base["score"]
                    row["delta"] = delta
                    row["delta_pp"] = None if lib else 100 * delta
                    row["better"] = None if abs(delta) < _EPS else (delta < 0 if lib else delta > 0)
                    stage, detail, parts = _moved_by(base, var, delta, row["same_as_base"])
                    row["moved_by"], row["moved_by_detail"], row["contributions"] = stage, detail, parts
            out.append(row)
    return out


def model_rankings(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Ranks per task and tau-b between tasks when a run has two or more models (base variant only).

    ``{}`` for a single-model run.  Same conventions as ``benchaudit compare`` (1 = best,
    direction-aware, ties averaged; tau-b for task pairs with at least 3 common models).
    """
    base = [r for r in results if not r.get("variant") and r.get("score") is not None]
    if len({r["model"] for r in base}) < 2:
        return {}
    # Imported only now: scipy.stats (via aggregate.stats) costs ~1 s of start-up, and a
    # single-model run never needs it.
    from pytest_benchaudit.aggregate.ranks import task_ranks, tau_b_table

    scores: dict[str, dict[str, float]] = {}
    lib: dict[str, bool] = {}
    for r in base:
        key = f"{r['benchmark']}.{r['task']}"
        scores.setdefault(key, {})[r["model"]] = float(r["score"])
        lib[key] = bool(r["lower_is_better"])
    return {"ranks": task_ranks(scores, lib), "tau_b": tau_b_table(scores, lib)}


def summary_document(results: list[dict[str, Any]], benchmarks: list[dict[str, Any]], gates: list[dict[str, Any]],
                     cards: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """What ``summary.json`` holds: ``results``, ``benchmarks``, ``gates``, ``variants``
    (:func:`variant_deltas`; an empty list when the run had no ``--vary``) and, when the run
    has two or more models, ``ranks`` and ``tau_b`` (:func:`model_rankings`)."""
    return {"results": results, "benchmarks": benchmarks, "gates": gates,
            "variants": variant_deltas(results, cards), **model_rankings(results)}
