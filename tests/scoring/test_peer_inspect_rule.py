"""``inspect_choice`` against the real inspect_ai 0.3.285 ``parse_answers``.

``PROBES`` are reply texts written for this test.  ``record_verdicts.py`` (in the fixtures folder,
run once from a scratch virtualenv holding inspect_ai, never by ``make test``) reads this list, runs
the real ``parse_answers`` on each in single-answer mode (what ``multiple_choice()`` uses) and in
multiple-answer mode, and stores the letter sets in ``parse_answers_verdicts.json``.  The test
compares the project's rule to those stored verdicts: the letter it reads is Inspect's one letter,
it reads nothing where Inspect reads nothing, and ``hedged`` is exactly where Inspect's
multiple-answer reading of the same text finds two or more options.  docs/scoring.md's
``inspect_choice`` table is checked against the rule too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring.extract import extract, rule_names

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "peers" / "inspect_evals-0.26.0"
DOC = Path(__file__).resolve().parents[2] / "docs" / "scoring.md"
QUESTION = Question(benchmark="b", task="mcq", id="q", index=0, gold="A",
                    choices={label: f"option {label}" for label in "ABCD"})

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
]


def _verdicts() -> dict[str, dict[str, list[str]]]:
    path = FIXTURES / "parse_answers_verdicts.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["inspect_ai"] == "0.3.285"
    return data["verdicts"]


VERDICTS = _verdicts()


def test_the_probe_list_is_the_one_the_verdicts_were_recorded_for():
    assert len(PROBES) >= 30 and len(set(PROBES)) == len(PROBES)
    assert set(VERDICTS) == set(PROBES), "re-run record_verdicts.py after editing PROBES"


@pytest.mark.parametrize("probe", PROBES)
def test_inspect_choice_reads_what_parse_answers_reads(probe: str):
    single, several = VERDICTS[probe]["single"], VERDICTS[probe]["multiple"]
    got = extract("inspect_choice", Generation(text=probe), QUESTION, "keep")
    if single:
        assert got.prediction == single[0] and got.valid, got
    else:
        assert got.prediction is None and not got.valid, got
        expected = "hedged" if len(several) > 1 else ("empty" if not probe.strip() else "unparseable")
        assert got.invalid_reason == expected, (got, several)


def test_the_verdicts_cover_every_kind_of_reading():
    singles = [v["single"] for v in VERDICTS.values()]
    assert sum(1 for s in singles if s) >= 15  # read
    assert sum(1 for v in VERDICTS.values() if not v["single"] and len(v["multiple"]) > 1) >= 5  # hedged
    assert sum(1 for v in VERDICTS.values() if not v["single"] and len(v["multiple"]) <= 1) >= 8  # no answer


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


def _doc_rows() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    start, end = "<!-- inspect_choice table: start", "<!-- inspect_choice table: end -->"
    lines = text[text.index(start):text.index(end)].splitlines()[3:]
    rows = []
    for line in lines:
        answer, reading = (c.strip() for c in line.strip().strip("|").split("|"))
        rows.append((answer[1:-1].replace("\\n", "\n").replace("\\|", "|"), reading))
    return rows


def test_the_docs_table_is_what_the_rule_reads_and_what_inspect_reads():
    rows = _doc_rows()
    assert len(rows) >= 12
    for answer, reading in rows:
        got = extract("inspect_choice", Generation(text=answer), QUESTION, "keep")
        assert (got.prediction if got.valid else got.invalid_reason) == reading, answer
        if answer in VERDICTS:
            assert (VERDICTS[answer]["single"] or [None])[0] == (got.prediction if got.valid else None)


@pytest.mark.parametrize(("answer", "cybermetric", "inspect"), [
    ("Answer A", "A", None), ("ANSWER A", "A", None), ("ANSWER: **A**", None, "A"), ("ANSWER: (A)", None, "A"),
    ("ANSWER: A, B", "A", None), ("Answer: because it is", "B", None),
])
def test_the_contrast_with_cybermetric_the_docs_state(answer: str, cybermetric: str | None, inspect: str | None):
    assert extract("answer_regex", Generation(text=answer), QUESTION, "keep").prediction == cybermetric
    assert extract("inspect_choice", Generation(text=answer), QUESTION, "keep").prediction == inspect
