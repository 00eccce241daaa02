"""Aggregation: records -> per task/model/variant results and per-benchmark scores.

Both denominators are always computed (``score_total`` over every item,
``score_valid`` over items with a readable answer); the pipeline's
``scoring.denominator`` only decides which one is the headline ``score``.
Stage rates are cumulative pass rates: the share of items that got through
inference, through extraction (valid), and that were correct.

Pure: no pytest, no I/O.  Works on record dicts, so it serves pytest runs and
offline re-scoring alike.  Each per-task result is built as a :class:`TaskResult` (the contract of
a ``summary.json`` ``results`` row, :mod:`.summary_documents`), checked once (:data:`.summary_documents.TASK_RESULT`)
and handed on as that row.

Task results and benchmark scores read the same rows and cards; how each ``--vary`` variant
moved a score, and which stage moved it, is :mod:`.deltas`' (its :func:`variant_deltas` is
the ``variants`` of :func:`summary_document`).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import JsonValue
from typing_extensions import TypedDict

from pytest_benchaudit.aggregate.deltas import reason_text, variant_deltas
from pytest_benchaudit.aggregate.intervals import clustered_interval, headline_interval, is_share_scores
from pytest_benchaudit.aggregate.repeat_stats import (
    REDUCERS,
    Reducer,
    clt_se,
    clustered_se,
    reduce_scores,
    retest_agreement,
    sampling_sd,
)
from pytest_benchaudit.aggregate.summary_documents import (
    TASK_RESULT,
    BenchmarkScore,
    GateResult,
    ModelRankings,
    SummaryDocument,
    TaskResult,
)
from pytest_benchaudit.pipeline.record_documents import Cards, PipelineCard, RecordRow
from pytest_benchaudit.pipeline.stages import is_unspecified
from pytest_benchaudit.pipeline.variants import card_for
from pytest_benchaudit.scoring.metrics import METRIC_INFO, invalid_score

# variant_deltas and reason_text live in .deltas; named here too, where callers have imported them from.
__all__ = [
    "TaskResult",
    "Summarizer",
    "summarize",
    "benchmark_scores",
    "confidence_interval",
    "group_key",
    "variant_deltas",
    "reason_text",
    "summary_document",
]


def group_key(rec: RecordRow) -> tuple[str, str, str, str]:
    return (rec["benchmark"], rec["task"], rec["model"], rec.get("variant", ""))


def confidence_interval(values: list[float], binary: bool) -> list[float] | None:
    """95% interval for a mean over questions treated as independent: Wilson for 0/1 values (a
    share, ``binary``), Student t otherwise (``None`` when there is no spread to measure).  The
    summary rows' intervals are :func:`.intervals.headline_interval`'s, which this wraps for callers
    that have a plain list of values.

    Wilson's closed form (the one ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``
    computes; the tests check they agree) needs no scipy import, which alone cost ~1.4 s of every
    run's start-up; the t quantile comes from ``scipy.special.stdtrit``, a much lighter import.
    """
    return headline_interval(values, share=binary and all(0.0 <= v <= 1.0 for v in values))[0]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _text(fields: Mapping[str, JsonValue], key: str, default: str) -> str:
    """A card field that holds a name (a metric, a denominator, a method), else ``default``."""
    value = fields.get(key, default)
    return value if isinstance(value, str) else default


def _fields(card: PipelineCard | Mapping[str, JsonValue] | None) -> Mapping[str, JsonValue]:
    fields = (card or {}).get("fields")
    return fields if isinstance(fields, dict) else {}


class _Head(TypedDict):
    """What a group's result takes from its first record (and the card's metric)."""

    benchmark: str
    task: str
    model: str
    variant: str
    pipeline: str
    pipeline_hash: str
    metric: str


class _Group:
    """What one benchmark x task x model x variant's result needs, in compact columns.

    Built record by record (:meth:`add`): counts, one float and one flag per record (the score,
    and whether it is valid), and the few per-record fields the card asks for (score extras, the
    ``aggregation.by`` value), never the record itself, so a run of any size is summarised in
    memory of ~10 bytes per record (``records.jsonl`` can be streamed through it).
    """

    __slots__ = (
        "first",
        "denominator",
        "credit",
        "by",
        "reducer",
        "pass_k",
        "scores",
        "valid",
        "correct",
        "n_correct",
        "inference_failed",
        "reasons",
        "extras",
        "breakdown",
        "question",
        "repeat",
        "cluster",
        "cluster_ids",
    )

    def __init__(self, first: RecordRow, card: PipelineCard | Mapping[str, JsonValue] | None) -> None:
        fields = _fields(card)
        self.first: _Head = {
            "benchmark": first["benchmark"],
            "task": first["task"],
            "model": first["model"],
            "variant": first.get("variant", ""),
            "pipeline": first["pipeline"],
            "pipeline_hash": first["pipeline_hash"],
            "metric": _text(fields, "scoring.metric", first.get("metric", "")),
        }
        self.denominator = _text(fields, "scoring.denominator", "unspecified")
        credit = fields.get("scoring.invalid_credit", 0.0)  # a card from before the field: no credit
        self.credit = float(credit) if isinstance(credit, (int, float)) and not isinstance(credit, bool) else 0.0
        by = fields.get("aggregation.by")
        self.by = by if isinstance(by, str) else None
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
        self.reasons: Counter[str] = Counter()
        self.extras: dict[str, tuple[array[float], bytearray]] = {}  # name -> (values, valid flags)
        self.breakdown: dict[str, tuple[array[float], bytearray]] = {}  # by-value -> (scores, valid flags)

    def _cluster(self, r: RecordRow) -> int:
        value = r.get("question_meta", {}).get(self.by) if self.by else None
        key = None if value is None else "\x1f".join(map(str, value)) if isinstance(value, list) else str(value)
        return self.cluster_ids.setdefault(key, len(self.cluster_ids))

    def add(self, r: RecordRow) -> None:
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
            self.reasons[r["invalid_reason"] or "unknown"] += 1
        for name, value in (r.get("score_extras") or {}).items():
            values, flags = self.extras.setdefault(name, (array("d"), bytearray()))
            values.append(float(value))
            flags.append(valid)
        if self.by:
            meta = r.get("question_meta", {}).get(self.by)
            for v in meta if isinstance(meta, list) else [meta]:
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
            return _Reduced(
                k=1,
                total=scores,
                clusters=clusters,
                valid=[v for v, ok in zip(scores, flags) if ok],
                valid_clusters=[c for c, ok in zip(clusters, flags) if ok],
                per_repeat_total=[],
                per_repeat_valid=[],
                verdicts=[],
            )
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
            total=[reduce(v) for v in per_slot],
            clusters=slot_cluster,
            valid=[reduce(valid[i]) for i in kept],
            valid_clusters=[slot_cluster[i] for i in kept],
            per_repeat_total=[sum(a) / len(a) for _, (a, _v) in sorted(by_repeat.items())],
            per_repeat_valid=[sum(v) / len(v) for _, (_a, v) in sorted(by_repeat.items()) if v],
            verdicts=verdicts,
        )

    def result(self) -> TaskResult:
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
        clusters = rep.valid_clusters if use_valid else rep.clusters
        # The interval's family follows the per-question scores (aggregate/intervals.py): a share's stays
        # in [0, 1].  Under the mean reducer a question's K records are the trials its score averages.
        share = is_share_scores(headline_values, lib)
        units = (n_valid if use_valid else n) if self.reducer == "mean" else len(headline_values)
        se = clt_se(headline_values) if headline is not None else None
        se_clustered = clustered_se(headline_values, clusters) if headline is not None and self.by else None
        ci, ci_method = headline_interval(headline_values, share, units) if headline is not None else (None, None)
        ci_clustered, ci_clustered_method = (
            clustered_interval(headline_values, clusters, share, units)
            if headline is not None and self.by
            else (None, None)
        )
        # What the invalid items scored, read from them (an old run keeps its own value), else what they would.
        invalid_scores = [s for s, ok in zip(all_scores, self.valid) if not ok]
        invalid_value = (
            sum(invalid_scores) / len(invalid_scores)
            if invalid_scores
            else invalid_score(info, self.credit)
            if info
            else None
        )
        result: TaskResult = {
            "benchmark": first["benchmark"],
            "task": first["task"],
            "model": first["model"],
            "variant": first["variant"],
            "pipeline": first["pipeline"],
            "pipeline_hash": first["pipeline_hash"],
            "metric": metric,
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
            "ci95": ci,
            "ci95_method": ci_method,
            "invalid_credit": self.credit,
            "invalid_score": invalid_value,
            "repeats": rep.k,
            "reducer": self.reducer,
            "n_questions": len(rep.total),
            "se": se,
            "se_clustered": se_clustered,
            "ci95_clustered": ci_clustered,
            "ci95_clustered_method": ci_clustered_method,
            "clustered_by": self.by,
            "n_groups": len(set(clusters)) if self.by and headline is not None else None,
            "sampling_sd": None
            if headline is None
            else sampling_sd(rep.per_repeat_valid if use_valid else rep.per_repeat_total),
            "retest_agreement": retest_agreement(rep.verdicts) if rep.k > 1 else None,
        }
        extras = {
            name: [v for v, ok in zip(values, flags) if ok or denominator != "valid"]
            for name, (values, flags) in self.extras.items()
        }
        extras = {name: vals for name, vals in extras.items() if vals}
        if extras:
            # Per-item numbers a benchmark reports beside the headline (e.g. TAA plausible),
            # averaged over the same denominator as the headline.
            result["extras"] = {name: sum(vals) / len(vals) for name, vals in extras.items()}
        if self.by:
            # Score per value of a question metadata field; a list value counts in each of its entries.
            result["breakdown"] = {
                self.by: {
                    key: {
                        "n": len(scores),
                        "score": _mean([s for s, ok in zip(scores, flags) if ok or denominator != "valid"]),
                    }
                    for key, (scores, flags) in sorted(self.breakdown.items())
                }
            }
        return TASK_RESULT.validate_python(result)


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

    def __init__(self, cards: Cards | None = None) -> None:
        self.cards = cards or {}
        self.groups: dict[tuple[str, str, str, str], _Group] = {}

    def add(self, rec: RecordRow) -> None:
        key = group_key(rec)
        group = self.groups.get(key)
        if group is None:
            bench, task, _model, variant = key
            group = self.groups[key] = _Group(rec, card_for(self.cards, bench, task, variant))
        group.add(rec)

    def results(self) -> list[TaskResult]:
        """One result per group, in first-seen order."""
        return [group.result() for group in self.groups.values()]


def summarize(records: Iterable[RecordRow], cards: Cards | None = None) -> list[TaskResult]:
    """One result per benchmark x task x model x variant, in first-seen order.

    ``cards`` maps ``"<benchmark>.<task>"`` (or ``"<benchmark>.<task>|<variant>"``)
    to the pipeline card the records were scored under.  ``records`` is read once and
    not kept (a generator over ``records.jsonl`` is summarised in constant memory per group).
    """
    summary = Summarizer(cards)
    for rec in records:
        summary.add(rec)
    return summary.results()


def benchmark_scores(results: list[TaskResult], cards: Cards | None = None) -> list[BenchmarkScore]:
    """Per benchmark x model x variant: the tasks' headline scores combined by ``aggregation.method``.

    ``micro`` pools items (each question weighs the same, under each task's
    denominator); ``macro`` is the unweighted mean of task scores.  If the tasks
    disagree on the method or leave it unspecified, the score is ``None`` and the
    reason is given: the project does not pick a method silently.
    """
    cards = cards or {}
    groups: dict[tuple[str, str, str], list[TaskResult]] = defaultdict(list)
    for r in results:
        groups[(r["benchmark"], r["model"], r["variant"])].append(r)
    out: list[BenchmarkScore] = []
    for (bench, model, variant), rs in groups.items():
        methods = {
            _text(_fields(card_for(cards, bench, r["task"], variant)), "aggregation.method", "unspecified") for r in rs
        }
        entry: BenchmarkScore = {
            "benchmark": bench,
            "model": model,
            "variant": variant,
            "tasks": [r["task"] for r in rs],
            "pipeline": rs[0]["pipeline"],
            "n": sum(r["n"] for r in rs),
            "score": None,
            "method": None,
            "note": "",
        }
        method = methods.pop() if len(methods) == 1 else None
        scores = [r["score"] for r in rs]
        present = [s for s in scores if s is not None]
        if len({r["lower_is_better"] for r in rs}) > 1:
            # An accuracy and an error (lower is better) cannot be averaged into one number.
            entry["note"] = "tasks mix higher-is-better and lower-is-better metrics: " + ", ".join(
                sorted({r["metric"] for r in rs})
            )
        elif method is None or is_unspecified(method):
            entry["note"] = "aggregation unspecified" if method else "tasks disagree on aggregation.method"
            if len(rs) == 1:  # one task: its score is the benchmark's, whatever the method
                entry["score"], entry["method"], entry["note"] = scores[0], "single task", ""
        elif len(present) < len(scores):
            entry["note"] = "a task has no headline score"
        elif method == "macro":
            entry["score"], entry["method"] = sum(present) / len(present), "macro"
        else:
            denominators = [r["n_valid"] if r["denominator"] == "valid" else r["n"] for r in rs]
            total = sum(denominators)
            entry["score"] = sum(s * d for s, d in zip(present, denominators)) / total if total else None
            entry["method"] = "micro"
        out.append(entry)
    return out


# -- single-field counterfactuals (--vary) ---------------------------------------------


def model_rankings(results: list[TaskResult]) -> ModelRankings:
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
        score = r["score"]
        assert score is not None  # base keeps the results with a score
        scores.setdefault(key, {})[r["model"]] = float(score)
        lib[key] = bool(r["lower_is_better"])
    return {"ranks": task_ranks(scores, lib), "tau_b": tau_b_table(scores, lib)}


def summary_document(
    results: list[TaskResult], benchmarks: list[BenchmarkScore], gates: list[GateResult], cards: Cards | None = None
) -> SummaryDocument:
    """What ``summary.json`` holds: ``results``, ``benchmarks``, ``gates``, ``variants``
    (:func:`variant_deltas`; an empty list when the run had no ``--vary``) and, when the run
    has two or more models, ``ranks`` and ``tau_b`` (:func:`model_rankings`)."""
    document: SummaryDocument = {
        "results": results,
        "benchmarks": benchmarks,
        "gates": gates,
        "variants": variant_deltas(results, cards),
    }
    rankings = model_rankings(results)
    if "ranks" in rankings:
        document["ranks"] = rankings["ranks"]
    if "tau_b" in rankings:
        document["tau_b"] = rankings["tau_b"]
    return document
