"""Prompt templates and how a pipeline turns a question into a :class:`Request`.

Templates come from suite configs, so they are data, not code: placeholders are
plain ``{name}`` substitutions from a fixed set (no attribute access, no format
specs, no expressions), and substituted values are never re-read as templates.
``{{`` and ``}}`` give literal braces.

Placeholders: ``{question}``, ``{options}`` (choices rendered with
``option_format`` and joined by ``option_separator``), ``{prompt}`` (a ready-made
prompt shipped in the dataset), ``{answer}`` (the gold label, for few-shot
examples), ``{labels}`` ("A, B, C, or D").

``option_format`` knows ``{label}``, ``{label_lower}`` ("a") and ``{text}``.  A few-shot exemplar
turn may be worded unlike the question it precedes (inspect_evals' MMLU 5-shot: exemplars list
``(a) ...`` under a template naming ``a,b,c,d``, the question ``A) ...``): ``shot_user`` and
``shot_option_format`` give the exemplar's wording; unset, exemplars use ``user`` and
``option_format``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from pytest_benchaudit.common.errors import ConfigError
from pytest_benchaudit.pipeline.record_documents import InferenceParams
from pytest_benchaudit.pipeline.stages import Pipeline, is_unspecified
from pytest_benchaudit.pipeline.types import Message, Question, Request
from pytest_benchaudit.prompt.loglikelihood_request import with_continuations

__all__ = ["Template", "TemplateError", "render_request", "PLACEHOLDERS", "inference_params"]

PLACEHOLDERS = frozenset({"question", "options", "prompt", "answer", "labels"})
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


class TemplateError(ConfigError):
    """A template uses an unknown placeholder or a value it needs is missing."""


class Shot(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    user: str
    assistant: str


class Template(BaseModel):
    """A prompt template as declared under ``[templates.NAME]`` in a suite config.

    Chat rendering: optional system message, fixed example turns, few-shot
    examples from the dataset (user turn + assistant answer), then the question.
    Completion rendering: ``header`` + each example (``user`` + ``answer``) +
    the question's ``user`` text.  ``header`` also opens the final chat turn.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str | None = None
    header: str = ""
    user: str = "{question}\n{options}"
    answer: str = "Answer: {answer}"
    fixed_shots: tuple[Shot, ...] = ()
    option_format: str = "{label}. {text}"
    option_separator: str = "\n"
    # SecEval's released code replaces newlines in question and options with spaces.
    flatten_newlines: bool = False
    # Exemplar turns worded unlike the question (None: as the question, ``user`` / ``option_format``).
    shot_user: str | None = None
    shot_option_format: str | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The dump is part of every card's hash: fields added later are left out while unset, so
        # a template written before they existed keeps its hash (runs stay resumable, comparable).
        data: dict[str, Any] = handler(self)
        for name in _LATER_FIELDS:
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @classmethod
    def from_config(cls, data: Mapping[str, object]) -> Template:
        """A ``[templates.NAME]`` table (as the suite's TOML holds it) validated into a template."""
        try:
            tpl = cls.model_validate(data)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            allowed = ", ".join(cls.model_fields)
            raise TemplateError(f"{where}: {first['msg']} (template keys: {allowed})") from None
        for text in (tpl.header, tpl.user, tpl.answer, tpl.system or "", tpl.shot_user or ""):
            _check_placeholders(text)
        return tpl

    def for_exemplars(self) -> Template:
        """This template as an exemplar turn is worded (``shot_user``, ``shot_option_format``)."""
        return self.model_copy(
            update={"user": self.shot_user or self.user, "option_format": self.shot_option_format or self.option_format}
        )


_LATER_FIELDS = ("shot_user", "shot_option_format")


def _check_placeholders(text: str) -> None:
    for m in _PLACEHOLDER.finditer(text):
        name = m.group(1)
        if name is not None and name not in PLACEHOLDERS:
            raise TemplateError(f"unknown placeholder {{{name}}}; allowed: {', '.join(sorted(PLACEHOLDERS))}")


def _substitute(text: str, values: dict[str, str | None]) -> str:
    def repl(m: re.Match[str]) -> str:
        token = m.group(0)
        if token in ("{{", "}}"):
            return token[0]
        value = values.get(m.group(1))
        if value is None:
            raise TemplateError(f"placeholder {token} has no value for this question")
        return value

    return _PLACEHOLDER.sub(repl, text)


def _values(tpl: Template, q: Question) -> dict[str, str | None]:
    labels = list(q.choices) or ["A", "B", "C", "D"]
    question = q.text
    options = tpl.option_separator.join(
        tpl.option_format.replace("{label_lower}", lab.lower()).replace("{label}", lab).replace("{text}", txt)
        for lab, txt in q.choices.items()
    )
    if tpl.flatten_newlines:
        question, options = question.replace("\n", " "), options.replace("\n", " ")
    return {
        "question": question,
        "options": options,
        "prompt": q.prompt,
        "answer": q.gold,
        "labels": ", ".join(labels[:-1]) + f", or {labels[-1]}" if len(labels) > 1 else labels[0],
    }


_DECODING: tuple[Literal["temperature", "top_p", "seed"], ...] = ("temperature", "top_p", "seed")


def inference_params(pipeline: Pipeline) -> InferenceParams:
    """The request parameters the pipeline specifies; unspecified ones are left out."""
    inf = pipeline.inference
    params: InferenceParams = {}
    for name in _DECODING:
        value = getattr(inf.decoding, name)
        if value is not None and not is_unspecified(value):
            params[name] = value
    if isinstance(inf.max_tokens, int):  # not UNSPECIFIED (the only other value the field takes)
        params["max_tokens"] = inf.max_tokens
    if not is_unspecified(inf.stop) and inf.stop:
        params["stop"] = list(inf.stop)
    if inf.decoding.top_logprobs is not None:
        params["top_logprobs"] = inf.decoding.top_logprobs
    return params


def render_request(
    pipeline: Pipeline,
    template: Template,
    question: Question,
    shots: list[Question] = (),  # type: ignore[assignment]
    *,
    min_max_tokens: int | None = None,
) -> Request:
    """Render ``question`` under ``pipeline`` into the request a model receives.

    ``shots`` are the dataset's few-shot examples; the first
    ``prompt.format.few_shot`` of them are used.  ``min_max_tokens`` is a
    provider limit: a smaller budget is raised to it and the change is listed in
    ``Request.adjustments`` so the record shows what was really asked.
    """
    fmt = pipeline.prompt.format
    k = 0 if is_unspecified(fmt.few_shot) else int(fmt.few_shot)
    if k > len(shots):
        raise TemplateError(f"prompt.format.few_shot={k} but only {len(shots)} few-shot examples are available")
    examples = list(shots)[:k]
    shot_tpl = template.for_exemplars()
    values = _values(template, question)  # once: the body and the header read the same values
    body = _substitute(template.user, values)
    params = inference_params(pipeline)
    adjustments: list[str] = []
    if min_max_tokens and "max_tokens" in params and params["max_tokens"] < min_max_tokens:
        adjustments.append(
            f"inference.max_tokens raised from {params['max_tokens']} to the provider minimum {min_max_tokens}"
        )
        params["max_tokens"] = min_max_tokens

    if fmt.mode == "completion":
        parts = [_substitute(template.header, values)]
        for ex in examples:
            vals = _values(shot_tpl, ex)
            parts.append(_substitute(shot_tpl.user, vals) + _substitute(template.answer, vals))
        parts.append(body)
        request = Request(mode="completion", prompt="".join(parts), params=params, adjustments=tuple(adjustments))
        return with_continuations(request, pipeline, question)  # inference.request = "loglikelihood"

    messages: list[Message] = []
    for shot in template.fixed_shots:
        messages += [Message(role="user", content=shot.user), Message(role="assistant", content=shot.assistant)]
    for ex in examples:
        vals = _values(shot_tpl, ex)
        messages += [
            Message(role="user", content=_substitute(shot_tpl.user, vals)),
            Message(role="assistant", content=_substitute(template.answer, vals)),
        ]
    header = _substitute(template.header, values) if template.header else ""
    messages.append(Message(role="user", content=header + body))
    system = template.system
    if system and fmt.system_role == "system":
        messages.insert(0, Message(role="system", content=system))
    elif system and fmt.system_role == "prepend_user":
        # CTI-Bench's Gemini/Replicate path: system text + " " + the first user text.
        first = messages[0]
        messages[0] = Message(role="user", content=f"{system} {first.content}")
    return Request(mode="chat", messages=tuple(messages), params=params, adjustments=tuple(adjustments))
