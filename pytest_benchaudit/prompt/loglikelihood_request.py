"""The log-likelihood request (``inference.request = "loglikelihood"``): what lm-eval's
``multiple_choice`` tasks ask.

lm-evaluation-harness 0.4.13 scores a multiple-choice question by asking, for each option, the
log-likelihood of a continuation after the prompt: ``target_delimiter`` (one space) + the choice
(``doc_to_choice: ["A", "B", "C", "D"]`` in ``lm_eval/tasks/mmlu/default/_default_template_yaml``).
Its ``local-completions`` model (``lm_eval/models/openai_completions.py``) sends each pair as one
completion with ``prompt`` = context + continuation, ``echo: true``, ``logprobs`` and
``max_tokens``, and sums the echoed log-probabilities of the continuation's tokens.

:func:`with_continuations` turns a rendered completion request into that request: the
continuations listed on it and ``echo`` among its parameters (the record then shows what was sent);
:mod:`pytest_benchaudit.inference.loglikelihood` sends one completion per continuation.

Pure: no I/O.
"""

from __future__ import annotations

from pytest_benchaudit.pipeline.stages import Pipeline
from pytest_benchaudit.pipeline.types import Question, Request

__all__ = ["TARGET_DELIMITER", "continuations_of", "with_continuations"]

# lm-eval's default target_delimiter (lm_eval/api/task.py TaskConfig): put between the context and
# each choice, so the continuations are " A", " B", " C", " D".
TARGET_DELIMITER = " "


def continuations_of(question: Question) -> tuple[str, ...]:
    """The continuations scored for ``question``: the delimiter + each option label, in order."""
    labels = tuple(question.choices) or ("A", "B", "C", "D")
    return tuple(TARGET_DELIMITER + label for label in labels)


def with_continuations(request: Request, pipeline: Pipeline, question: Question) -> Request:
    """``request`` as ``pipeline`` asks it: unchanged for ``inference.request = "generate"``; for
    ``"loglikelihood"``, the question's continuations listed and ``echo: true`` added to the
    parameters (the prompt tokens' log-probabilities must come back with the answer)."""
    if pipeline.inference.request != "loglikelihood" or request.mode != "completion":
        return request
    fields = {name: getattr(request, name) for name in type(request).model_fields}
    # Built anew, not copied: a copy would keep a cached ``identity`` of the request without them.
    return Request(
        **{**fields, "continuations": continuations_of(question), "params": {**request.params, "echo": True}}
    )
