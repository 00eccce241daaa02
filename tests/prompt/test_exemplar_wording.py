"""Exemplar turns worded unlike the question: ``shot_user``, ``shot_option_format``, ``{label_lower}``.

inspect_evals' MMLU 5-shot lists an exemplar's options as ``(a) ...`` under an instruction naming
``a,b,c,d`` and the question's as ``A) ...`` under one naming ``A,B,C,D``: the template keys added
for it, checked on hand-written questions (every expected string written out here), in chat and
completion mode, plus the hash contract: a template that does not use them dumps as before.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from pytest_benchaudit.pipeline.stages import build_pipeline
from pytest_benchaudit.pipeline.types import Question
from pytest_benchaudit.prompt.templates import Template, TemplateError, render_request


def q(qid: str, text: str, gold: str = "B") -> Question:
    return Question(
        benchmark="b", task="t", id=qid, index=0, text=text, gold=gold, choices={"A": f"{qid}-one", "B": f"{qid}-two"}
    )


def pipe(mode: str = "chat", few_shot: int = 2, system_role: str = "system"):
    return build_pipeline(
        "test",
        "b",
        "t",
        {"prompt": {"template": "x", "format": {"mode": mode, "system_role": system_role, "few_shot": few_shot}}},
    )


TEMPLATE = Template.from_config(
    {
        "system": "About things.",
        "user": "Pick one of A,B.\n\n{question}\n\n{options}",
        "shot_user": "Pick one of a,b.\n\n{question}\n\n{options}",
        "shot_option_format": "({label_lower}) {text}",
        "option_format": "{label}) {text}",
        "answer": "Answer: {answer}",
    }
)
SHOTS = [q("s1", "First shot?", "A"), q("s2", "Second shot?", "B")]


def test_chat_exemplars_use_their_own_wording_and_the_question_its_own():
    request = render_request(pipe(), TEMPLATE, q("q", "The question?"), SHOTS)
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "About things."),
        ("user", "Pick one of a,b.\n\nFirst shot?\n\n(a) s1-one\n(b) s1-two"),
        ("assistant", "Answer: A"),
        ("user", "Pick one of a,b.\n\nSecond shot?\n\n(a) s2-one\n(b) s2-two"),
        ("assistant", "Answer: B"),
        ("user", "Pick one of A,B.\n\nThe question?\n\nA) q-one\nB) q-two"),
    ]


def test_completion_exemplars_use_their_own_wording():
    tpl = TEMPLATE.model_copy(update={"system": None, "header": "H\n", "answer": " {answer}\n"})
    request = render_request(pipe("completion", 1, "none"), tpl, q("q", "Q?"), SHOTS)
    assert (
        request.prompt
        == "H\nPick one of a,b.\n\nFirst shot?\n\n(a) s1-one\n(b) s1-two A\nPick one of A,B.\n\nQ?\n\nA) q-one\nB) q-two"
    )


def test_without_the_keys_exemplars_are_worded_as_the_question():
    plain = Template.from_config({"user": "{question}\n{options}", "option_format": "{label_lower}) {text}"})
    request = render_request(pipe(few_shot=1), plain, q("q", "Q?"), SHOTS)
    assert [m.content for m in request.messages] == [
        "First shot?\na) s1-one\nb) s1-two",
        "Answer: A",
        "Q?\na) q-one\nb) q-two",
    ]


def test_a_bad_placeholder_in_shot_user_fails_at_load():
    with pytest.raises(TemplateError, match="unknown placeholder {letters}"):
        Template.from_config({"shot_user": "{question} {letters}"})


def test_a_template_without_the_new_keys_dumps_and_hashes_as_before():
    # The dump is in every card's hash: the keys are left out while unset (old runs stay comparable).
    old = {
        "system": "S",
        "header": "",
        "user": "{question}\n{options}",
        "answer": "Answer: {answer}",
        "fixed_shots": [],
        "option_format": "{label}. {text}",
        "option_separator": "\n",
        "flatten_newlines": False,
    }
    tpl = Template.from_config({"system": "S"})
    assert tpl.model_dump(mode="json") == old
    assert (
        hashlib.sha256(json.dumps(tpl.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
        == hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()
    )
    used = TEMPLATE.model_dump(mode="json")
    assert used["shot_user"].startswith("Pick one of a,b.") and used["shot_option_format"] == "({label_lower}) {text}"
