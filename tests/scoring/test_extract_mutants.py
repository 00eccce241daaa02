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
    return Question(
        benchmark="t",
        task="t",
        id="1",
        index=0,
        gold="A",
        choices=choices if choices is not None else {k: k for k in "ABCD"},
    )


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
    for text in (
        "Answer: A and C",
        "Answer: A, C",
        "Answer: A; C",
        "Answer: A/C",
        "Answer: A & C",
        "Answer: A C",
        "Answer: A, and C",
        "A and C",
    ):
        assert extract.final_answer_letters(text, q(), GEN)[0] == "AC", text


def test_redsage_trailing_letter_is_only_a_to_d() -> None:
    assert extract.redsage_mcq_acc("c_X", q(), GEN)[0] is None  # X is no option letter
    assert extract.redsage_mcq_acc("c_D", q(), GEN)[0] == "D"


# --------------------------------------------------------------------------- the driver


def test_a_question_never_sent_is_endpoint_down_not_an_inference_error() -> None:
    from pytest_benchaudit.pipeline.types import ENDPOINT_DOWN_PREFIX

    down = extract.extract(
        "answer_regex", Generation(text="", error=ENDPOINT_DOWN_PREFIX + " after 5 failures"), q(), "strip"
    )
    assert down.invalid_reason == "endpoint_down" and down.detail.startswith(ENDPOINT_DOWN_PREFIX)
    failed = extract.extract("answer_regex", Generation(text="", error="HTTP 500: upstream"), q(), "strip")
    assert failed.invalid_reason == "inference_error"


# --------------------------------------------------------------------------- inspect_ai's first <think> block

# (reply, what inspect_ai 0.3.285's openai-api model hands on as the completion).  Read by hand off
# ``_reasoning.py`` (``_find_nested_think_block``, else the non-greedy ``<think...>...</think>``; the
# rest stripped; the raw text when nothing remains) and checked live below where inspect_ai is installed.
NESTED_PROBES = [
    ("<think>a<think>b</think>c</think>ANSWER: D", "ANSWER: D"),  # nested: the balancing close ends the block
    ("<think>a<think>b</think>c</think>", "<think>a<think>b</think>c</think>"),  # nothing left: the raw text
    ("<think>a<think>b</think>ANSWER: C", "ANSWER: C"),  # never balanced: the first open to the next close
    ("x</think><think>r</think> ANSWER: B", "x</think> ANSWER: B"),  # a close before any open is text
    ("<think>a</think>ANSWER: A<think>b</think>", "ANSWER: A<think>b</think>"),  # later blocks are kept
    ('<think signature="s1">r</think>\nANSWER: D\n', "ANSWER: D"),  # attributes on the opening tag
    ("<THINK>r</THINK>ANSWER: A", "<THINK>r</THINK>ANSWER: A"),  # case-sensitive: no block
    ("ANSWER: B", "ANSWER: B"),  # no tag at all
    ("  ANSWER: B  ", "  ANSWER: B  "),  # no block: the text as it came, not stripped
    ("<think>only an open tag", "<think>only an open tag"),
]


@pytest.mark.parametrize("reply,completion", NESTED_PROBES)
def test_strip_first_removes_the_block_inspect_removes(reply: str, completion: str) -> None:
    assert extract.strip_first_reasoning(reply) == completion
    assert extract.answer_text_of(reply, "strip_first") == completion
    # A separate reasoning field: inspect_ai reads the text as it came.
    assert extract.strip_first_reasoning(reply, "thought apart") == reply
    assert extract.answer_text_of(reply, "strip_first", "thought apart") == reply


def test_nested_probes_agree_with_the_installed_inspect_ai() -> None:
    """Live, where inspect_ai is installed: its own completion for each probe (record_verdicts.py --stdin)."""
    import json
    import subprocess
    from pathlib import Path

    from pytest_benchaudit.testing.peer_python import find_peer_python

    python, why = find_peer_python("inspect_ai", "openai")
    if python is None:
        pytest.skip(why)
    script = Path(__file__).resolve().parents[1] / "fixtures" / "peers" / "inspect_evals-0.26.0" / "record_verdicts.py"
    asked = [{"content": reply, "reasoning_content": None} for reply, _ in NESTED_PROBES]
    done = subprocess.run(
        [python, str(script), "--stdin"], input=json.dumps(asked), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for (reply, completion), reading in zip(NESTED_PROBES, json.loads(done.stdout)["readings"], strict=True):
        assert reading["completion"] == completion, reply


def test_answer_text_of_each_reasoning_mode() -> None:
    text = "<think>ANSWER: B</think>ANSWER: A<think>ANSWER: C</think>\n<think>unclosed"
    assert extract.answer_text_of(text, "keep") == text
    assert extract.answer_text_of(text, "keep", "field") == text
    # strip: every closed block removed, then the text before an unclosed one
    assert extract.answer_text_of(text, "strip") == extract.strip_reasoning(text)[0] == "ANSWER: A\n"
    assert extract.answer_text_of(text, "strip_first") == "ANSWER: A<think>ANSWER: C</think>\n<think>unclosed"


def test_extract_reads_what_each_reasoning_mode_leaves() -> None:
    text = "<think>ANSWER: B</think>ANSWER: A<think>ANSWER: C</think>"
    got = extract.extract("final_line", Generation(text=text), q(), "strip_first")
    assert got.valid and got.answer_text == "ANSWER: A<think>ANSWER: C</think>"
    assert extract.extract("final_line", Generation(text=text), q(), "strip").answer_text == "ANSWER: A"
    assert extract.extract("final_line", Generation(text=text), q(), "keep").answer_text == text
    # A reasoning field of its own: strip_first reads the text as it came (the field is never answer text).
    apart = extract.extract("final_line", Generation(text=text, reasoning="<think>x</think>y"), q(), "strip_first")
    assert apart.answer_text == text
    # a valid answer keeps the text it was read from
    assert extract.extract("answer_regex", Generation(text="Answer: C"), q(), "keep").answer_text == "Answer: C"


def test_no_logprobs_and_hedged_keep_the_answer_text_and_drop_the_prefix() -> None:
    from pytest_benchaudit.pipeline.types import HEDGED_PREFIX, NO_LOGPROBS_PREFIX

    none = extract.extract("lm_eval_loglikelihood", Generation(text="some text"), q(), "keep")
    assert none.invalid_reason == "no_logprobs" and none.answer_text == "some text"
    assert none.detail.startswith("no continuation log-likelihoods") and NO_LOGPROBS_PREFIX not in none.detail
    hedged = extract.extract("final_answer_letter", Generation(text="Answer: A or B"), q(), "keep")
    assert hedged.invalid_reason == "hedged" and hedged.answer_text == "Answer: A or B"
    assert hedged.detail == "A and B after the marker: 'Answer: A or B'"  # the words after HEDGED_PREFIX
    assert extract.final_answer_letter("Answer: A or B", q(), GEN)[1] == HEDGED_PREFIX + hedged.detail


def test_a_hedged_reading_names_its_kind_after_the_prefix() -> None:
    # The detail a reader counts apart starts with HEDGED_PREFIX (the driver strips it): "either" and "or".
    from pytest_benchaudit.pipeline.types import HEDGED_PREFIX

    prediction, detail = extract.final_answer_letters("Answer: either A or C", q(), GEN)
    assert prediction is None and detail.startswith(HEDGED_PREFIX + "'either' between options")
    prediction, detail = extract.final_answer_letters("Answer: A or C", q(), GEN)
    assert prediction is None and detail.startswith(HEDGED_PREFIX + "'or' between options")
