"""CVSS rules and metrics against the ``cvss`` library itself (issue 33, item 15: the mutation check).

Each test here kills mutants of ``scoring/tasks/cvss.py`` that no other test noticed: which vector of
a draft-then-final answer is read, a near miss counted correct, lower-case metric values, a prediction
carrying its own prefix, a gold that does not parse.  Expected values come from ``cvss.CVSS3`` called
here directly (the oracle the released scorers use), never from the module under test; the vectors are
drawn by hypothesis from the full CVSS v3 base-metric alphabet.
"""

from __future__ import annotations

import pytest
from cvss import CVSS3
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.pipeline.types import Generation, Question, UnscorablePrediction
from pytest_benchaudit.scoring.tasks import cvss

GEN = Generation(text="")
NAMES = ("AV", "AC", "PR", "UI", "S", "C", "I", "A")
LETTERS = ("NALP", "LH", "NLH", "NR", "UC", "NLH", "NLH", "NLH")

vectors = st.tuples(*(st.sampled_from(v) for v in LETTERS)).map(
    lambda values: "/".join(f"{n}:{x}" for n, x in zip(NAMES, values))
)


def q(gold: str, qid: str = "vsp-7") -> Question:
    return Question(benchmark="b", task="vsp", id=qid, index=0, gold=gold)


def oracle(vector: str) -> float:
    """The base score as the ``cvss`` library computes it (what both released scorers call)."""
    return float(CVSS3(vector).scores()[0])


# --------------------------------------------------------------------------- metrics against the library


@settings(max_examples=40, deadline=None)
@given(pred=vectors, gold=vectors)
def test_every_metric_is_the_library_difference(pred: str, gold: str) -> None:
    d = abs(oracle("CVSS:3.1/" + pred) - oracle("CVSS:3.1/" + gold))
    std = cvss.cvss_abs_diff(pred, q("CVSS:3.1/" + gold), {})
    assert std.value == pytest.approx(d) and std.correct is (d == 0)
    cti = cvss.cvss_abs_diff_cti(pred, q("CVSS:3.1/" + gold), {})
    assert cti.value == pytest.approx(abs(oracle("CVSS:3.0/" + pred) - oracle("CVSS:3.1/" + gold)))
    assert cti.correct is (cti.value == 0)
    close = cvss.cvss_closeness_athena("CVSS:3.1/" + pred, q("CVSS:3.1/" + gold), {})
    assert close.value == pytest.approx(1 - d / 7.7) and close.correct is (d == 0)


def test_a_near_miss_is_never_correct() -> None:
    gold = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"  # 9.8
    near = "CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H"  # 8.8: one metric off
    assert oracle(gold) - oracle(near) == pytest.approx(1.0)
    for name in ("cvss_abs_diff", "cvss_abs_diff_cti", "cvss_closeness_athena"):
        s = cvss.METRICS[name](near, q(gold), {})
        assert not s.correct, name
        assert cvss.METRICS[name](gold, q(gold), {}).correct, name
    assert cvss.cvss_closeness_athena(near, q(gold), {}).value == pytest.approx(1 - 1 / 7.7)


def test_cti_metric_keeps_a_prediction_that_carries_its_own_prefix() -> None:
    """A ``CVSS:3.1/`` prediction (a non-released rule) is scored as it stands, not prefixed a second time."""
    gold = "CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:L/I:L/A:N"
    pred = "cvss:3.1/av:l/ac:l/pr:l/ui:n/s:u/c:n/i:n/a:h"  # lower case as a model may write it
    s = cvss.cvss_abs_diff_cti(pred, q(gold), {})
    assert s.value == pytest.approx(abs(oracle(pred.upper()) - oracle(gold)))
    # Without a prefix the released 'CVSS:3.0/' is put in front: lower-case values are upper-cased first.
    s = cvss.cvss_abs_diff_cti("av:l/ac:l/pr:l/ui:n/s:u/c:n/i:n/a:h", q(gold.lower()), {})
    assert s.value == pytest.approx(abs(oracle("CVSS:3.0/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:H") - oracle(gold)))


@pytest.mark.parametrize("name", ["cvss_abs_diff", "cvss_abs_diff_cti", "cvss_closeness_athena"])
def test_a_gold_that_does_not_parse_is_unscorable_and_names_the_question(name: str) -> None:
    good = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"
    with pytest.raises(UnscorablePrediction, match="vsp-7"):
        cvss.METRICS[name](good, q("CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:Q"), {})
    with pytest.raises(UnscorablePrediction):
        cvss.METRICS[name]("CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:Q", q(good), {})


# --------------------------------------------------------------------------- rules: which vector is read


@settings(max_examples=25, deadline=None)
@given(draft=vectors, final=vectors)
def test_draft_then_final_reads_the_final_vector(draft: str, final: str) -> None:
    text = f"My first thought: {draft}\nOn reflection the final vector is:\nCVSS:3.1/{final}\n"
    assert cvss.cvss_last_vector(text, q(""), GEN)[0] == final
    assert cvss.cvss_final_vector(text, q(""), GEN)[0] == "CVSS:3.1/" + final
    assert cvss.athena_cvss31(text, q(""), GEN)[0] == "CVSS:3.1/" + final
    # Two on the last line: the last one, for the released and the standardized rule alike.
    two = f"{draft} then {final}"
    assert cvss.cvss_last_vector(two, q(""), GEN)[0] == final
    assert cvss.cvss_final_vector(two, q(""), GEN)[0] == "CVSS:3.1/" + final


def test_lower_case_metric_values_are_read_and_scored() -> None:
    vec = "AV:N/AC:H/PR:L/UI:R/S:C/C:L/I:H/A:N"
    lower = vec.lower()
    values_lower = "/".join(f"{m.split(':')[0]}:{m.split(':')[1].lower()}" for m in vec.split("/"))  # AV:n/AC:h/...
    read, _ = cvss.cvss_last_vector(f"Vector: {values_lower}", q(""), GEN)
    assert read == values_lower  # kept as written: the released scorer upper-cases it
    assert cvss.cvss_abs_diff_cti(read, q("CVSS:3.1/" + vec), {}).correct
    assert (
        cvss.cvss_last_vector(f"Vector: {lower}", q(""), GEN)[0] is None
    )  # the released pattern's names are upper case
    assert cvss.cvss_final_vector(f"cvss:3.0/{lower}", q(""), GEN)[0] == "CVSS:3.1/" + vec
    # A vector the library rejects once upper-cased is no answer for the released rule.
    assert cvss.cvss_last_vector("AV:Z/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", q(""), GEN)[0] is None
    assert cvss.cvss_last_vector("no vector here", q(""), GEN)[0] is None
    assert cvss.cvss_final_vector("", q(""), GEN)[0] is None


def test_athena_rule_reads_only_parseable_prefixed_vectors() -> None:
    vec = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"
    assert cvss.athena_cvss31(f"Answer:\n{vec}", q(""), GEN)[0] == vec
    assert cvss.athena_cvss31("Answer: CVSS:3.1/AV:N/AC:L", q(""), GEN)[0] is None  # truncated: no parse
    assert cvss.athena_cvss31("", q(""), GEN)[0] is None
