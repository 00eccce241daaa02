"""Rule and metric metadata declared on each definition (scoring/declarations.py) and read by name (scoring/names.py).

The declarations are checked against what the functions do, not against a list restated here:
a rule declared to read log-probabilities gives the same prediction whatever the text and none
without log-probabilities; a text rule's prediction moves with its text; the strict readers
read a final-answer line and refuse a letter inside a word; a label-set metric scores a
reordered set like the set.
"""

from __future__ import annotations

import pytest

from pytest_benchaudit.pipeline.types import Generation, Question
from pytest_benchaudit.scoring import declarations, extract, metrics, names

Q = Question(
    benchmark="b", task="t", id="q", index=0, text="Which?", choices={"A": "a", "B": "b", "C": "c", "D": "d"}, gold="B"
)
LOGPROBS = ({" A": -3.0, " B": -0.1, " C": -2.0, " D": -4.0},)


def test_every_registered_rule_has_valid_metadata_and_the_defaults_are_a_text_rule() -> None:
    infos = {name: names.rule_info(name) for name in extract.RULES}
    assert all(info.reads in declarations.READS and info.answers in declarations.ANSWERS for info in infos.values())
    assert names.rule_info("no_such_rule") == declarations.RuleInfo(reads="text", answers="other", strict=False)
    assert infos["judge"].reads == "judge"
    assert names.rules_reading("judge") == {"judge"}


@pytest.mark.parametrize("name", sorted(names.rules_reading("logprobs")))
def test_a_rule_declared_to_read_logprobs_reads_no_text(name: str) -> None:
    preds = {
        extract.RULES[name](text, Q, Generation(text=text, top_logprobs=LOGPROBS))[0]
        for text in ("", "Answer: D", "C C C", "The answer is A.")
    }
    assert preds == {"B"}  # the arg-max of the log-probabilities, whatever the text says
    # without log-probabilities: no reading (or MMLU's all -100 arg-max, "A"), the same whatever the text
    bare = {extract.RULES[name](text, Q, Generation(text=text))[0] for text in ("Answer: B", "Answer: D")}
    assert bare in ({None}, {"A"})


def test_the_text_rules_named_logprob_free_move_with_their_text() -> None:
    # The complement: a rule not declared to read log-probabilities reads the answer text.
    for name in ("last_line_letter", "final_answer_letter", "answer_regex"):
        assert names.rule_info(name).reads == "text"
        a = extract.extract(name, Generation(text="Answer: A", top_logprobs=LOGPROBS), Q, "keep").prediction
        c = extract.extract(name, Generation(text="Answer: C", top_logprobs=LOGPROBS), Q, "keep").prediction
        assert (a, c) == ("A", "C"), name


def test_the_strict_readers_are_unique_and_read_only_a_final_answer_line() -> None:
    one, many = names.strict_rule("label"), names.strict_rule("labels")
    assert (one, many) == ("final_answer_letter", "final_answer_letters")
    assert sorted(n for n in extract.RULES if names.rule_info(n).strict) == [one, many]
    assert extract.extract(one, Generation(text="Bob thinks.\nFinal answer: C"), Q, "keep").prediction == "C"
    assert not extract.extract(one, Generation(text="Because of it"), Q, "keep").valid  # the B of Because is no answer
    assert extract.extract(many, Generation(text="Final answer: C, A"), Q, "keep").prediction == "AC"
    with pytest.raises(LookupError, match="strict rule answering 'other'"):
        names.strict_rule("other")


def test_the_label_set_metrics_are_those_that_score_a_set_whatever_its_order() -> None:
    sets = sorted(m for m in metrics.METRICS if names.metric_answers(m) == "labels")
    assert sets == ["label_set_match", "letter_set_exact"]
    gold = Q.model_copy(update={"gold": "AC"})
    for name in sets:
        assert metrics.METRICS[name]("AC", gold, {}).correct
        assert not metrics.METRICS[name]("A", gold, {}).correct  # a part of the set is not the set
    assert names.metric_answers("exact_match") == "other" and names.metric_answers("nope") == "other"


def test_a_declaration_is_checked_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="a strict rule reads text"):
        declarations.rule(reads="logprobs", answers="label", strict=True)
    with pytest.raises(ValueError, match="RuleInfo.reads 'tokens'"):
        declarations.rule(reads="tokens")  # type: ignore[arg-type]

    @declarations.rule(reads="continuations", answers="label")
    def mine(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
        return None, ""

    assert declarations.rule_info(mine) == declarations.RuleInfo(reads="continuations", answers="label")
    assert mine("", Q, Generation()) == (None, "")  # the function itself is unchanged
