"""Tests for pytest_benchaudit.scoring.extract: every rule, its released quirks, reasoning handling
and invalid-answer classification; plus checks on real benchmark rows (skipped without
``BENCHAUDIT_DATA``)."""

from __future__ import annotations

import json

import pytest

from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring.extract import RULES, extract, rule_names, strip_reasoning
from pytest_benchaudit.scoring.metrics import score
from pytest_benchaudit.testing.data import data_file, read_tsv

ABCD = {"A": "Audit", "B": "Execution Prevention", "C": "Process", "D": "User Account"}


def q(gold: str = "B", choices: dict[str, str] | None = None) -> Question:
    return Question(benchmark="t", task="t", id="1", index=0, gold=gold, choices=ABCD if choices is None else choices)


def run(rule: str, text: str, mode: str = "strip", question: Question | None = None, **gen):
    return extract(rule, Generation(text=text, **gen), question or q(), mode)


def pred(rule: str, text: str, **kw) -> str | None:
    return run(rule, text, **kw).prediction


# --------------------------------------------------------------------------- registry / API


def test_rule_names_lists_every_rule_sorted():
    from pytest_benchaudit.scoring.tasks import TASK_RULES

    assert rule_names() == sorted(RULES)
    assert set(rule_names()) - set(TASK_RULES) == {
        "last_line_letter",
        "all_capital_letters",
        "answer_regex",
        "logprob_argmax",
        "mmlu_logprob_argmax",
        "xml_answer",
        "redsage_mcq_acc",
        "final_answer_letter",
        "final_answer_letters",
        "final_line",
        "judge",
    }


def test_unknown_rule_is_keyerror_listing_known_rules():
    with pytest.raises(KeyError) as err:
        run("no_such_rule", "A")
    assert "no_such_rule" in str(err.value) and "final_answer_letter" in str(err.value)


def test_bad_reasoning_mode_is_valueerror():
    with pytest.raises(ValueError):
        run("final_answer_letter", "A", mode="drop")


# --------------------------------------------------------------------------- last_line_letter (CTI-Bench)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Reasoning...\nB", "B"),
        ("Reasoning...\nC) Process", "C"),  # starts with "C)"
        ("It targets the bacterial DNA", "A"),  # quirk: any line ending in A-D
        ("The answer is **c**", "C"),  # ends with "**": 3rd-last char, upper-cased
        ("Answer: B\n", "B"),  # empty last line: second-to-last line is read
        ("x", "X"),  # the flattened text "x" upper-cases to the refusal marker X
    ],
)
def test_last_line_letter_released_behaviour(text, expected):
    assert pred("last_line_letter", text) == expected


@pytest.mark.parametrize(
    ("text", "detail_part"),
    [
        ("Thinking\n**", "IndexError"),  # "**"[-3] raises: the notebook stored 'Error'
        ("Answer: B\n\n", "not in A/B/C/D/X"),  # two trailing empty lines: flattened text
        ("The answer is B.", "not in A/B/C/D/X"),  # ends with "." -> flattened text
        ("Answer: A) Audit\nThat is all", "not in A/B/C/D/X"),  # only the last line counts
    ],
)
def test_last_line_letter_invalid_cases(text, detail_part):
    result = run("last_line_letter", text)
    assert result.prediction is None
    assert result.invalid_reason == "unparseable"
    assert detail_part in result.detail


# --------------------------------------------------------------------------- all_capital_letters (SecEval)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DEP and ASLR", "AD"),  # quirk: capitals inside words; findall gives D, A
        ("Answer: CA", "AC"),
        ("Answer: B, D, B", "BD"),
        ("I am not sure.", ""),  # no capitals A-D: still a (valid) empty answer
        ("answer: b", ""),  # only the exact substring "Answer:" is removed; lower case ignored
    ],
)
def test_all_capital_letters(text, expected):
    result = run("all_capital_letters", text)
    assert result.valid
    assert result.prediction == expected


def test_all_capital_letters_removes_only_the_answer_marker():
    # "Answer:" is deleted because its capital A would otherwise count; the replace is
    # case-sensitive, so the A of "ANSWER:" does count.
    assert pred("all_capital_letters", "ANSWER: B") == "AB"


# --------------------------------------------------------------------------- answer_regex (CyberMetric)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ANSWER: C", "C"),
        ("answer:d", "D"),
        ("ANSWER B", "B"),
        ("Answer: because the firewall blocks it, A", "B"),  # quirk: IGNORECASE reads "b"ecause
        ("The option is C", None),
    ],
)
def test_answer_regex(text, expected):
    assert pred("answer_regex", text) == expected


def test_answer_regex_blank_text_is_empty():
    result = run("answer_regex", "  \n ")
    assert result.invalid_reason == "empty"


# --------------------------------------------------------------------------- logprob_argmax (MMLU)


def test_logprob_argmax_picks_highest_leading_space_label():
    result = run("logprob_argmax", " C", top_logprobs=({" A": -2.0, " C": -0.1, "C": 0.0},))
    assert result.prediction == "C"  # "C" without the leading space is not looked at
    assert "A=-2" in result.detail and "C=-0.1" in result.detail


def test_logprob_argmax_all_missing_gives_a():
    result = run("logprob_argmax", " The", top_logprobs=({" The": -0.5, " It": -1.0},))
    assert result.prediction == "A"  # all four are -100; argmax keeps the first
    assert result.detail.count("-100") == 4


def test_logprob_argmax_tie_keeps_first_label():
    assert pred("logprob_argmax", "", top_logprobs=({" B": -1.0, " D": -1.0},)) == "B"


@pytest.mark.parametrize("top", [None, ()])
def test_logprob_argmax_without_logprobs_is_invalid(top):
    result = run("logprob_argmax", "B", top_logprobs=top)
    assert result.prediction is None
    assert result.detail == "no log-probabilities returned"
    assert result.invalid_reason == "unparseable"


# --------------------------------------------------------------------------- final_answer_letter


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Some reasoning.\nAnswer: C", "C"),
        ("The final answer is (B).", "B"),
        ("**Answer:** D", "D"),
        ("Answer: [A]", "A"),
        ("Answer: **C**", "C"),
        ("The correct answer is B. A firewall would not help.", "B"),
        ("Reasoning\nC", "C"),
        ("Reasoning\nC)", "C"),
        ("Reasoning\n(C)", "C"),
        ("Reasoning\nC.", "C"),
        ("Reasoning\n**C**", "C"),
        ("Reasoning\nC: Process", "C"),
        ("Reasoning\nC) Process", "C"),
        ("Answer: B\nA firewall is used to filter traffic.", "B"),  # article line skipped
        ("Answer: A\nlater text\nAnswer: D", "D"),  # bottom-up: the last marker wins
    ],
)
def test_final_answer_letter_reads(text, expected):
    assert pred("final_answer_letter", text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A firewall is used to filter traffic.",  # article "A" is never an answer
        "Use DEP and ASLR.",  # capitals inside words are never read
        "Answer: ASLR",  # marker followed by a word, not a standalone letter
        "Answer: c",  # labels are case-sensitive
        "I think it is probably B or C",  # no marker, not a letter line
    ],
)
def test_final_answer_letter_refuses_prose(text):
    result = run("final_answer_letter", text)
    assert result.prediction is None
    assert result.invalid_reason == "unparseable"


def test_final_answer_letter_uses_question_labels():
    tf = q(gold="T", choices={"T": "true", "F": "false", "X": "unknown"})
    assert pred("final_answer_letter", "Answer: F", question=tf) == "F"
    assert pred("final_answer_letter", "Answer: D", question=tf) is None


def test_final_answer_letter_empty_choices_default_to_abcd():
    assert pred("final_answer_letter", "Answer: D", question=q(choices={})) == "D"


# --------------------------------------------------------------------------- final_answer_letters


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: ACD", "ACD"),
        ("Answer: A, C, D", "ACD"),
        ("Answer: A C D", "ACD"),
        ("Answer: A and C", "AC"),
        ("Answer: (A), (C)", "AC"),
        ("Answer: **A, C**", "AC"),
        ("The correct answers are A, C, and D.", "ACD"),
        ("Answer: D, A", "AD"),  # sorted
        ("Reasoning\nB, D", "BD"),  # a line that is only a letter list
        ("Reasoning\n**A, C**", "AC"),
        ("Reasoning\nB", "B"),
    ],
)
def test_final_answer_letters_reads(text, expected):
    assert pred("final_answer_letters", text) == expected


@pytest.mark.parametrize("text", ["Use DEP and ASLR.", "A firewall is needed.", "Answer: ASLR", ""])
def test_final_answer_letters_refuses_prose(text):
    assert pred("final_answer_letters", text) is None


def test_final_answer_letters_restricted_to_labels():
    two = q(choices={"A": "x", "B": "y"})
    assert pred("final_answer_letters", "Answer: A, B", question=two) == "AB"
    assert pred("final_answer_letters", "Answer: A, C", question=two) == "A"


# --------------------------------------------------------------------------- final_line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The report points to\nAPT28\n\n", "APT28"),
        ('Reasoning\n**Final Answer:** "Lazarus Group"', "Lazarus Group"),
        ("Reasoning\nanswer: CWE-79", "CWE-79"),
        ("  Sandworm  ", "Sandworm"),
    ],
)
def test_final_line(text, expected):
    assert pred("final_line", text) == expected


def test_final_line_without_content_is_invalid():
    assert run("final_line", "\n\n", finish_reason="stop").invalid_reason == "empty"
    assert run("final_line", "**\n  \n").invalid_reason == "unparseable"


# --------------------------------------------------------------------------- reasoning


def test_strip_reasoning_closed_span():
    assert strip_reasoning("<think>maybe A</think>\nAnswer: C") == ("\nAnswer: C", False)
    assert strip_reasoning("<THINK>a</Think>x<think>b</think>y") == ("xy", False)


def test_strip_reasoning_close_without_open():
    # Templates that put "<think>" into the prompt leave only the closing tag in the text.
    assert strip_reasoning("maybe A\n</think>\n\nAnswer: C") == ("\n\nAnswer: C", False)


def test_strip_reasoning_unclosed_open():
    assert strip_reasoning("Answer: C\n<think>hmm, maybe A") == ("Answer: C\n", True)


def test_strip_reasoning_leaves_plain_text_untouched():
    assert strip_reasoning("Answer: B\n\n") == ("Answer: B\n\n", False)


@pytest.mark.parametrize(
    "text",
    [
        "<think>Option A looks right.\nAnswer: A</think>\nAnswer: C",
        "Option A looks right.\nAnswer: A\n</think>\nAnswer: C",
    ],
)
def test_extract_strips_think_spans(text):
    result = run("final_answer_letter", text)
    assert result.prediction == "C"
    assert "<think>" not in result.answer_text and "</think>" not in result.answer_text


def test_unclosed_think_is_unclosed_reasoning():
    result = run("final_answer_letter", "<think>Let me weigh A against B...", finish_reason="length")
    assert result.invalid_reason == "unclosed_reasoning"
    assert result.answer_text == ""


def test_separate_reasoning_field_never_read():
    gen = dict(reasoning="I am confident.\nAnswer: A", finish_reason="stop")
    for mode in ("strip", "keep"):
        assert run("final_answer_letter", "Answer: D", mode=mode, **gen).prediction == "D"
        assert run("all_capital_letters", "Answer: D", mode=mode, **gen).prediction == "D"
    # A reasoning field alone is no answer.
    assert run("final_answer_letter", "", **gen).invalid_reason == "empty"


def test_keep_and_strip_differ_on_same_text():
    text = "<think>Weigh DEP and ASLR.</think>\nAnswer: B"
    assert pred("all_capital_letters", text, mode="keep") == "ABD"
    assert pred("all_capital_letters", text, mode="strip") == "B"
    cti = "Answer: B\n<think>hmm, maybe it is A"
    assert pred("last_line_letter", cti, mode="keep") == "A"
    assert pred("last_line_letter", cti, mode="strip") == "B"


def test_think_only_output_is_empty_when_stripped():
    result = run("final_answer_letter", "<think>A or B?</think>\n", finish_reason="stop")
    assert result.invalid_reason == "empty"
    kept = run("final_answer_letter", "<think>A or B?</think>\n", mode="keep", finish_reason="stop")
    assert kept.invalid_reason == "unparseable"


# --------------------------------------------------------------------------- invalid classification


def test_inference_error_wins_over_everything():
    result = run("all_capital_letters", "", error="HTTP 500: upstream failed")
    assert result.invalid_reason == "inference_error"
    assert result.detail == "HTTP 500: upstream failed"
    assert result.prediction is None


def test_blank_text_is_empty_or_truncated():
    assert run("final_answer_letter", "   \n", finish_reason="stop").invalid_reason == "empty"
    assert run("final_answer_letter", "", finish_reason="length").invalid_reason == "truncated"


def test_text_cut_by_token_budget_is_truncated():
    result = run("final_answer_letter", "Let me analyse each option in turn. Option", finish_reason="length")
    assert result.invalid_reason == "truncated"
    assert result.answer_text.startswith("Let me")


def test_unparseable_text():
    result = run("answer_regex", "I would pick the second one.", finish_reason="stop")
    assert result.invalid_reason == "unparseable"
    assert not result.valid


def test_all_capital_letters_empty_prediction_is_valid():
    result = run("all_capital_letters", "", finish_reason="stop")
    assert result.valid and result.prediction == ""


def test_valid_answer_even_when_truncated():
    result = run("final_answer_letter", "Answer: C\nBecause", finish_reason="length")
    assert result.valid and result.prediction == "C"


# --------------------------------------------------------------------------- real data rows


def cti_question(i: int, row: dict[str, str]) -> Question:
    choices = {k: row[f"Option {k}"] for k in "ABCD"}
    return Question(
        benchmark="cti-bench",
        task="cti-mcq",
        id=str(i),
        index=i,
        text=row["Question"],
        choices=choices,
        gold=row["GT"],
        prompt=row["Prompt"],
    )


def test_real_cti_released_answers_roundtrip_through_last_line_letter():
    rows = read_tsv(data_file("cti-bench", "cti-mcq.tsv"))
    responses = read_tsv(data_file("cti-bench", "responses", "cti-mcq-responses.tsv"))
    assert len(rows) == len(responses) == 2500
    refusals = 0
    for model in ("ChatGPT-3.5", "ChatGPT-4", "Gemini-1.5", "LLAMA3-70B", "LLAMA3-8B"):
        for i, (row, resp) in enumerate(zip(rows, responses)):
            answer = resp[model]
            result = extract("last_line_letter", Generation(text=f"Reasoning.\n{answer}"), cti_question(i, row), "keep")
            if answer in ("A", "B", "C", "D"):
                # A released letter on the last line is read back unchanged.
                assert result.prediction == answer, (model, i)
            else:
                # Gemini's 4 refusals "X": format_mcq cannot read a last line "X" (it only
                # looks for A-D), so X in the released file was set by hand, as the notebook
                # admits; our rule, like format_mcq, finds no answer there.
                assert answer == "X" and model == "Gemini-1.5"
                assert result.invalid_reason == "unparseable", (model, i)
                refusals += 1
    assert refusals == 4


def test_real_cti_lowercase_gold_matches_upper_prediction():
    rows = read_tsv(data_file("cti-bench", "cti-mcq.tsv"))
    lower = [(i, r) for i, r in enumerate(rows) if r["GT"] not in ("A", "B", "C", "D")]
    assert [r["GT"] for _, r in lower] == ["b"]
    i, row = lower[0]
    question = cti_question(i, row)
    result = extract("last_line_letter", Generation(text="Analysis...\nB"), question, "strip")
    assert result.prediction == "B"
    assert score("exact_match", result, question).correct


def test_real_cti_option_texts_ending_in_capital_read_as_letters():
    # The "ends with A-D" quirk: a model that writes the option *text* as its last line
    # gets a letter read from the text's last character.  Count how often that happens
    # on real options and check each one is read as that trailing capital.
    rows = read_tsv(data_file("cti-bench", "cti-mcq.tsv"))
    hits = 0
    for i, row in enumerate(rows):
        question = cti_question(i, row)
        for option in question.choices.values():
            last = option.rstrip()
            if "\n" not in last and last[-1:] in tuple("ABCD") and not last.startswith(("A)", "B)", "C)", "D)")):
                hits += 1
                assert pred("last_line_letter", f"My choice:\n{option}", question=question) == last[-1]
    assert hits == 72  # of 10,000 real options (one more starts with "C)" and is read from its start)


def test_real_seceval_golds_through_letter_rules():
    items = json.loads(data_file("seceval", "questions-data.json").read_text(encoding="utf-8"))
    assert len(items) == 2189
    for i, item in enumerate(items):
        choices = {c[0]: c[3:] for c in item["choices"]}
        question = Question(
            benchmark="seceval",
            task="mcqa",
            id=item["id"],
            index=i,
            text=item["question"],
            choices=choices,
            gold=item["answer"],
        )
        gold = item["answer"]
        expected = "".join(sorted(set(gold)))
        assert pred("all_capital_letters", f"Answer: {gold}", question=question) == expected
        if gold:
            assert pred("final_answer_letters", f"Answer: {', '.join(gold)}", question=question) == expected
        else:
            # Empty gold: the standardized rule finds no answer where SecEval's finds "".
            assert run("final_answer_letters", "Answer: ", question=question).invalid_reason == "unparseable"


@pytest.mark.parametrize("text", ["The final answer is $\\boxed{C}$", "$\\boxed{C}$", "Answer: \\boxed{C}"])
def test_latex_boxed_answers(text):
    """Seen in real published outputs (AthenaBench gemini-2.5-flash): 'The final answer is $\\boxed{C}$'."""
    q = Question(benchmark="b", task="t", id="1", index=0, gold="C", choices={k: "" for k in "ABCD"})
    assert extract("final_answer_letter", Generation(text=text), q, "strip").prediction == "C"
    assert extract("final_answer_letters", Generation(text=text), q, "strip").prediction == "C"


# --------------------------------------------------------------------------- RedSage MCQAcc (released)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", "B"),
        ("C) Process", "C"),
        ("D. User Account", "D"),
        ("The answer is B", "B"),
        ("A firewall would stop it.", "A"),  # quirk: the article is an answer letter
        ("**C**", "C"),
        ("I think C and then D", "C"),  # the first standalone letter on the line
        ("line one\nline two\nline three\nline four\nline five\nline six\nOnly one letter: x", None),
        ("B is wrong\n1\n2\n3\n4\n5", "B"),  # beyond the last five lines: the one distinct letter
        ("B or C\n1\n2\n3\n4\n5", None),  # two distinct letters, none on the last five lines
        ("ABCD", None),  # no standalone letter, no trailing letter after a non-alphanumeric
        ("(D", "D"),  # ends with a letter after a non-alphanumeric character
        ("", None),
        ("<think>", None),
    ],
)
def test_redsage_mcq_acc_reads_as_released(text, expected):
    assert pred("redsage_mcq_acc", text, mode="keep") == expected


def test_redsage_mcq_acc_after_a_newline_stop_is_unclosed_reasoning():
    got = run("redsage_mcq_acc", "<think>", mode="keep", finish_reason="stop")
    assert (got.valid, got.invalid_reason) == (False, "unclosed_reasoning")


# --------------------------------------------------------------------------- standardized reader: echoed option lists


@pytest.mark.parametrize(
    ("text", "expected", "reason"),
    [
        (
            "A) Generate public keys\nB) Authenticate digital signatures\nC) Encrypt data using a password",
            None,
            "unparseable",
        ),  # the demo's echo: the last option listed is not an answer
        ("A) To compare log files\nB) To accelerate system performance", None, "unparseable"),
        ("C) Process", "C", None),  # one committed option line
        ("Let me look at the options.\nC) Process", "C", None),
        ("A) Audit\nB) Execution Prevention\n\nB", "B", None),  # listed, then a label-only line
        ("A) Audit\nB) Execution Prevention\nAnswer: A", "A", None),  # listed, then a marker
        ("A) Audit\nB) Execution Prevention\nC) Process\n\nThe best option is:\nC) Process", "C", None),  # restated
        ("A) Audit\nThe answer is A.", "A", None),
    ],
)
def test_standardized_reader_does_not_score_an_echoed_option_list(text, expected, reason):
    got = run("final_answer_letter", text)
    assert (got.prediction, got.invalid_reason) == (expected, reason)
    if reason:
        assert "without committing" in got.detail


def test_real_demo_style_echoes_on_cybermetric_rows():
    """CyberMetric-80 rows: a response that copies two or more options verbatim is unparseable
    under the standardized reader, whichever row; one copied option is read."""
    rows = json.loads(data_file("cybermetric", "CyberMetric-80-v1.json").read_text(encoding="utf-8"))["questions"]
    for row in rows:
        question = Question(
            benchmark="cybermetric",
            task="cm80",
            id=str(row["question"])[:20],
            index=0,
            gold=row["solution"],
            choices=row["answers"],
        )
        echo = "\n".join(f"{k}) {v}" for k, v in row["answers"].items())
        assert run("final_answer_letter", echo, question=question).invalid_reason == "unparseable"
        one = f"{row['solution']}) {row['answers'][row['solution']]}"
        assert run("final_answer_letter", one, question=question).prediction == row["solution"]


@pytest.mark.parametrize("top", [None, ()])
def test_mmlu_released_reads_a_when_no_logprobs_come_back(top):
    from pytest_benchaudit.scoring.extract import MMLU_FALLBACK

    result = run("mmlu_logprob_argmax", " B", mode="keep", top_logprobs=top)
    assert result.valid and result.prediction == "A" and result.detail.startswith(MMLU_FALLBACK)
    # with log-probabilities it is the ordinary argmax; an error is still an inference error
    assert pred("mmlu_logprob_argmax", "", mode="keep", top_logprobs=({" A": -3.0, " D": -0.2},)) == "D"
    assert run("mmlu_logprob_argmax", "", mode="keep", error="HTTP 400").invalid_reason == "inference_error"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<xml>D</xml>", "D"),
        ("The answer: <xml> b </xml>", "B"),
        ("<xml>A</xml> no, <xml>C</xml>", "C"),
        ("<xml>answer</xml>", None),
        ("<xml>E</xml>", None),
        ("ANSWER: B", None),
    ],
)
def test_xml_answer_reads_cybermetric_documented_format(text, expected):
    assert pred("xml_answer", text) == expected
