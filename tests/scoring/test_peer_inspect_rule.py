"""``inspect_choice`` and ``reasoning = "strip_first"`` against the real inspect_ai 0.3.285.

``PROBES`` are reply texts written for this test.  ``record_verdicts.py`` (in the fixtures folder,
run from a virtualenv holding inspect_ai, never by ``make test``) reads this list and asks inspect_ai
itself what it reads from each: the completion its ``openai-api`` model hands on (``<think>``
handling included) and ``parse_answers`` on it, in single-answer mode (what ``multiple_choice()``
uses) and in multiple-answer mode, and ``parse_answers`` on the raw probe; it stores them in
``parse_answers_verdicts.json``.  The tests compare the project's readers to those verdicts: the
rule alone reads the raw probe as ``parse_answers`` does, ``strip_first`` makes Inspect's
completion, and the two together (the inspect_evals layers' extraction) read Inspect's one letter,
nothing where Inspect reads nothing, and ``hedged`` exactly where Inspect's multiple-answer reading
finds two or more options.  Where inspect_ai is installed (``BENCHAUDIT_PEER_PYTHON``, or this
interpreter) the same comparison runs live against it.  docs/scoring.md's ``inspect_choice`` table is
checked against the readers too.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring.extract import extract, rule_names, strip_first_reasoning
from pytest_benchaudit.testing.peer_python import find_peer_python

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "peers" / "inspect_evals-0.26.0"
DOC = Path(__file__).resolve().parents[2] / "docs" / "scoring.md"
QUESTION = Question(
    benchmark="b", task="mcq", id="q", index=0, gold="A", choices={label: f"option {label}" for label in "ABCD"}
)

# Reply texts: the patterns, wrappers, separators, case and placement the reader distinguishes.
PROBES = [
    "ANSWER: A",
    "ANSWER: b",
    "answer: C.",
    "Answer:D",
    "ANSWER : B",
    "ANSWER: A\n",
    "ANSWER: A.",
    "ANSWER: A, B",
    "ANSWER: AB",
    "ANSWER: A and B",
    "ANSWER: A B",
    "ANSWER: A,",
    "ANSWER: E",
    "ANSWER: Apple",
    "ANSWER: A because it is the default",
    "ANSWER - A",
    "ANSWER A",
    "The answer is A",
    "A",
    "**A**",
    "ANSWER: **A**",
    "**ANSWER: C**",
    "ANSWER: (A)",
    "ANSWER: (A), (B)",
    "ANSWER: $B$",
    "ANSWER: $\\boxed{B}$",
    "Answer: \\boxed{C}",
    "I think ANSWER: B is right",
    "Let me think.\nANSWER: C\nANSWER: D",
    "ANSWER: A\nOn reflection, ANSWER: B",
    "On reflection, ANSWER: B\nANSWER: A",
    "Final ANSWER: C",
    "The final answer: D",
    "ANSWER:\tA",
    "ANSWER: A\t",
    "  ANSWER: B",
    "ANSWER: 1",
    "ANSWER: a, a",
    "ANSWER: A, B, C, D",
    "(B)",
    "ANSWER: C or D",
    "<think>ANSWER: A</think>\nANSWER: B",
    "",
    "ANSWER: D!",
    "ANSWER:B,",
    "answer: A and C.",
    # Reasoning: inspect_ai's openai-api model removes the first <think> block before parse_answers reads.
    "<think>ANSWER: B</think>A and B",
    "ANSWER: A<think>ANSWER: B</think>",
    "<think>ANSWER: C</think>",
    "<think>x</think>\n<think>ANSWER: A</think>\nANSWER: D",
    "<think>a <think>ANSWER: B</think> c</think>ANSWER: A",
    "<think>a <think>b</think>ANSWER: C",
    "<THINK>ANSWER: B</THINK>\nANSWER: A",
    '<think signature="s1">ANSWER: B</think>ANSWER: C',
    "<thinking>ANSWER: B</thinking>\nANSWER: C",
    "<think>ANSWER: B",
    "Thinking...\n</think>\nANSWER: D",
    "  <think>x</think>\n  ANSWER: A  ",
    "<think>ANSWER: A</think>\n\n",
    "<think>ANSWER: A</think>\nANSWER B",
    "<think>x</think>ANSWER: C<think>ANSWER: D</think>",
]


def _verdicts() -> dict[str, dict[str, object]]:
    path = FIXTURES / "parse_answers_verdicts.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["inspect_ai"] == "0.3.285"
    return data["verdicts"]


VERDICTS = _verdicts()


def test_the_probe_list_is_the_one_the_verdicts_were_recorded_for():
    assert len(PROBES) >= 30 and len(set(PROBES)) == len(PROBES)
    assert set(VERDICTS) == set(PROBES), "re-run record_verdicts.py after editing PROBES"


def _agrees(got, single: list[str], several: list[str], text: str) -> None:
    """``got`` (an Extraction) reads what Inspect read: its one letter, else no answer, ``hedged``
    exactly where its multiple-answer mode names two or more options."""
    if single:
        assert got.prediction == single[0] and got.valid, got
    else:
        assert got.prediction is None and not got.valid, got
        if len(several) > 1:
            assert got.invalid_reason == "hedged", (got, several)
        else:
            assert got.invalid_reason in (("empty",) if not text.strip() else ("unparseable", "unclosed_reasoning")), (
                got
            )


@pytest.mark.parametrize("probe", PROBES)
def test_inspect_choice_reads_what_parse_answers_reads(probe: str):
    verdict = VERDICTS[probe]
    got = extract("inspect_choice", Generation(text=probe), QUESTION, "keep")
    _agrees(got, verdict["raw_single"], verdict["raw_multiple"], probe)


@pytest.mark.parametrize("probe", PROBES)
def test_strip_first_makes_the_completion_inspect_reads(probe: str):
    verdict = VERDICTS[probe]
    assert strip_first_reasoning(probe) == verdict["completion"]
    # The inspect_evals layers' extraction (inspect_choice after strip_first) is Inspect's reading of the reply.
    got = extract("inspect_choice", Generation(text=probe), QUESTION, "strip_first")
    assert got.answer_text == verdict["completion"]
    _agrees(got, verdict["single"], verdict["multiple"], probe)


def test_the_two_probes_of_the_issue_read_as_inspect_reads_them():
    # Read as returned ("keep", what the layers did before), both read B; Inspect reads no answer and A.
    for text, inspect, kept in (
        ("<think>ANSWER: B</think>A and B", None, "B"),
        ("ANSWER: A<think>ANSWER: B</think>", "A", "B"),
    ):
        assert VERDICTS[text]["single"] == ([inspect] if inspect else [])
        assert extract("inspect_choice", Generation(text=text), QUESTION, "strip_first").prediction == inspect
        assert extract("inspect_choice", Generation(text=text), QUESTION, "keep").prediction == kept


def test_a_separate_reasoning_field_leaves_the_text_as_it_came():
    # inspect_ai reads <think> tags only when the answer has no reasoning_content (or reasoning) field.
    text = "<think>ANSWER: B</think>A and B"
    assert strip_first_reasoning(text, "the model's reasoning") == text
    got = extract("inspect_choice", Generation(text=text, reasoning="the model's reasoning"), QUESTION, "strip_first")
    assert got.prediction == "B"


LIVE_EXTRA = [  # (content, reasoning_content): what the live check adds to the probes
    ("<think>ANSWER: B</think>A and B", "the model's reasoning"),
    ("ANSWER: A<think>ANSWER: B</think>", ""),
    ("<think>x</think>ANSWER: C", None),
]


def test_the_readers_agree_with_the_installed_inspect_ai():
    """Live: the installed inspect_ai's own functions (record_verdicts.py --stdin) on every probe, and on
    answers that carry a separate reasoning field; fails naming the probe whose reading changed."""
    python, why = find_peer_python("inspect_ai", "openai")
    if python is None:
        pytest.skip(why)
    asked = [{"content": p, "reasoning_content": None} for p in PROBES] + [
        {"content": c, "reasoning_content": r} for c, r in LIVE_EXTRA
    ]
    done = subprocess.run(
        [python, str(FIXTURES / "record_verdicts.py"), "--stdin"],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    live = json.loads(done.stdout)
    for ask, reading in zip(asked, live["readings"], strict=True):
        text, field = ask["content"], ask["reasoning_content"]
        assert strip_first_reasoning(text, field) == reading["completion"], (
            f"inspect_ai {live['inspect_ai']} hands parse_answers another completion for {text!r}"
        )
        got = extract("inspect_choice", Generation(text=text, reasoning=field), QUESTION, "strip_first")
        _agrees(got, reading["single"], reading["multiple"], text)
        _agrees(
            extract("inspect_choice", Generation(text=text), QUESTION, "keep"),
            reading["raw_single"],
            reading["raw_multiple"],
            text,
        )


def test_the_verdicts_cover_every_kind_of_reading():
    singles = [v["raw_single"] for v in VERDICTS.values()]
    assert sum(1 for s in singles if s) >= 15  # read
    assert sum(1 for v in VERDICTS.values() if not v["raw_single"] and len(v["raw_multiple"]) > 1) >= 5  # hedged
    assert sum(1 for v in VERDICTS.values() if not v["raw_single"] and len(v["raw_multiple"]) <= 1) >= 8  # no answer
    # Reasoning: a block removed (the reading moves) and the raw-text fallback (nothing else remained).
    assert sum(1 for v in VERDICTS.values() if v["single"] != v["raw_single"]) >= 2
    assert any(v["completion"] == p and p.startswith("<think>") for p, v in VERDICTS.items())


def test_positional_letters_follow_the_number_of_choices():
    three = QUESTION.model_copy(update={"choices": {"A": "x", "B": "y", "C": "z"}})
    assert extract("inspect_choice", Generation(text="ANSWER: D"), three, "keep").invalid_reason == "unparseable"
    assert extract("inspect_choice", Generation(text="ANSWER: C"), three, "keep").prediction == "C"


def test_a_no_op_change_to_the_reply_moves_nothing():
    # Metamorphic: text before the last strict line, and the case of the marker, change no reading.
    for probe in [p for p in PROBES if re.fullmatch(r"(?i)ANSWER: [A-D]", p)]:
        base = extract("inspect_choice", Generation(text=probe), QUESTION, "keep").prediction
        for variant in (f"Some preamble.\n{probe}", probe.lower().replace("answer", "AnSwEr"), probe + "\n\n"):
            assert extract("inspect_choice", Generation(text=variant), QUESTION, "keep").prediction == base


def test_the_rule_is_registered():
    assert "inspect_choice" in rule_names()


def _doc_rows() -> list[tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    start, end = "<!-- inspect_choice table: start", "<!-- inspect_choice table: end -->"
    lines = text[text.index(start) : text.index(end)].splitlines()[3:]
    rows = []
    for line in lines:
        answer, reading, kept = (c.strip() for c in line.strip().strip("|").split("|"))
        rows.append((answer[1:-1].replace("\\n", "\n").replace("\\|", "|"), reading, kept))
    return rows


def _said(got) -> str:
    return got.prediction if got.valid else got.invalid_reason


def test_the_docs_table_is_what_the_rule_reads_and_what_inspect_reads():
    rows = _doc_rows()
    assert len(rows) >= 12
    assert sum(1 for answer, reading, kept in rows if "<think>" in answer and reading != kept) >= 2
    for answer, reading, kept in rows:
        # The layers' extraction: inspect_choice on what strip_first leaves (Inspect's completion) ...
        got = extract("inspect_choice", Generation(text=answer), QUESTION, "strip_first")
        assert _said(got) == reading, answer
        assert answer in VERDICTS, f"{answer!r}: add it to PROBES and record Inspect's verdict"
        assert (VERDICTS[answer]["single"] or [None])[0] == (got.prediction if got.valid else None)
        # ... and, for contrast, the rule on the reply as returned (reasoning = keep).
        assert _said(extract("inspect_choice", Generation(text=answer), QUESTION, "keep")) == kept, answer


@pytest.mark.parametrize(
    ("answer", "cybermetric", "inspect"),
    [
        ("Answer A", "A", None),
        ("ANSWER A", "A", None),
        ("ANSWER: **A**", None, "A"),
        ("ANSWER: (A)", None, "A"),
        ("ANSWER: A, B", "A", None),
        ("Answer: because it is", "B", None),
    ],
)
def test_the_contrast_with_cybermetric_the_docs_state(answer: str, cybermetric: str | None, inspect: str | None):
    assert extract("answer_regex", Generation(text=answer), QUESTION, "keep").prediction == cybermetric
    assert extract("inspect_choice", Generation(text=answer), QUESTION, "keep").prediction == inspect
