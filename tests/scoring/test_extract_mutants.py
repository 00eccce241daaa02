"""Extraction rules on the inputs that tell a rule from its mutants (issue 33, item 15: the mutation check).

The expected answers are read off each released heuristic's stated behaviour by hand (CTI-Bench
``format_mcq``, RedSage/lighteval ``MCQAcc``, the standardized list reader): which line is read, what a
trailing space or an underscore does, which of several labels a longer label shadows.  Each case kills a
mutant of ``scoring/extract.py`` that the other extraction tests let through.
"""

from __future__ import annotations

import pytest

from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring import extract

GEN = Generation(text="")


def q(choices: dict[str, str] | None = None) -> Question:
    return Question(benchmark="t", task="t", id="1", index=0, gold="A",
                    choices=choices if choices is not None else {k: k for k in "ABCD"})


# --------------------------------------------------------------------------- CTI-Bench format_mcq


@pytest.mark.parametrize("letter", "ABCD")
def test_cti_reads_a_leading_letter_and_parenthesis(letter: str) -> None:
    # the line ends in no option letter, so only the leading "X)" can decide
    assert extract.last_line_letter(f"{letter}) is the right one here", q(), GEN)[0] == letter


def test_cti_ignores_trailing_whitespace_on_the_last_two_lines() -> None:
    assert extract.last_line_letter("The answer is B   ", q(), GEN)[0] == "B"
    assert extract.last_line_letter("The answer is C   \n", q(), GEN)[0] == "C"
    assert extract.last_line_letter("   The answer is nothing", q(), GEN)[0] is None


# --------------------------------------------------------------------------- RedSage / lighteval MCQAcc


def test_redsage_trailing_letter_after_an_underscore() -> None:
    # No standalone letter (an underscore is a word character), so the trailing-letter test decides: B.
    assert extract.redsage_mcq_acc("A_or_B", q(), GEN)[0] == "B"
    # A trailing letter glued to a letter or digit is not read, whatever comes before that
    assert extract.redsage_mcq_acc("zA-xB", q(), GEN)[0] is None


def test_redsage_scans_the_last_five_lines_bottom_up_line_by_line() -> None:
    text = "C is wrong.\nThe answer is B\nhope this helps"
    assert extract.redsage_mcq_acc(text, q(), GEN)[0] == "B"
    six = "D\n" + "\n".join(["no letter here"] * 5)
    assert extract.redsage_mcq_acc(six, q(), GEN)[0] == "D"  # not on the last five: the one capital of the text
    assert extract.redsage_mcq_acc("A\n" + "\n".join(["no letter"] * 5) + "\nB or", q(), GEN)[0] == "B"


def test_redsage_bold_marks_become_spaces() -> None:
    # "**" is replaced by a space before the tests: "Answer**C" reads C (replaced by anything that ends in a
    # letter, the C would be glued to it, and the text holds two capitals, A and C: no answer)
    assert extract.redsage_mcq_acc("Answer**C", q(), GEN)[0] == "C"


# --------------------------------------------------------------------------- standardized label lists


def test_a_longer_label_is_not_read_as_its_prefix() -> None:
    labels = {"1": "one", "10": "ten", "2": "two"}
    assert extract.final_answer_letters("Answer: 10", q(labels), GEN)[0] == "10"
    assert extract.final_answer_letters("Answer: 1 and 10", q(labels), GEN)[0] == "110"  # sorted unique labels
    assert extract.final_answer_letter("Answer: 10", q(labels), GEN)[0] == "10"


def test_letter_lists_in_every_separator() -> None:
    for text in ("Answer: A and C", "Answer: A, C", "Answer: A; C", "Answer: A/C", "Answer: A & C", "Answer: A C",
                 "Answer: A, and C", "A and C"):
        assert extract.final_answer_letters(text, q(), GEN)[0] == "AC", text


def test_redsage_trailing_letter_is_only_a_to_d() -> None:
    assert extract.redsage_mcq_acc("c_X", q(), GEN)[0] is None  # X is no option letter
    assert extract.redsage_mcq_acc("c_D", q(), GEN)[0] == "D"


# --------------------------------------------------------------------------- the driver


def test_a_question_never_sent_is_endpoint_down_not_an_inference_error() -> None:
    from pytest_benchaudit.pipeline.types import ENDPOINT_DOWN_PREFIX

    down = extract.extract("answer_regex", Generation(text="", error=ENDPOINT_DOWN_PREFIX + " after 5 failures"),
                           q(), "strip")
    assert down.invalid_reason == "endpoint_down" and down.detail.startswith(ENDPOINT_DOWN_PREFIX)
    failed = extract.extract("answer_regex", Generation(text="", error="HTTP 500: upstream"), q(), "strip")
    assert failed.invalid_reason == "inference_error"
