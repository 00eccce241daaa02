"""Judge orchestration: when a pipeline wants the ``--judge`` model, what to ask it, and what its reply makes.

:func:`needs_judge` says whether a pipeline is judged at all: its rule is read by a judge
(``RuleInfo.reads == "judge"``, ``extraction.rule = judge``) or its metric is graded by one
(``MetricInfo.needs_judge``).  :func:`judge_answer` runs one answer through it:

- extraction: the strict rule of what the metric compares (one label, or a label set:
  :func:`~pytest_benchaudit.scoring.names.strict_rule`) cuts the answer text the judge
  reads; nothing to read is the rule's own invalid reading, no judge call; the judge's
  verdict is the prediction, ``NONE`` an invalid ``unparseable`` one;
- grading: the pipeline's rule reads the answer; the judge says CORRECT or INCORRECT.

An unreadable verdict or a failed call is an invalid ``judge_error`` with its reason.  The
caller sends the requests (``ask``: a request to the judge model -> its generation), so this
module does no I/O; whatever ``ask`` raises (a request ``--max-cost`` kept from being sent)
passes through.  The prompts and verdict parsing are :mod:`.judge_prompts`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pytest_benchaudit.pipeline.record_documents import JudgeCallRow
from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Extraction, Generation, Question, Request, Score
from pytest_benchaudit.scoring import judge_prompts
from pytest_benchaudit.scoring.declarations import Answers
from pytest_benchaudit.scoring.evaluate import RecordExtras
from pytest_benchaudit.scoring.extract import REASONING_MODES, extract
from pytest_benchaudit.scoring.metrics import METRIC_INFO
from pytest_benchaudit.scoring.names import metric_answers, rule_info, strict_rule

__all__ = ["Judged", "judge_answer", "judge_problem", "judge_record", "needs_judge"]

_DEFAULT_LABELS = ("A", "B", "C", "D")


@dataclass(frozen=True)
class Judged:
    """What the judge made of one answer: the extraction and/or score it decided (``None``: the
    rule / metric decides as usual) and ``extra``, the record's fields on the judge call."""

    extraction: Extraction | None = None
    score: Score | None = None
    extra: RecordExtras = field(default_factory=lambda: RecordExtras())


def needs_judge(pipeline: Pipeline) -> bool:
    """True when a judge model extracts (a rule that reads ``judge``) or grades (the metric)."""
    info = METRIC_INFO.get(pipeline.scoring.metric)
    return rule_info(pipeline.extraction.rule).reads == "judge" or bool(info is not None and info.needs_judge)


def judge_record(
    model: str,
    purpose: Literal["extraction", "grading"],
    version: str,
    reply: Generation,
    status: str,
    verdict: str | None,
) -> JudgeCallRow:
    """What a record keeps of one judge call (its token usage too: the usage table and --max-cost count it)."""
    return {
        "model": model,
        "purpose": purpose,
        "prompt_version": version,
        "raw_output": reply.text,
        "parse_status": status,
        "verdict": verdict,
        "error": reply.error,
        "usage": dict(reply.usage),
        "from_cache": reply.from_cache,
    }


def _unreadable(reply: Generation) -> str:
    return reply.error or f"unreadable judge verdict: {reply.text[:120]!r}"


def judge_answer(
    question: Question,
    pipeline: Pipeline,
    generation: Generation,
    judge_label: str,
    ask: Callable[[Request], Generation],
) -> Judged:
    """Ask the judge (``judge_label``, through ``ask``) about ``generation`` when ``pipeline`` wants it
    (see the module doc); a generation that failed, or a pipeline without a judge, asks nothing."""
    if not needs_judge(pipeline) or generation.error is not None:
        return Judged()
    reasoning = pipeline.extraction.reasoning
    labels = tuple(question.choices) or _DEFAULT_LABELS
    if rule_info(pipeline.extraction.rule).reads == "judge":
        answers: Answers = "labels" if metric_answers(pipeline.scoring.metric) == "labels" else "label"
        regex = extract(
            strict_rule(answers), generation, question, reasoning if reasoning in REASONING_MODES else "strip"
        )
        extra: RecordExtras = {"regex_prediction": regex.prediction}
        if not regex.answer_text.strip():  # nothing to read: empty / truncated / unclosed reasoning
            return Judged(regex, None, extra)
        reply = ask(judge_prompts.extraction_request(question, regex.answer_text, labels))
        answer, status = judge_prompts.parse_extraction(reply.text, labels) if reply.error is None else (None, "failed")
        extra["judge"] = judge_record(
            judge_label, "extraction", judge_prompts.EXTRACTION_PROMPT_VERSION, reply, status, answer
        )
        if answer is None:
            return Judged(
                Extraction(invalid_reason="judge_error", answer_text=regex.answer_text, detail=_unreadable(reply)),
                None,
                extra,
            )
        if answer == "NONE":
            return Judged(
                Extraction(
                    invalid_reason="unparseable",
                    answer_text=regex.answer_text,
                    detail="judge: the response commits to no option",
                ),
                None,
                extra,
            )
        return Judged(
            Extraction(prediction=answer, answer_text=regex.answer_text, detail=f"judge ({status})"), None, extra
        )
    # Grading: the rule reads the answer; the judge decides whether it is correct.
    read = extract(pipeline.extraction.rule, generation, question, reasoning)
    if not read.valid or read.prediction is None:
        return Judged(read)
    reply = ask(judge_prompts.grading_request(question, read.prediction))
    verdict, status = judge_prompts.parse_grading(reply.text) if reply.error is None else (None, "failed")
    extra = {
        "judge": judge_record(judge_label, "grading", judge_prompts.GRADING_PROMPT_VERSION, reply, status, verdict)
    }
    if verdict is None:
        # No score given: evaluate scores the invalid item at the pipeline's scoring.invalid_credit.
        return Judged(
            Extraction(invalid_reason="judge_error", answer_text=read.answer_text, detail=_unreadable(reply)),
            None,
            extra,
        )
    return Judged(read, Score(value=1.0 if verdict == "CORRECT" else 0.0, correct=verdict == "CORRECT"), extra)


def judge_problem(pipeline: Pipeline, judge_given: bool = False) -> str | None:
    """Why items of this pipeline cannot be scored without ``--judge`` (``judge_given``: it was given), or None."""
    if judge_given or not needs_judge(pipeline):
        return None
    what = (
        f"extraction.rule {pipeline.extraction.rule!r}"
        if rule_info(pipeline.extraction.rule).reads == "judge"
        else f"scoring.metric {pipeline.scoring.metric!r}"
    )
    return f"{what} needs an LLM judge (--judge SPEC); collected but never scored without one"
