"""Property tests (hypothesis): the parsers and every extraction rule take any string without an exception.

A parser either returns its value or raises the project's usage error naming the option; it never
raises anything else (a ``KeyError``, ``IndexError``, ``TypeError`` would be a traceback for the
user).  An extraction rule reads any text (any reasoning field, any option labels) and returns an
:class:`Extraction`: a prediction, or an invalid reason, never an exception (issue 12).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_benchaudit.common.errors import UsageError
from pytest_benchaudit.inference.backend import parse_model_spec
from pytest_benchaudit.inference.cache import parse_expiry
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import Pipeline, PipelineError, field_paths, parse_override
from pytest_benchaudit.pipeline.types import Extraction, Generation, Question
from pytest_benchaudit.pipeline.variants import parse_vary
from pytest_benchaudit.report.gates import Gate, GateError, parse_gate
from pytest_benchaudit.scoring.extract import RULES, extract

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that looks like what the parsers see: field names, JSON bits, operators, letters, odd unicode.
_FIELDS = st.sampled_from(field_paths() + ["inference", "prompt", "bogus.field", ""])
_ATOMS = st.sampled_from(
    [
        "=",
        ",",
        ".",
        ":",
        "[",
        "]",
        "{",
        "}",
        '"',
        "'",
        "\\n",
        ">=",
        "<=",
        "==",
        "<",
        ">",
        "0.7",
        "70",
        "-1",
        "1e309",
        "nan",
        "true",
        "null",
        "A",
        "final_line",
        "total",
        "@",
        "http://127.0.0.1:9/v1",
        "replay:",
        "vllm:",
        "#",
        " ",
        "\x00",
        "é",
        "😀",
    ]
)
_TEXT = st.one_of(st.text(max_size=60), st.lists(st.one_of(_ATOMS, _FIELDS), max_size=8).map("".join))


def _blank() -> Pipeline:
    return Pipeline(name="check", benchmark="b", task="t")


@FAST
@given(field=_FIELDS, value=_TEXT)
def test_set_parses_or_names_the_field(field: str, value: str) -> None:
    for text in (f"{field}={value}", value):
        try:
            path, parsed = parse_override(text)
            apply_overrides(_blank(), [(path, parsed)])
        except PipelineError as err:
            assert str(err).startswith("--set ") and "\n" not in str(err).split(";")[0]


@FAST
@given(field=_FIELDS, values=st.lists(_TEXT, max_size=4))
def test_vary_parses_or_is_a_pipeline_error(field: str, values: list[str]) -> None:
    try:
        name, parsed = parse_vary(f"{field}=" + ",".join(values))
    except PipelineError as err:
        assert str(err).startswith("--vary ")
    else:
        assert name == field.strip() and parsed


@FAST
@given(text=_TEXT)
def test_gate_parses_or_is_a_gate_error(text: str) -> None:
    try:
        gate = parse_gate(text)
    except GateError as err:
        assert str(err).startswith("--gate ")
    else:
        assert isinstance(gate, Gate) and gate.benchmark


@FAST
@given(text=_TEXT)
def test_model_spec_parses_or_is_a_usage_error(text: str) -> None:
    try:
        spec = parse_model_spec(text, {})
    except UsageError as err:
        assert str(err)
    else:
        assert spec.label


@FAST
@given(text=_TEXT)
def test_cache_expiry_parses_or_is_a_value_error(text: str) -> None:
    try:
        seconds = parse_expiry(text)
    except ValueError as err:
        assert "--cache-expiry" in str(err)
    else:
        assert seconds > 0


_LABELS = st.sampled_from([("A", "B", "C", "D"), ("A", "B", "C", "D", "E"), ("T", "F", "X"), (), ("1", "2")])
_OUTPUT = st.one_of(
    st.text(max_size=200),
    st.lists(
        st.one_of(
            _ATOMS,
            st.sampled_from(
                [
                    "<think>",
                    "</think>",
                    "Answer:",
                    "ANSWER: B",
                    "**",
                    "A)",
                    "CWE-79",
                    "T1059.001",
                    "AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
                    "CVSS:3.1/",
                    "9.8",
                    "APT28",
                    "M1037",
                    "\n",
                    "\r\n",
                    "Final answer: C, D",
                ]
            ),
        ),
        max_size=12,
    ).map("".join),
)
_LOGPROBS = st.one_of(
    st.none(),
    st.lists(
        st.dictionaries(
            st.sampled_from([" A", " B", "A", "x", ""]), st.floats(allow_nan=True, allow_infinity=True), max_size=4
        ),
        max_size=2,
    ).map(tuple),
)


@pytest.mark.parametrize("rule", sorted(RULES))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    text=_OUTPUT,
    reasoning=st.one_of(st.none(), _OUTPUT),
    labels=_LABELS,
    finish=st.sampled_from([None, "stop", "length"]),
    mode=st.sampled_from(["strip", "keep"]),
    logprobs=_LOGPROBS,
    gold=st.sampled_from(["A", "b", "", "CWE-79", "AV:N", "T1059"]),
)
def test_every_extraction_rule_reads_any_text(
    rule: str,
    text: str,
    reasoning: str | None,
    labels: tuple[str, ...],
    finish: str | None,
    mode: str,
    logprobs: Any,
    gold: str,
) -> None:
    if rule == "judge":
        pytest.skip("'judge' is read by the LLM judge in the runner, not by a rule over the text")
    question = Question(
        benchmark="b", task="t", id="q1", index=0, gold=gold, choices={label: f"option {label}" for label in labels}
    )
    generation = Generation(text=text, reasoning=reasoning, finish_reason=finish, top_logprobs=logprobs)
    result = extract(rule, generation, question, mode)
    assert isinstance(result, Extraction)
    # either an answer, or the reason there is none (charged to a pipeline stage), never both or neither
    assert (result.prediction is None) == (result.invalid_reason is not None), result
