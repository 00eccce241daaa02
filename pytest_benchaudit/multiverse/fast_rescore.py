"""A task's scores under every specification, from its stored records, each reading made once.

``benchaudit rescore RUN --set F=V ...`` re-runs extraction and scoring on every record, then
aggregates.  Across a multiverse most of that work repeats: two specifications that differ only in
the denominator or the credit read the same answers.  :class:`TaskScorer` therefore

1. rebuilds each record's question and generation once;
2. makes each distinct reading once per record: a rule under a reasoning mode
   (:func:`pytest_benchaudit.scoring.extract.extract`, as ``evaluate`` calls it); ``strip`` reuses
   ``keep``'s reading wherever the text holds no ``<think>`` tag (the rule then reads the same text);
3. scores each (reading, metric) once per record (:func:`pytest_benchaudit.scoring.metrics.score_item`
   with no credit: a prediction the metric cannot read turns invalid, as in a rescore);
4. combines credits, denominators and reducers arithmetically: an invalid record scores
   :func:`~pytest_benchaudit.scoring.metrics.invalid_score` at the specification's credit, the
   headline is the mean over the records the denominator counts, in record order, exactly as
   :mod:`pytest_benchaudit.aggregate.results` computes it; questions asked more than once go through
   :func:`~pytest_benchaudit.aggregate.results.summarize` itself (reducers, slots).

So a specification's score is the score ``rescore --set`` gives (tests/multiverse checks it on the
published runs and a toy run).  The per-question scores a paired test reads come from
:func:`pytest_benchaudit.compare.paired_rows.model_answers`, as in ``compare``.

Pure: no I/O (the resources a metric reads are handed in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from pydantic import JsonValue

from pytest_benchaudit.aggregate.results import summarize
from pytest_benchaudit.compare.paired_rows import ModelAnswers, model_answers
from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.pipeline.types import INVALID_STAGE, Extraction, Generation, InvalidReason, Question
from pytest_benchaudit.rescore.records import record_generation, record_question
from pytest_benchaudit.scoring.extract import extract, strip_reasoning
from pytest_benchaudit.scoring.metrics import METRIC_INFO, invalid_score, score_item
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["Cell", "CellScore", "TaskScorer"]


@dataclass
class Cell:
    """One model's records of one task under one set of generations, and the card they were scored under."""

    model: str
    generations: str  # the generation set's label ("" when the task has one)
    card: PipelineCard
    records: list[RecordRow]


@dataclass(frozen=True)
class CellScore:
    """A cell under one specification: its headline and the per-question scores of a paired test."""

    headline: float | None
    answers: ModelAnswers | None  # None without a headline
    denominator: str
    lower_is_better: bool


@dataclass(frozen=True)
class _Scored:
    """One (reading, metric) of a cell: per record, valid, the valid score (0.0 where invalid), correct,
    and the invalid reason (for the summary of repeated questions)."""

    valid: bytes
    values: list[float]
    correct: bytes
    reasons: list[InvalidReason | None]


class _Prepared:
    """A cell's records rebuilt once: questions, generations, and whether stripping changes the text."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self.questions: list[Question] = [record_question(r) for r in cell.records]
        self.generations: list[Generation] = [record_generation(r) for r in cell.records]
        self.strip_differs = [strip_reasoning(g.text)[0] != g.text for g in self.generations]
        self.repeated = any(int(r.get("repeat") or 0) for r in cell.records)
        self.keys: list[dict[str, JsonValue]] = [
            {
                "question_id": r["question_id"],
                "repeat": int(r.get("repeat") or 0),
                "question_meta": r.get("question_meta") or {},
            }
            for r in cell.records
        ]


class TaskScorer:
    """The cells of one task, scored under any specification (module docstring)."""

    def __init__(self, cells: Sequence[Cell], resources: Callable[[str], Resources]) -> None:
        self.cells = [_Prepared(c) for c in cells]
        self._resources = resources
        self._readings: dict[tuple[int, str, str], list[Extraction]] = {}
        self._scored: dict[tuple[int, str, str, str], _Scored] = {}
        self._cell_scores: dict[tuple[object, ...], CellScore] = {}
        self.extractions = 0  # records read by a rule (the bench compares it with a rescore's one per record)

    def _reading(self, i: int, rule: str, reasoning: str) -> list[Extraction]:
        key = (i, rule, reasoning)
        found = self._readings.get(key)
        if found is not None:
            return found
        cell = self.cells[i]
        other = self._readings.get((i, rule, "keep" if reasoning == "strip" else "strip"))
        if other is not None:
            # keep and strip read the same text wherever it holds no <think> tag: only the others are read again
            found = [
                extract(rule, g, q, reasoning) if differs else ex
                for g, q, differs, ex in zip(cell.generations, cell.questions, cell.strip_differs, other)
            ]
            self.extractions += sum(cell.strip_differs)
        else:
            found = [extract(rule, g, q, reasoning) for g, q in zip(cell.generations, cell.questions)]
            self.extractions += len(found)
        self._readings[key] = found
        return found

    def _score(self, i: int, rule: str, reasoning: str, metric: str) -> _Scored:
        key = (i, rule, reasoning, metric)
        found = self._scored.get(key)
        if found is not None:
            return found
        cell = self.cells[i]
        resources = self._resources(metric)
        valid, values, correct = bytearray(), [], bytearray()
        reasons: list[InvalidReason | None] = []
        for extraction, question in zip(self._reading(i, rule, reasoning), cell.questions):
            read, score = score_item(metric, extraction, question, resources, 0.0)
            valid.append(read.valid)
            values.append(score.value if read.valid else 0.0)
            correct.append(score.correct)
            reasons.append(read.invalid_reason)
        found = self._scored[key] = _Scored(bytes(valid), values, bytes(correct), reasons)
        return found

    def score(self, i: int, fields: Mapping[str, JsonValue]) -> CellScore:
        """Cell ``i`` under the flat downstream ``fields`` (its stored card's, the specification's over them)."""
        rule, reasoning = str(fields["extraction.rule"]), str(fields["extraction.reasoning"])
        metric, denominator = str(fields["scoring.metric"]), str(fields["scoring.denominator"])
        credit = float(cast(float, fields.get("scoring.invalid_credit") or 0.0))
        info = METRIC_INFO[metric]
        scored = self._score(i, rule, reasoning, metric)
        invalid = invalid_score(info, credit)
        # Specifications that read the same scores (a credit under "valid", or where nothing is invalid) share one.
        counted = invalid if denominator == "total" and not all(scored.valid) else None
        memo = (
            i,
            rule,
            reasoning,
            metric,
            denominator,
            counted,
            fields.get("aggregation.reducer"),
            fields.get("aggregation.pass_k"),
            fields.get("aggregation.by"),
        )
        if memo in self._cell_scores:
            return self._cell_scores[memo]
        values = [v if ok else invalid for v, ok in zip(scored.values, scored.valid)]
        cell = self.cells[i]
        if cell.repeated:
            headline = self._summarized(cell, fields, scored, values)
        else:
            # aggregate/results.py: the mean of the records' scores in record order (valid ones under "valid")
            xs = [v for v, ok in zip(values, scored.valid) if ok] if denominator == "valid" else values
            headline = sum(xs) / len(xs) if xs and denominator in ("total", "valid") else None
        if headline is None:
            found = CellScore(None, None, denominator, info.lower_is_better)
        else:
            rows = [{**key, "score": v, "valid": bool(ok)} for key, v, ok in zip(cell.keys, values, scored.valid)]
            answers = model_answers(
                cell.cell.model, headline, cast(list[RecordRow], rows), fields, denominator, info.lower_is_better
            )
            found = CellScore(headline, answers, denominator, info.lower_is_better)
        self._cell_scores[memo] = found
        return found

    def _summarized(
        self, cell: _Prepared, fields: Mapping[str, JsonValue], scored: _Scored, values: list[float]
    ) -> float | None:
        """The headline of a cell whose questions were asked more than once: the summary's own code."""
        head = cell.cell.records[0]
        rows = [
            {
                **key,
                "benchmark": head["benchmark"],
                "task": head["task"],
                "model": head["model"],
                "variant": "",
                "pipeline": "multiverse",
                "pipeline_hash": "",
                "metric": fields["scoring.metric"],
                "score": v,
                "valid": bool(ok),
                "correct": bool(c),
                "invalid_reason": why,
                "invalid_stage": INVALID_STAGE.get(why) if why else None,
                "score_extras": {},
            }
            for key, v, ok, c, why in zip(cell.keys, values, scored.valid, scored.correct, scored.reasons)
        ]
        card = cast(PipelineCard, {"fields": dict(fields)})
        (result,) = summarize(cast(list[RecordRow], rows), {f"{head['benchmark']}.{head['task']}": card})
        return result["score"]
