"""Tests for pytest_benchaudit.prompt.templates: template placeholders, rendering into chat / completion
requests, system-role handling, few-shot examples, inference parameters and provider
adjustments; plus the exact released prompts of the four suites rendered from the real data
(``BENCHAUDIT_DATA``; skipped when unset)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from pytest_benchaudit.dataset.readers import DATA_ENV, load_questions
from pytest_benchaudit.dataset.suites import Suite, load_suite
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import build_pipeline, parse_override
from pytest_benchaudit.pipeline.types import Message, Question, Request
from pytest_benchaudit.prompt.templates import (
    PLACEHOLDERS,
    Template,
    TemplateError,
    inference_params,
    render_request,
)

SUITES_DIR = Path(__file__).resolve().parents[2] / "suites"


def q(text="What is 2+2?", choices=None, gold="B", prompt=None, qid="1") -> Question:
    return Question(
        benchmark="b",
        task="t",
        id=qid,
        index=0,
        text=text,
        choices={"A": "3", "B": "4", "C": "5", "D": "22"} if choices is None else choices,
        gold=gold,
        prompt=prompt,
    )


def pipe(mode="chat", system_role="system", few_shot=0, **inference):
    return build_pipeline(
        "test",
        "b",
        "t",
        {
            "prompt": {"template": "x", "format": {"mode": mode, "system_role": system_role, "few_shot": few_shot}},
            "inference": inference,
        },
    )


def tpl(**kw) -> Template:
    return Template.from_config(kw)


# =========================================================================== Template / placeholders


def test_placeholder_set():
    assert PLACEHOLDERS == {"question", "options", "prompt", "answer", "labels"}


@pytest.mark.parametrize(
    "bad",
    [
        "{question.__class__}",
        "{question.__class__.__mro__}",
        "{question[0]}",
        "{question!r}",
        "{question:>20}",
        "{0}",
        "{}",
        "{ question }",
        "{bogus}",
    ],
)
def test_template_rejects_non_plain_placeholders(bad):
    with pytest.raises(TemplateError, match=r"unknown placeholder") as exc:
        tpl(user=f"Q: {bad}")
    assert bad in str(exc.value)


@pytest.mark.parametrize("field", ["system", "header", "answer"])
def test_placeholder_check_covers_all_text_fields(field):
    with pytest.raises(TemplateError, match=r"unknown placeholder \{nope\}"):
        tpl(**{field: "x {nope}"})


def test_attribute_access_rejected_even_without_from_config():
    # A Template built directly skips the config check; rendering still refuses the placeholder.
    t = Template(user="{question.__class__}")
    with pytest.raises(TemplateError, match=r"\{question\.__class__\} has no value"):
        render_request(pipe(), t, q())


def test_literal_braces():
    t = tpl(user="{{json}}: {{\"answer\": \"{labels}\"}} {question}", option_format="{label}) {text}")
    req = render_request(pipe(), t, q())
    assert req.messages[-1].content == '{json}: {"answer": "A, B, C, or D"} What is 2+2?'


def test_double_braces_around_placeholder_name_are_literal():
    req = render_request(pipe(), tpl(user="{{question}}"), q())
    assert req.messages[-1].content == "{question}"


def test_substituted_values_are_not_reread_as_templates():
    question = q(text="Is {options} or {{x}} or {question.__class__} safe?", choices={"A": "{answer}", "B": "}{"})
    req = render_request(pipe(), tpl(user="{question}\n{options}"), question)
    assert req.messages[-1].content == "Is {options} or {{x}} or {question.__class__} safe?\nA. {answer}\nB. }{"


def test_missing_value_for_placeholder():
    with pytest.raises(TemplateError, match=r"placeholder \{prompt\} has no value for this question"):
        render_request(pipe(), tpl(user="{prompt}"), q(prompt=None))


def test_labels_and_default_option_format():
    req = render_request(pipe(), tpl(user="{options}|{labels}"), q())
    assert req.messages[-1].content == "A. 3\nB. 4\nC. 5\nD. 22|A, B, C, or D"
    two = render_request(pipe(), tpl(user="{labels}"), q(choices={"A": "x", "B": "y"}))
    assert two.messages[-1].content == "A, or B"
    one = render_request(pipe(), tpl(user="{labels}"), q(choices={"A": "x"}))
    assert one.messages[-1].content == "A"
    none = render_request(pipe(), tpl(user="{labels}"), q(choices={}))
    assert none.messages[-1].content == "A, B, C, or D"


def test_flatten_newlines_applies_to_question_and_options_only():
    t = tpl(
        user="Q: {question}\n{options}", option_format="{label}: {text}", option_separator=" ", flatten_newlines=True
    )
    req = render_request(pipe(), t, q(text="line1\nline2", choices={"A": "a\nb", "B": "c"}))
    assert req.messages[-1].content == "Q: line1 line2\nA: a b B: c"


# =========================================================================== chat rendering


def test_chat_with_system_message():
    t = tpl(system="Be brief.", user="{question}")
    req = render_request(pipe(system_role="system"), t, q())
    assert req.mode == "chat" and req.prompt is None
    assert req.messages == (Message(role="system", content="Be brief."), Message(role="user", content="What is 2+2?"))


def test_system_role_prepend_user_glues_system_and_user():
    t = tpl(system="You are an expert.", user="{question}")
    req = render_request(pipe(system_role="prepend_user"), t, q())
    assert req.messages == (Message(role="user", content="You are an expert. What is 2+2?"),)


def test_system_role_prepend_user_goes_into_first_user_turn():
    t = tpl(system="SYS", user="{question}", fixed_shots=[{"user": "ex?", "assistant": "Answer: A"}])
    req = render_request(pipe(system_role="prepend_user"), t, q())
    assert [m.role for m in req.messages] == ["user", "assistant", "user"]
    assert req.messages[0].content == "SYS ex?"
    assert req.messages[2].content == "What is 2+2?"


def test_system_role_none_drops_system_text():
    t = tpl(system="SYS", user="{question}")
    req = render_request(pipe(system_role="none"), t, q())
    assert req.messages == (Message(role="user", content="What is 2+2?"),)
    assert all("SYS" not in m.content for m in req.messages)


def test_prepend_user_via_override():
    base = pipe(system_role="system")
    changed = apply_overrides(base, [parse_override("prompt.format.system_role=prepend_user")])
    req = render_request(changed, tpl(system="S", user="{question}"), q())
    assert req.messages == (Message(role="user", content="S What is 2+2?"),)


def test_chat_header_opens_the_final_turn():
    req = render_request(pipe(), tpl(header="Solve: ", user="{question}"), q())
    assert req.messages[-1].content == "Solve: What is 2+2?"


def test_chat_fixed_shots_then_dataset_few_shot_then_question():
    t = tpl(user="{question}", answer="Answer: {answer}", fixed_shots=[{"user": "fixed?", "assistant": "F"}])
    shots = [q(text="s1", gold="A"), q(text="s2", gold="C"), q(text="s3", gold="D")]
    req = render_request(pipe(few_shot=2), t, q(), shots)
    assert [(m.role, m.content) for m in req.messages] == [
        ("user", "fixed?"),
        ("assistant", "F"),
        ("user", "s1"),
        ("assistant", "Answer: A"),
        ("user", "s2"),
        ("assistant", "Answer: C"),
        ("user", "What is 2+2?"),
    ]


def test_few_shot_larger_than_available_raises():
    with pytest.raises(TemplateError, match=r"few_shot=3 but only 2 few-shot examples are available"):
        render_request(pipe(few_shot=3), tpl(), q(), [q(), q()])
    with pytest.raises(TemplateError, match=r"few_shot=1 but only 0"):
        render_request(pipe(few_shot=1), tpl(), q())


def test_few_shot_unspecified_uses_no_examples():
    p = build_pipeline("x", "b", "t", {"prompt": {"format": {"mode": "chat"}}})
    req = render_request(p, tpl(user="{question}"), q(), [q(text="shot")])
    assert req.messages == (Message(role="user", content="What is 2+2?"),)


# =========================================================================== completion rendering


def test_completion_header_examples_question():
    t = tpl(header="H\n\n", user="{question}\n{options}\nAnswer:", answer=" {answer}\n\n")
    shots = [q(text="s1", gold="A", choices={"A": "x", "B": "y"})]
    req = render_request(
        pipe(mode="completion", system_role="none", few_shot=1), t, q(choices={"A": "3", "B": "4"}), shots
    )
    assert req.mode == "completion" and req.messages == ()
    assert req.prompt == "H\n\ns1\nA. x\nB. y\nAnswer: A\n\nWhat is 2+2?\nA. 3\nB. 4\nAnswer:"


def test_completion_ignores_system_text():
    req = render_request(pipe(mode="completion", system_role="system"), tpl(system="SYS", user="{question}"), q())
    assert req.prompt == "What is 2+2?"


# =========================================================================== parameters


def test_params_only_specified_fields():
    p = pipe(decoding={"temperature": 0.0, "top_p": "unspecified", "seed": None}, max_tokens=7, stop=["\n", "Q:"])
    assert inference_params(p) == {"temperature": 0.0, "max_tokens": 7, "stop": ["\n", "Q:"]}
    req = render_request(p, tpl(), q())
    assert req.params == {"temperature": 0.0, "max_tokens": 7, "stop": ["\n", "Q:"]}
    assert req.adjustments == ()


def test_params_empty_when_nothing_specified():
    assert render_request(pipe(), tpl(), q()).params == {}
    assert inference_params(pipe(stop=[])) == {}  # an empty stop list is not sent


def test_params_top_logprobs_and_seed():
    p = pipe(decoding={"temperature": 0.0, "top_p": 1.0, "seed": 42, "top_logprobs": 100}, max_tokens=1)
    assert inference_params(p) == {"temperature": 0.0, "top_p": 1.0, "seed": 42, "max_tokens": 1, "top_logprobs": 100}


def test_min_max_tokens_raises_budget_and_records_adjustment():
    req = render_request(pipe(max_tokens=5), tpl(), q(), min_max_tokens=16)
    assert req.params["max_tokens"] == 16
    assert req.adjustments == ("inference.max_tokens raised from 5 to the provider minimum 16",)


@pytest.mark.parametrize(("max_tokens", "minimum"), [(16, 16), (2048, 16), ("unspecified", 16), (5, None), (5, 0)])
def test_min_max_tokens_no_adjustment(max_tokens, minimum):
    req = render_request(pipe(max_tokens=max_tokens), tpl(), q(), min_max_tokens=minimum)
    assert req.adjustments == ()
    if max_tokens == "unspecified":
        assert "max_tokens" not in req.params
    else:
        assert req.params["max_tokens"] == max_tokens


def test_min_max_tokens_in_completion_mode():
    req = render_request(pipe(mode="completion", max_tokens=1), tpl(user="{question}"), q(), min_max_tokens=16)
    assert req.params["max_tokens"] == 16
    assert len(req.adjustments) == 1 and "from 1 to the provider minimum 16" in req.adjustments[0]


def test_request_round_trips_through_json():
    req = render_request(pipe(max_tokens=5), tpl(system="S"), q(), min_max_tokens=16)
    assert Request.model_validate(json.loads(req.model_dump_json())) == req


# =========================================================================== released prompts on real data


def load(data_dir: Path, name: str, task: str, few_shot: bool = False) -> tuple[Suite, list[Question], Path]:
    s = load_suite(SUITES_DIR / name / "suite.toml")
    spec = s.tasks[task]
    filename = spec.few_shot["file"] if few_shot else spec.data["file"]
    if not (data_dir / s.data_folder / filename).is_file():
        pytest.skip(f"real benchmark data file missing: {s.data_folder}/{filename} under ${DATA_ENV}")
    questions, path = load_questions(s, task, data_dir, f"${DATA_ENV}", few_shot=few_shot)
    return s, questions, path


def released(s: Suite, task: str, layer: str = "released"):
    p = s.pipeline(task, layer)
    return p, s.templates[p.prompt.template]


SECEVAL_INSTRUCTION = (
    "Below are multiple-choice questions concerning cybersecurity. "
    "Please select the correct answers and respond with the letters ABCD only."
)
# eval.py@7aef317 chat_few_shot (HumanMessage, AIMessage); the older "capital of China" pair was
# replaced in affa571.
SECEVAL_CHAT_SHOT = (
    "Question: Which mitigation prevent stack overflow bug? A: Stack Canary. B: ALSR. C: CFI. D: Code Signing.",
    "Answer: ABC",
)


def test_seceval_released_chat_first_question(data_dir):
    s, questions, path = load(data_dir, "seceval", "mcq")
    p, t = released(s, "mcq")
    req = render_request(p, t, questions[0])
    # Build the expected text independently from the raw file, as eval.py does:
    # "Question: " + question + " ".join(choices), newlines replaced by spaces.
    row = json.loads(path.read_text(encoding="utf-8"))[0]
    expected_user = ("Question: " + row["question"] + " ".join(row["choices"])).replace("\n", " ")
    assert req.mode == "chat"
    assert [(m.role, m.content) for m in req.messages] == [
        ("system", SECEVAL_INSTRUCTION),
        ("user", SECEVAL_CHAT_SHOT[0]),
        ("assistant", SECEVAL_CHAT_SHOT[1]),
        ("user", expected_user),
    ]
    assert "security?A: The storage must" in expected_user  # no separator before 'A:'
    # LangChain's ChatOpenAI sends its default temperature (0.7); budget and top_p unspecified
    assert req.params == {"temperature": 0.7}
    assert req.adjustments == ()


def test_seceval_released_chat_every_request_byte_for_byte(data_dir):
    """All 2,189 released requests, as the chat messages eval.py@7aef317 builds and
    langchain's convert_message_to_dict serialises them, compared as JSON bytes."""
    s, questions, path = load(data_dir, "seceval", "mcq")
    p, t = released(s, "mcq")
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert len(raw) == len(questions) == 2189
    for row, question in zip(raw, questions):
        question_text = ("Question: " + row["question"] + " ".join(row["choices"])).replace("\n", " ")
        expected = [
            {"role": "system", "content": SECEVAL_INSTRUCTION},
            {"role": "user", "content": SECEVAL_CHAT_SHOT[0]},
            {"role": "assistant", "content": SECEVAL_CHAT_SHOT[1]},
            {"role": "user", "content": question_text},
        ]
        req = render_request(p, t, question)
        got = [{"role": m.role, "content": m.content} for m in req.messages]
        assert json.dumps(got, ensure_ascii=False).encode() == json.dumps(expected, ensure_ascii=False).encode(), row[
            "id"
        ]
    # the exemplar teaches a multi-letter answer: 925 of the 2,189 golds have two or more letters
    assert sum(len(set(r["answer"])) >= 2 for r in raw) == 925


def test_seceval_released_chat_flattens_newlines_everywhere(data_dir):
    s, questions, path = load(data_dir, "seceval", "mcq")
    p, t = released(s, "mcq")
    raw = json.loads(path.read_text(encoding="utf-8"))
    multi = [i for i, r in enumerate(raw) if "\n" in r["question"] or any("\n" in c for c in r["choices"])]
    assert multi, "the SecEval data has questions with newlines"
    for i in multi[:50]:
        req = render_request(p, t, questions[i])
        expected = ("Question: " + raw[i]["question"] + " ".join(raw[i]["choices"])).replace("\n", " ")
        assert req.messages[-1].content == expected
        assert "\n" not in req.messages[-1].content


def test_seceval_released_base_completion(data_dir):
    s, questions, path = load(data_dir, "seceval", "mcq")
    p, t = released(s, "mcq", "released_base")
    req = render_request(p, t, questions[0])
    row = json.loads(path.read_text(encoding="utf-8"))[0]
    assert req.mode == "completion"
    assert req.prompt.startswith(SECEVAL_INSTRUCTION + "\nQuestion: You are reviewing a piece of code")
    assert req.prompt.endswith(("Question: " + row["question"] + " ".join(row["choices"])).replace("\n", " ") + "\n")
    assert req.prompt.count("\nAnswer: ") == 5
    assert req.params == {"max_tokens": 5}


def test_mmlu_released_completion_prompt(data_dir):
    s, questions, _ = load(data_dir, "mmlu_cs", "mcq")
    _, shots, _ = load(data_dir, "mmlu_cs", "mcq", few_shot=True)
    p, t = released(s, "mcq")
    req = render_request(p, t, questions[0], shots)
    prompt = req.prompt
    assert req.mode == "completion" and req.messages == ()
    assert prompt.startswith("The following are multiple choice questions (with answers) about  computer security.\n\n")
    exemplars = re.findall(r"\nAnswer: ([A-D])\n\n", prompt)
    assert exemplars == [sh.gold for sh in shots]
    assert len(exemplars) == 5
    assert prompt.endswith("\nAnswer:")
    assert not prompt.endswith("\nAnswer: ")
    # exemplars come from dev, in order, each rendered as in evaluate.py format_example
    first = shots[0]
    block = (
        first.text
        + "".join(f"\n{lab}. {txt}" for lab, txt in first.choices.items())
        + "\nAnswer: "
        + first.gold
        + "\n\n"
    )
    assert prompt.startswith(
        "The following are multiple choice questions (with answers) about  computer security.\n\n" + block
    )
    assert prompt.index(shots[4].text) < prompt.index(questions[0].text)
    last = questions[0]
    tail = last.text + "".join(f"\n{lab}. {txt}" for lab, txt in last.choices.items()) + "\nAnswer:"
    assert prompt.endswith("\n\n" + tail)
    assert req.params == {"temperature": 0.0, "max_tokens": 1, "top_logprobs": 100}


def test_mmlu_released_with_provider_minimum(data_dir):
    s, questions, _ = load(data_dir, "mmlu_cs", "mcq")
    _, shots, _ = load(data_dir, "mmlu_cs", "mcq", few_shot=True)
    p, t = released(s, "mcq")
    req = render_request(p, t, questions[0], shots, min_max_tokens=16)
    assert req.params["max_tokens"] == 16
    assert req.adjustments == ("inference.max_tokens raised from 1 to the provider minimum 16",)


def test_mmlu_released_few_shot_requires_dev_examples(data_dir):
    s, questions, _ = load(data_dir, "mmlu_cs", "mcq")
    p, t = released(s, "mcq")
    with pytest.raises(TemplateError, match=r"few_shot=5 but only 0"):
        render_request(p, t, questions[0])


def test_cybermetric_released_user_text(data_dir):
    s, questions, path = load(data_dir, "cybermetric", "cm80")
    p, t = released(s, "cm80")
    raw = json.loads(path.read_text(encoding="utf-8"))["questions"]
    for i in (0, 1, len(questions) - 1):
        row = raw[i]
        options = ", ".join(f"{k}) {v}" for k, v in row["answers"].items())
        expected = (
            f"Question: {row['question']}\nOptions: {options}\n\n"
            "Choose the correct answer (A, B, C, or D) only. Always return in this format: 'ANSWER: X' "
        )
        req = render_request(p, t, questions[i])
        assert [(m.role, m.content) for m in req.messages] == [
            ("system", "You are a security expert who answers questions."),
            ("user", expected),
        ]
        assert req.messages[-1].content.endswith("'ANSWER: X' ")  # trailing space kept
        assert "temperature" not in req.params and "max_tokens" not in req.params
        assert req.params == {}


def test_cybermetric_documented_messages_are_the_readme_make_messages(data_dir):
    """README@2f5818b make_messages(question, answers), rebuilt from the raw rows."""
    s, questions, path = load(data_dir, "cybermetric", "cm80")
    p, t = released(s, "cm80", "documented")
    raw = json.loads(path.read_text(encoding="utf-8"))["questions"]
    instructions = (
        "You are a helpful AI assistant.\n"
        "Instructions:\n"
        "a. Carefully read the question.\n"
        "b. Choose the correct answer (A, B, C, or D) only.\n"
        "c. Do NOT include any explanation or additional text in the response.\n"
        "d. Always return the answer in this XML format: '<xml>answer</xml>'. "
        "For example, if the correct answer is D, then return <xml>D</xml>.\n\n"
    )
    for row, question in zip(raw, questions):
        options_str = ", ".join(f"{key}) {value}" for key, value in row["answers"].items())
        expected = [
            {"role": "system", "content": instructions},
            {"role": "user", "content": f"#Question: {row['question']}\nOptions: {options_str}"},
        ]
        req = render_request(p, t, question)
        assert [{"role": m.role, "content": m.content} for m in req.messages] == expected


def test_cti_released_system_then_prompt_column_verbatim(data_dir):
    s, questions, path = load(data_dir, "cti_bench", "mcq")
    p, t = released(s, "mcq")
    csv.field_size_limit(1 << 30)
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == len(questions)
    for i in (0, 108, len(rows) - 1):
        req = render_request(p, t, questions[i])
        assert [(m.role, m.content) for m in req.messages] == [
            ("system", "You are a cybersecurity expert specializing in cyberthreat intelligence."),
            ("user", rows[i]["Prompt"]),
        ]
    assert rows[0]["Prompt"].endswith("with no additional text. ")  # trailing whitespace preserved
    req = render_request(p, t, questions[0])
    assert req.params == {"temperature": 0.0, "top_p": 1.0, "seed": 42, "max_tokens": 2048}


def test_cti_released_prepend_user_path(data_dir):
    s, questions, _ = load(data_dir, "cti_bench", "mcq")
    p, t = released(s, "mcq")
    p = apply_overrides(p, [parse_override("prompt.format.system_role=prepend_user")])
    req = render_request(p, t, questions[0])
    assert len(req.messages) == 1
    assert req.messages[0].role == "user"
    assert req.messages[0].content == t.system + " " + questions[0].prompt


def test_standardized_prompt_on_real_question(data_dir):
    s, questions, _ = load(data_dir, "cti_bench", "mcq")
    p, t = released(s, "mcq", "standardized")
    req = render_request(p, t, questions[0])
    assert [m.role for m in req.messages] == ["user"]  # system_role none, zero-shot
    content = req.messages[0].content
    assert content.startswith(questions[0].text + "\n\nA) Audit\nB) Execution Prevention\n")
    assert content.endswith(
        'End your response with a final line of the form "Answer: X", where X is one of A, B, C, or D.'
    )
    assert req.params == {"temperature": 0.0, "top_p": 1.0, "seed": 42, "max_tokens": 2048}


@pytest.mark.parametrize(
    ("name", "task"), [("seceval", "mcq"), ("mmlu_cs", "mcq"), ("cybermetric", "cm500"), ("cti_bench", "mcq")]
)
def test_every_question_renders_under_released_and_standardized(data_dir, name, task):
    s, questions, _ = load(data_dir, name, task)
    shots = load(data_dir, name, task, few_shot=True)[1] if s.tasks[task].few_shot else []
    for layer in ("released", "standardized"):
        p, t = released(s, task, layer)
        for question in questions:
            req = render_request(p, t, question, shots)
            text = req.prompt if req.mode == "completion" else req.messages[-1].content
            assert text.strip()
