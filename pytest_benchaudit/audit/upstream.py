"""Upstream differences by what is sent: the requests two layers render, compared byte for byte.

Two layers can differ in an upstream field's *value* and still send the same bytes: AthenaBench's
``released`` and ``dataset_prompt`` templates are both ``user = "{prompt}"``, so switching the
template name changes nothing the model sees.  A field is therefore judged by the requests it
renders (:func:`pytest_benchaudit.prompt.templates.render_request`, the project's own rendering, and
:attr:`Request.identity`, the canonical JSON of the whole request), question by question:

- ``same_request``: setting the field to the target layer's value, on the stored pipeline and (the
  other way round) on the target pipeline, leaves every question's request byte-identical: not an
  upstream difference;
- ``no_effect``: the requests differ only in decoding parameters that do nothing under the others,
  ``top_p`` and ``seed`` when ``temperature`` is 0 on both sides (greedy decoding takes the most
  likely token: no sampling for a seed to fix, and the most likely token is inside every nucleus);
  listed with that reason, not as needing new generations;
- ``needs_generations``: some request differs otherwise.

Fields that are not part of a request (``dataset.*``: which questions; ``inference.reask_on_invalid``:
whether an unreadable answer is asked again) are judged by value.  When every request of the
two layers is byte-identical, every rendered field is ``same_request`` whatever its single-field
renders say.

Pure: the caller reads the suite and the questions (see :func:`pytest_benchaudit.audit.whole.upstream_differences`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import UPSTREAM_STAGES, Pipeline, PipelineError
from pytest_benchaudit.pipeline.types import Question, Request
from pytest_benchaudit.prompt.templates import Template, TemplateError, render_request

__all__ = [
    "FieldVerdict",
    "SentComparison",
    "compare_sent",
    "request_difference",
    "upstream_fields",
    "NOT_IN_REQUEST",
    "NO_EFFECT_AT_GREEDY",
]

#: Upstream fields that a rendered request does not carry, with what they decide instead.
NOT_IN_REQUEST = {
    "dataset": "decides which questions are asked, not how: not in a rendered request",
    "inference.reask_on_invalid": "decides whether an unreadable answer is asked again: not in a rendered request",
}
#: Request parameters with no effect when temperature is 0 (greedy decoding) on both sides.
NO_EFFECT_AT_GREEDY = ("top_p", "seed")
_GREEDY_REASON = (
    "temperature is 0 on both sides (greedy decoding): the request's {names} {verb} nothing the "
    "model generates (no sampling for a seed to fix; the most likely token is inside every top_p "
    "nucleus)"
)


@dataclass
class FieldVerdict:
    """One upstream field whose value differs between the stored and the target pipeline."""

    field: str
    stored: Any
    target: Any
    verdict: str  # same_request | no_effect | needs_generations
    reason: str
    n_questions: int = 0
    n_identical: int = 0  # questions whose request this field alone leaves byte-identical (stored side)


@dataclass
class SentComparison:
    """The fields of one task, each with its verdict, and the two layers' requests compared whole."""

    fields: list[FieldVerdict] = field(default_factory=list)
    n_questions: int = 0
    n_identical: int = 0  # questions whose request is byte-identical under the two layers

    def by_verdict(self, verdict: str) -> list[FieldVerdict]:
        return [f for f in self.fields if f.verdict == verdict]


def upstream_fields(stored: Mapping[str, Any], target: Mapping[str, Any]) -> list[str]:
    """The dataset/prompt/inference fields (flat card names) whose values differ."""
    return sorted(
        f for f in set(stored) | set(target) if f.split(".", 1)[0] in UPSTREAM_STAGES and stored.get(f) != target.get(f)
    )


def _not_in_request(name: str) -> str | None:
    for prefix, why in NOT_IN_REQUEST.items():
        if name == prefix or name.startswith(prefix + "."):
            return why
    return None


def request_difference(a: Request, b: Request) -> tuple[str, list[str]]:
    """(``same`` | ``no_effect`` | ``differs``, the parameter names that differ) of two requests."""
    if a.identity == b.identity:
        return "same", []
    names = sorted(k for k in set(a.params) | set(b.params) if a.params.get(k) != b.params.get(k))
    body_same = (a.mode, a.messages, a.prompt, a.adjustments, a.sample) == (
        b.mode,
        b.messages,
        b.prompt,
        b.adjustments,
        b.sample,
    )
    greedy = a.params.get("temperature") == 0 and b.params.get("temperature") == 0
    if body_same and names and greedy and all(n in NO_EFFECT_AT_GREEDY for n in names):
        return "no_effect", names
    return "differs", names


def _renders(
    pipeline: Pipeline, templates: Mapping[str, Template], questions: Sequence[Question], shots: Sequence[Question]
) -> list[Request]:
    name = pipeline.prompt.template
    if name not in templates:
        raise TemplateError(
            f"prompt.template {name!r} is not a template of {pipeline.benchmark}; templates: {', '.join(templates)}"
        )
    return [render_request(pipeline, templates[name], q, list(shots)) for q in questions]


def _compare(a: list[Request], b: list[Request]) -> tuple[int, str, list[str]]:
    """(identical count, the worst difference over the questions, the parameter names that differ)."""
    kinds = [request_difference(x, y) for x, y in zip(a, b)]
    worst = (
        "differs"
        if any(k == "differs" for k, _ in kinds)
        else ("no_effect" if any(k == "no_effect" for k, _ in kinds) else "same")
    )
    names = sorted({n for _k, ns in kinds for n in ns})
    return sum(k == "same" for k, _ in kinds), worst, names


def compare_sent(
    stored: Pipeline,
    target: Pipeline,
    templates: Mapping[str, Template],
    questions: Sequence[Question],
    shots: Sequence[Question] = (),
) -> SentComparison:
    """Each upstream field in which ``stored`` and ``target`` differ, judged by the requests rendered
    for ``questions``.  Raises :class:`TemplateError` or :class:`PipelineError` when a pipeline cannot
    render them (an unknown template, a few-shot count the data cannot supply)."""
    a_fields = _leaf_fields(stored)
    b_fields = _leaf_fields(target)
    names = upstream_fields(a_fields, b_fields)
    out = SentComparison(n_questions=len(questions))
    if not names:
        out.n_identical = len(questions)
        return out
    rendered = [n for n in names if _not_in_request(n) is None]
    base, goal = _renders(stored, templates, questions, shots), _renders(target, templates, questions, shots)
    # The two layers with the unrendered fields made equal: what the rendered fields change together.
    joint_target = _with(target, [(n, a_fields.get(n)) for n in names if n not in rendered])
    joint = _renders(joint_target, templates, questions, shots) if joint_target is not target else goal
    out.n_identical = sum(x.identity == y.identity for x, y in zip(base, goal))
    joint_same = all(x.identity == y.identity for x, y in zip(base, joint))
    n = len(questions)
    for name in names:
        why = _not_in_request(name)
        verdict = FieldVerdict(name, a_fields.get(name), b_fields.get(name), "needs_generations", "", n)
        if why is not None:
            verdict.reason = why
        elif joint_same:
            verdict.verdict, verdict.n_identical = "same_request", n
            verdict.reason = f"the two layers render byte-identical requests for all {n} questions"
        else:
            # Both contexts: the field alone on the stored pipeline, and reverted alone on the target one,
            # so a field that only matters next to another changed field is not called harmless.
            one = _renders(_with(stored, [(name, b_fields.get(name))]), templates, questions, shots)
            back = _renders(_with(target, [(name, a_fields.get(name))]), templates, questions, shots)
            same_a, kind_a, params_a = _compare(base, one)
            _same_b, kind_b, params_b = _compare(back, goal)
            verdict.n_identical = same_a
            kinds = {kind_a, kind_b}
            if kinds == {"same"}:
                verdict.verdict = "same_request"
                verdict.reason = f"renders byte-identical requests for all {n} questions"
            elif "differs" not in kinds:
                verdict.verdict = "no_effect"
                names_ = sorted(set(params_a) | set(params_b))
                verdict.reason = _GREEDY_REASON.format(
                    names=" and ".join(names_), verb="changes" if len(names_) == 1 else "change"
                )
            else:
                verdict.reason = f"changes the request of {n - same_a} of {n} questions" + (
                    f" (parameters: {', '.join(params_a)})" if params_a and kind_a == "differs" else ""
                )
        out.fields.append(verdict)
    return out


def _leaf_fields(pipeline: Pipeline) -> dict[str, Any]:
    return dict(pipeline.card()["fields"])


def _with(pipeline: Pipeline, changes: list[tuple[str, Any]]) -> Pipeline:
    """``pipeline`` with these flat fields set (a card's values are valid field values)."""
    if not changes:
        return pipeline
    try:
        return apply_overrides(pipeline, changes)
    except PipelineError as err:
        raise PipelineError(f"{pipeline.benchmark}.{pipeline.task}: {err}") from None
