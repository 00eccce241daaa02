"""Is an imported log one of our peer layers?  Matching a harness's requests to what a layer renders.

A log of ``inspect_evals/cybermetric_80`` is the ``inspect_evals`` layer of ``cybermetric`` /
``cm80`` only if what Inspect sent is what that layer sends: each sample's request is compared
with the layer's rendering of the same question (:func:`pytest_benchaudit.prompt.templates.render_request`,
the rendering a pytest run sends), field by field on what the log states.  The task name only
proposes candidates (:data:`CANDIDATES`); the requests decide.  A request that differs is a *near
miss*: :class:`LayerIndex.first_difference` names the first field that differs and the run
imports as a generic task.

What is compared (:func:`sent_fields`): for a chat request the messages (role and text) and every
generation parameter the log's request body holds (``temperature``, ``max_tokens``, ``stop``,
``seed``, ``top_p``, ...), for a completion request the prompt, the continuations of a
log-likelihood request, and the parameters the log states.  Numbers compare by value (lm-eval
writes ``temperature`` 0 where a layer holds 0.0, the same JSON number).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from pytest_benchaudit.common.errors import BenchauditError
from pytest_benchaudit.dataset.readers import load_questions, load_resources
from pytest_benchaudit.dataset.suites import SUITE_FILENAME, Suite, SuiteError, load_suite
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError
from pytest_benchaudit.pipeline.types import Question, Request
from pytest_benchaudit.prompt.templates import TemplateError, render_request
from pytest_benchaudit.scoring.tasks.inputs import Resources

__all__ = ["CANDIDATES", "LayerIndex", "candidates", "load_layer", "sent_fields"]

#: (harness, the harness's task name, its arguments that matter) -> (suite, task, layer) to try.
CANDIDATES: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {
    ("inspect", "inspect_evals/cybermetric_80", ""): [("cybermetric", "cm80", "inspect_evals")],
    ("inspect", "inspect_evals/cybermetric_500", ""): [("cybermetric", "cm500", "inspect_evals")],
    ("inspect", "inspect_evals/cybermetric_2000", ""): [("cybermetric", "cm2000", "inspect_evals")],
    ("inspect", "inspect_evals/mmlu_0_shot", "computer_security"): [("mmlu_cs", "mcq", "inspect_evals")],
    ("inspect", "inspect_evals/mmlu_5_shot", "computer_security"): [("mmlu_cs", "mcq", "inspect_evals_5shot")],
    ("lm-eval", "mmlu_computer_security", ""): [("mmlu_cs", "mcq", "lm_eval"), ("mmlu_cs", "mcq", "lm_eval_5shot")],
    ("lm-eval", "mmlu_computer_security_generative", ""): [("mmlu_cs", "mcq", "lm_eval_generative")],
}


def candidates(harness: str, task: str, subject: str = "") -> list[tuple[str, str, str]]:
    """The (suite, task, layer) a harness's task may be (bare Inspect names get the ``inspect_evals/`` prefix)."""
    names = [task] if "/" in task or harness != "inspect" else [task, f"inspect_evals/{task}"]
    out: list[tuple[str, str, str]] = []
    for name in names:
        out += CANDIDATES.get((harness, name, subject), [])
    return out


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def sent_fields(request: Request | dict[str, Any]) -> dict[str, JsonValue]:
    """What a request sends, flat: ``messages[i].role``, ``messages[i].content``, ``prompt``,
    ``continuations``, ``params.NAME`` (numbers as floats, so 0 and 0.0 are one value)."""
    data = request.model_dump(mode="json") if isinstance(request, Request) else request
    out: dict[str, JsonValue] = {}
    for i, message in enumerate(data.get("messages") or []):
        out[f"messages[{i}].role"] = message.get("role")
        out[f"messages[{i}].content"] = message.get("content")
    if data.get("prompt") is not None:
        out["prompt"] = data["prompt"]
    if data.get("continuations"):
        out["continuations"] = list(data["continuations"])
    for name, value in sorted((data.get("params") or {}).items()):
        out[f"params.{name}"] = [_number(v) for v in value] if isinstance(value, list) else _number(value)
    return out


@dataclass
class LayerIndex:
    """One candidate layer of one task, its questions rendered once and indexed by what they send."""

    suite: Suite
    task: str
    layer: str
    pipeline: Pipeline
    questions: list[Question]
    resources: Resources
    data_file: Path
    by_request: dict[str, Question] = field(default_factory=dict)
    rendered: dict[str, Request] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.suite.name}.{self.task}"

    def lookup(self, sent: dict[str, JsonValue], compared: tuple[str, ...]) -> Question | None:
        """The question whose rendering sends ``sent`` on the fields ``compared`` (None: none does)."""
        return self.by_request.get(_identity(sent, compared))

    def index(self, compared: tuple[str, ...]) -> None:
        self.by_request = {}
        for qid, request in self.rendered.items():
            fields = sent_fields(request)
            self.by_request.setdefault(_identity(fields, compared), self._question(qid))

    def _question(self, qid: str) -> Question:
        return next(q for q in self.questions if q.id == qid)

    def first_difference(self, sent: dict[str, JsonValue], compared: tuple[str, ...]) -> str:
        """The first field that differs between ``sent`` and the rendering of the question it is
        closest to (the one whose text its last message or prompt contains, else the first)."""
        text = str(sent.get("prompt") or next((v for k, v in reversed(sent.items()) if k.endswith(".content")), ""))
        near = next(
            (q for q in self.questions if q.text and q.text in text), self.questions[0] if self.questions else None
        )
        if near is None:
            return "the layer renders no question"
        ours = sent_fields(self.rendered[near.id])
        for name in sorted(set(ours) | set(sent), key=lambda n: (_order(n), n)):
            if not _compared(name, compared):
                continue
            mine, theirs = ours.get(name), sent.get(name)
            if mine != theirs:
                return f"question {near.id}: {name}: the layer sends {_show(mine)}, the log {_show(theirs)}" + _where(
                    mine, theirs
                )
        return f"question {near.id}: the same fields, but no single question's rendering matches"


def _order(name: str) -> int:
    return 0 if name.startswith("messages") else 1 if name in ("prompt", "continuations") else 2


def _compared(name: str, compared: tuple[str, ...]) -> bool:
    return any(name == c or name.startswith(c) for c in compared)


def _identity(fields: dict[str, JsonValue], compared: tuple[str, ...]) -> str:
    import json

    kept = {k: v for k, v in fields.items() if _compared(k, compared)}
    return json.dumps(kept, sort_keys=True, ensure_ascii=False)


def _show(value: JsonValue) -> str:
    if value is None:
        return "nothing"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _where(mine: JsonValue, theirs: JsonValue) -> str:
    """For two strings, where they part (a long prompt's difference is otherwise invisible)."""
    if not (isinstance(mine, str) and isinstance(theirs, str)):
        return ""
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    return f" (they part at character {at}: layer {mine[at : at + 30]!r}, log {theirs[at : at + 30]!r})"


def load_layer(suites_dir: Path, data_dir: Path, origin: str, bench: str, task: str, layer: str) -> LayerIndex | str:
    """The candidate layer rendered for every question, or why it cannot be (a missing suite or data)."""
    path = Path(suites_dir) / bench / SUITE_FILENAME
    if not path.is_file():
        return f"no suite {bench!r} under {suites_dir} (pass --suites-dir)"
    try:
        suite = load_suite(path)
        pipeline = suite.pipeline(task, layer)
        questions, data_file = load_questions(suite, task, data_dir, origin)
        shots = load_questions(suite, task, data_dir, origin, few_shot=True)[0] if suite.tasks[task].few_shot else []
        resources, _paths = load_resources(suite, task, data_dir, origin)
        template = suite.templates[pipeline.prompt.template]
        rendered = {q.id: render_request(pipeline, template, q, shots) for q in questions}
    except (BenchauditError, SuiteError, PipelineError, TemplateError, KeyError, OSError) as err:
        return f"{bench}.{task} under {layer!r} cannot be rendered here: {err}"
    return LayerIndex(suite, task, layer, pipeline, questions, resources, data_file, rendered=rendered)
