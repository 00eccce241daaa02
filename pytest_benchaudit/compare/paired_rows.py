"""Paired differences between the models of a task: compare.json's ``paired``, ``rank_ties`` and ``mde80``.

Two models asked the same questions are compared question by question (Miller 2024, "Adding
Error Bars to Evals", section 4): the per-question difference cancels what makes one question
hard for both, so its standard error is smaller than the two headline intervals suggest.

- **Per-question score**: a model's records of one question (its K repeats) reduced by the task's
  ``aggregation.reducer`` (``mean`` by default, :func:`pytest_benchaudit.aggregate.repeat_stats.reduce_scores`), over
  the records the headline counts: every record under ``scoring.denominator = total`` (an
  invalid answer scores what the card gives it), the valid ones under ``valid`` (a question
  without one is left out).  Their mean over questions is the run's headline.
- **Pairs**: only the questions both models have (same question id), ``n`` of them;
  ``model_a`` is the better of the two by headline (rank order, ties by name), and
  ``diff = mean(score_a - score_b)`` in the metric's own units: positive favours ``model_a``
  on a higher-is-better metric, negative on a lower-is-better one (``lower_is_better`` and
  ``favours`` say it in each row).
- **Test**: questions treated as independent (no ``aggregation.by``): exact McNemar when every
  per-question score of both is 0 or 1, else the paired t test.  Questions in groups (the task's
  ``aggregation.by``, the same field for both models): the standard error, the CI and the test are
  clustered by it (``clustered_t``: CR1 with t on G - 1 degrees of freedom), since a difference
  the questions of one group share is one observation, not one per question
  (:func:`pytest_benchaudit.aggregate.repeat_stats.paired_difference`).  A pair with under two common questions (or groups)
  has no test (``test`` null).  ``p_holm``: Holm's step-down adjustment over all the pairs of the
  task; ``significant`` is ``p_holm < 0.05``.
- **Disjoint questions**: two models without a common question are ranked against each other on
  different questions; the run set's notes say so (:func:`analyse_pairs`).
- **Rank ties**: models next to each other in a task's ranking whose pair is not significant.
- **mde80** per task: the smallest true difference a pair of the task detects at 5% (two-sided)
  with 80% power, from the root mean square of its pairs' SD of ``d`` and the fewest common questions.

Pure: no I/O.  :mod:`.document_builder` puts these into the compare document; ``diagnose``'s BA06
reads the same rows (:mod:`pytest_benchaudit.diagnose.order_checks`).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import JsonValue

from pytest_benchaudit.aggregate.repeat_stats import REDUCERS, Reducer, mde80, paired_difference, reduce_scores
from pytest_benchaudit.compare.compare_documents import MDE80Row, PairedRow, RankTie, SetPairs
from pytest_benchaudit.pipeline.record_documents import RecordRow

if TYPE_CHECKING:  # only an annotation: diagnose (order_checks.py) imports this module
    from pytest_benchaudit.compare.runsets import RunSet

__all__ = [
    "ALPHA",
    "MDE80Row",
    "ModelAnswers",
    "PairedRow",
    "RankTie",
    "SetPairs",
    "adjacent_ties",
    "analyse_pairs",
    "holm",
    "model_answers",
    "pair_grouping",
    "paired_rows",
    "question_clusters",
    "question_scores",
    "task_mde80",
]

ALPHA = 0.05  # the significance level of ``significant`` and of the rank ties


@dataclass(frozen=True)
class ModelAnswers:
    """One model's per-question scores on a task and its headline (the ranking's order)."""

    model: str
    headline: float
    scores: Mapping[tuple[str, int], float]  # (question id, occurrence) -> reduced score
    by: str | None = None  # the card's aggregation.by: the questions come in groups of this field
    clusters: Mapping[tuple[str, int], str | None] = field(default_factory=dict)  # question -> its group


def _reducer(fields: Mapping[str, JsonValue]) -> tuple[Reducer, int | None]:
    # As the summary reads them (aggregate/results.py): an unknown or missing reducer is the mean.
    value = fields.get("aggregation.reducer", "mean")
    reducer: Reducer = value if value in REDUCERS else "mean"
    k = fields.get("aggregation.pass_k")
    return reducer, k if isinstance(k, int) and not isinstance(k, bool) else None


def question_scores(
    records: Iterable[RecordRow], fields: Mapping[str, JsonValue], denominator: str, lower_is_better: bool
) -> dict[tuple[str, int], float]:
    """Per question, its repeats' scores reduced by the card's ``aggregation.reducer``.

    A question is its id and the occurrence of (id, repeat): a second record of one question and
    repeat (a merged file) is a question of its own, as in the summary.  Under a ``valid``
    denominator only valid records count and a question without one is left out.
    """
    reducer, pass_k = _reducer(fields)
    seen: Counter[tuple[str, int]] = Counter()
    values: dict[tuple[str, int], list[float]] = {}
    for r in records:
        qid, repeat = str(r.get("question_id")), int(r.get("repeat") or 0)
        slot = (qid, seen[(qid, repeat)])
        seen[(qid, repeat)] += 1
        if denominator == "valid" and not r.get("valid"):
            continue
        values.setdefault(slot, []).append(float(r["score"]))
    return {
        slot: v[0] if len(v) == 1 else reduce_scores(v, reducer, lower_is_better, pass_k) for slot, v in values.items()
    }


def question_clusters(records: Iterable[RecordRow], by: str) -> dict[tuple[str, int], str | None]:
    """Per question (as :func:`question_scores` keys them), its group: the value of ``question_meta[by]``
    as the summary reads it (a list value is one group of its entries; a missing value is a group of its own)."""
    seen: Counter[tuple[str, int]] = Counter()
    out: dict[tuple[str, int], str | None] = {}
    for r in records:
        qid, repeat = str(r.get("question_id")), int(r.get("repeat") or 0)
        slot = (qid, seen[(qid, repeat)])
        seen[(qid, repeat)] += 1
        value = r.get("question_meta", {}).get(by)
        out.setdefault(
            slot, None if value is None else "\x1f".join(map(str, value)) if isinstance(value, list) else str(value)
        )
    return out


def model_answers(
    model: str,
    headline: float,
    records: Iterable[RecordRow],
    fields: Mapping[str, JsonValue],
    denominator: str,
    lower_is_better: bool,
) -> ModelAnswers:
    rows = list(records)
    by = fields.get("aggregation.by")
    by = by if isinstance(by, str) and by else None
    return ModelAnswers(
        model,
        headline,
        question_scores(rows, fields, denominator, lower_is_better),
        by,
        question_clusters(rows, by) if by else {},
    )


def pair_grouping(a: ModelAnswers, b: ModelAnswers) -> str | None:
    """The field a pair's questions are grouped by: the one both cards name (or the only one named);
    ``None`` when neither names one, or they name different fields (the pair is then not clustered)."""
    if a.by and b.by:
        return a.by if a.by == b.by else None
    return a.by or b.by


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (in input order; ``None`` stays ``None`` and is not counted):
    sorted ascending, ``p_(i)`` becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``."""
    known = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(known)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for j, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
    return out


def _order(answers: Sequence[ModelAnswers], lower_is_better: bool) -> list[ModelAnswers]:
    """Best headline first (direction-aware), ties by model name."""
    sign = 1.0 if lower_is_better else -1.0
    return sorted(answers, key=lambda a: (sign * a.headline, a.model))


def paired_rows(task: str, answers: Sequence[ModelAnswers], lower_is_better: bool) -> list[PairedRow]:
    """Every pair of models of one task, the better by headline as ``model_a``; Holm over the task's pairs."""
    ordered = _order(answers, lower_is_better)
    rows: list[PairedRow] = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            common = sorted(set(a.scores) & set(b.scores))
            xa, xb = [a.scores[q] for q in common], [b.scores[q] for q in common]
            binary = all(v in (0.0, 1.0) for v in xa + xb)
            by = pair_grouping(a, b)
            groups = a.clusters if a.by == by else b.clusters
            stat = paired_difference(xa, xb, binary, [groups.get(q) for q in common] if by else None)
            diff = stat["diff"]
            sd = None if stat["n"] < 2 else statistics.stdev([x - y for x, y in zip(xa, xb)])
            favours = None if not diff else (a.model if (diff > 0) != lower_is_better else b.model)
            row = PairedRow(
                task=task,
                model_a=a.model,
                model_b=b.model,
                n=stat["n"],
                n_a=len(a.scores),
                n_b=len(b.scores),
                diff=diff,
                se=stat["se"],
                ci95=stat["ci95"],
                p_value=stat["p_value"],
                p_holm=None,
                significant=None,
                test=stat["test"],
                mde80=stat["mde80"],
                sd_diff=sd,
                lower_is_better=lower_is_better,
                favours=favours,
                clustered_by=by,
                n_groups=stat.get("n_groups"),
            )
            if "discordant" in stat and stat["n"] >= 2:
                row["discordant"] = stat["discordant"]
            rows.append(row)
    for row, adjusted in zip(rows, holm([r["p_value"] for r in rows])):
        row["p_holm"] = adjusted
        row["significant"] = None if adjusted is None else adjusted < ALPHA
    return rows


def adjacent_ties(rows: Sequence[PairedRow], answers: Sequence[ModelAnswers], lower_is_better: bool) -> list[RankTie]:
    """The neighbours in the task's ranking (best first) whose pair is not significant (or untestable)."""
    by_pair = {(r["model_a"], r["model_b"]): r for r in rows}
    ordered = _order(answers, lower_is_better)
    ties: list[RankTie] = []
    for a, b in zip(ordered, ordered[1:]):
        row = by_pair.get((a.model, b.model))
        if row is None or row.get("significant"):
            continue
        ties.append(
            RankTie(
                task=row["task"],
                better=a.model,
                worse=b.model,
                n=row["n"],
                diff=row["diff"],
                ci95=row["ci95"],
                p_value=row["p_value"],
                p_holm=row["p_holm"],
            )
        )
    return ties


def task_mde80(rows: Sequence[PairedRow]) -> MDE80Row | None:
    """The task's mde80 (module docstring); ``None`` without a pair."""
    if not rows:
        return None
    measured = [r for r in rows if r.get("sd_diff") is not None]  # pairs of at least two common questions
    if not measured:
        return MDE80Row(mde80=None, n=min(r["n"] for r in rows), sd_diff=None, pairs=len(rows))
    n = min(r["n"] for r in measured)
    sd = math.sqrt(sum(float(r["sd_diff"] or 0.0) ** 2 for r in measured) / len(measured))
    if any(r.get("clustered_by") for r in measured):
        # Clustered pairs: each row's mde80 rests on its clustered SE and t(G - 1); their root mean square.
        known = [float(r["mde80"]) for r in measured if r["mde80"] is not None]
        return MDE80Row(
            mde80=math.sqrt(sum(v * v for v in known) / len(known)) if known else None, n=n, sd_diff=sd, pairs=len(rows)
        )
    return MDE80Row(mde80=mde80(sd, n), n=n, sd_diff=sd, pairs=len(rows))


def analyse_pairs(
    rs: RunSet, scores: Mapping[str, Mapping[str, float]], lower_is_better: Mapping[str, bool]
) -> SetPairs:
    """The paired rows, rank ties and mde80 of every ranked task of a run set (``scores`` and
    ``lower_is_better`` as :func:`.oneset.analyse_set` gives them: only tasks with a direction,
    only models with a headline).  Adds to the run set's notes the pairs of models that share no
    question (ranked, and given win rates, on different questions) and the tasks whose models'
    cards group the questions by different fields (their pairs are not clustered)."""
    out = SetPairs(paired=[], rank_ties=[], mde80={})
    for key in sorted(scores):
        lib = bool(lower_is_better[key])
        answers = []
        for model, headline in sorted(scores[key].items()):
            result = rs.results[key][model]
            card = rs.cards.get((key, model))
            fields = card.get("fields", {}) if card else {}
            answers.append(
                model_answers(model, headline, rs.items[(key, model)], fields, str(result.get("denominator")), lib)
            )
        if len(answers) < 2:
            continue
        rows = paired_rows(key, answers, lib)
        disjoint = [f"{r['model_a']} ({r['n_a']}) and {r['model_b']} ({r['n_b']})" for r in rows if r["n"] == 0]
        if disjoint:
            rs.notes.append(
                f"{rs.label}: {key}: no common question between "
                + "; ".join(disjoint)
                + ": ranked (and given win rates) on different questions, with no paired test"
            )
        fields_by = sorted({a.by for a in answers if a.by})
        if len(fields_by) > 1:
            rs.notes.append(
                f"{rs.label}: {key}: the models' cards group the questions by different fields "
                f"({', '.join(fields_by)}): pairs across them are not clustered"
            )
        out["paired"] += rows
        out["rank_ties"] += adjacent_ties(rows, answers, lib)
        mde = task_mde80(rows)
        if mde is not None:
            out["mde80"][key] = mde
    return out
