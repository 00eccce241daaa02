"""Upstream differences by what is sent (``benchaudit audit``'s ``upstream_differences``): each question is
rendered under both layers and the requests compared byte for byte; identical requests are never an
upstream difference, and top_p/seed at temperature 0 are "no effect expected" with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SUITES
from pytest_benchaudit.audit.upstream import compare_sent
from pytest_benchaudit.audit.whole import upstream_differences
from pytest_benchaudit.pipeline.stages import build_pipeline
from pytest_benchaudit.pipeline.types import Question
from pytest_benchaudit.prompt.templates import Template

QUESTIONS = [
    Question(
        benchmark="toy",
        task="t",
        id=f"q{i}",
        index=i,
        text=f"Question {i}?",
        choices={"A": "yes", "B": "no"},
        gold="A",
        prompt=f"Ready-made prompt {i}.\nAnswer: ",
    )
    for i in range(4)
]
TEMPLATES = {
    "released": Template(user="{prompt}"),
    "dataset_prompt": Template(user="{prompt}"),
    "other": Template(user="{prompt} "),
    "mcq": Template(user="{question}\n{options}"),
}


def _pipe(name: str, **fields: Any) -> Any:
    base: dict[str, Any] = {
        "prompt": {"template": "released", "format": {"mode": "chat", "system_role": "none", "few_shot": 0}},
        "inference": {"decoding": {"temperature": 0.0}},
    }
    for path, value in fields.items():
        node = base
        *heads, last = path.split("__")
        for h in heads:
            node = node.setdefault(h, {})
        node[last] = value
    return build_pipeline(name, "toy", "t", base)


def _verdicts(a: Any, b: Any) -> dict[str, str]:
    return {v.field: v.verdict for v in compare_sent(a, b, TEMPLATES, QUESTIONS).fields}


def test_two_template_names_with_the_same_text_are_the_same_request() -> None:
    sent = compare_sent(
        _pipe("released"), _pipe("standardized", prompt__template="dataset_prompt"), TEMPLATES, QUESTIONS
    )
    (v,) = sent.fields
    assert (v.field, v.verdict, v.n_identical) == ("prompt.template", "same_request", 4)
    assert sent.n_identical == sent.n_questions == 4
    # one trailing space is another request
    assert _verdicts(_pipe("released"), _pipe("s", prompt__template="other")) == {
        "prompt.template": "needs_generations"
    }


def test_top_p_and_seed_at_temperature_zero_have_no_effect_and_elsewhere_they_do() -> None:
    greedy = _pipe(
        "s",
        inference__decoding={"temperature": 0.0, "top_p": 1.0, "seed": 42},
        inference__max_tokens=2048,
        prompt__template="dataset_prompt",
    )
    sent = compare_sent(_pipe("released"), greedy, TEMPLATES, QUESTIONS)
    got = {v.field: (v.verdict, v.reason) for v in sent.fields}
    assert got["prompt.template"][0] == "same_request"
    assert got["inference.decoding.top_p"][0] == got["inference.decoding.seed"][0] == "no_effect"
    assert "temperature is 0 on both sides" in got["inference.decoding.seed"][1]
    assert got["inference.max_tokens"][0] == "needs_generations" and "4 of 4" in got["inference.max_tokens"][1]
    sampled = {"temperature": 0.7}
    assert _verdicts(
        _pipe("r", inference__decoding=sampled), _pipe("s", inference__decoding={**sampled, "seed": 42})
    ) == {"inference.decoding.seed": "needs_generations"}
    # temperature unspecified: the provider's default decides, which need not be greedy
    assert _verdicts(
        _pipe("r", inference__decoding={"temperature": "unspecified"}),
        _pipe("s", inference__decoding={"temperature": "unspecified", "top_p": 1.0}),
    ) == {"inference.decoding.top_p": "needs_generations"}


def test_a_field_that_matters_only_next_to_another_change_is_not_called_harmless() -> None:
    """system_role changes nothing under a template without system text, but the target template has one."""
    templates = {**TEMPLATES, "with_system": Template(system="You are an expert.", user="{prompt}")}
    a = _pipe("r")
    b = _pipe(
        "s", prompt__template="with_system", prompt__format={"mode": "chat", "system_role": "system", "few_shot": 0}
    )
    got = {v.field: v.verdict for v in compare_sent(a, b, templates, QUESTIONS).fields}
    assert got == {"prompt.format.system_role": "needs_generations", "prompt.template": "needs_generations"}


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(alphabet=st.characters(blacklist_characters="{}", blacklist_categories=("Cs",)), max_size=60),
    placeholder=st.sampled_from(["{prompt}", "{question}", "{options}", "{labels}", ""]),
    system=st.one_of(st.none(), st.text(alphabet="abc .", min_size=1, max_size=10)),
    role=st.sampled_from(["system", "prepend_user", "none"]),
)
def test_byte_identical_requests_are_never_an_upstream_difference(
    text: str, placeholder: str, system: str | None, role: str
) -> None:
    """Metamorphic: two layers whose templates differ only in name (any text, any system role) render the
    same bytes, so no field of theirs is an upstream difference."""
    tpl = Template(user=text + placeholder, system=system)
    templates = {"one": tpl, "two": tpl}
    fmt = {"mode": "chat", "system_role": role, "few_shot": 0}
    sent = compare_sent(
        _pipe("r", prompt__template="one", prompt__format=fmt),
        _pipe("s", prompt__template="two", prompt__format=fmt),
        templates,
        QUESTIONS,
    )
    assert sent.n_identical == len(QUESTIONS)
    assert [v.verdict for v in sent.fields] == ["same_request"]


def test_athenabench_identical_templates_are_no_upstream_difference(real_data: Path, tmp_path: Path) -> None:
    """AthenaBench's released and dataset_prompt templates are both user = "{prompt}": for the five tasks whose
    standardized layer uses dataset_prompt, prompt.template is a same request; MCQ's standard_mcq is not."""
    from pytest_benchaudit.importers import import_athenabench_runs
    from pytest_benchaudit.runs.store import read_run_json

    source = real_data / "athenabench" / "runs-mini"
    if not source.is_dir():
        pytest.skip(f"real-data folder missing: {source}")
    import_athenabench_runs(source, tmp_path, SUITES, str(real_data))
    run = sorted(p for p in tmp_path.iterdir() if (p / "run.json").is_file())[0]
    rows = {
        r["task"]: r
        for r in upstream_differences(read_run_json(run)["pipeline_cards"], "standardized", SUITES, str(real_data))
    }
    assert sorted(rows) == [f"athenabench.{t}" for t in ("ate", "mcq", "rcm", "rms", "taa", "vsp")]
    for key, row in rows.items():
        needs = {d["field"] for d in row["fields"]}
        no_effect = {d["field"]: d["reason"] for d in row["no_effect"]}
        assert row["compared"] == "rendered requests"
        assert ("prompt.template" in needs) == (key == "athenabench.mcq"), key
        assert "inference.max_tokens" in needs  # unspecified (API default) -> 2048: a real difference
        assert set(no_effect) == {"inference.decoding.top_p", "inference.decoding.seed"}
        assert all("temperature is 0" in why for why in no_effect.values())
        if key != "athenabench.mcq":
            (same,) = row["same_request"]
            assert same["field"] == "prompt.template" and same["questions_identical"] == row["requests"]["questions"]
    # the record the import wrote is what the released layer renders (the comparison's own base)
    rec = json.loads((run / "records.jsonl").read_text().splitlines()[0])
    assert rec["request"]["params"] == {"temperature": 0.0}


def test_without_the_data_the_fields_are_compared_by_value_and_it_says_so(tmp_path: Path) -> None:
    from pytest_benchaudit.dataset.suites import load_suite

    card = load_suite(SUITES / "athenabench" / "suite.toml").pipeline("vsp", "released").card()
    (row,) = upstream_differences({"athenabench.vsp": card}, "standardized", SUITES, str(tmp_path / "nothing"))
    assert row["compared"] == "by value" and "requests not rendered" in row["note"]
    assert "prompt.template" in {d["field"] for d in row["fields"]}


def test_a_field_the_stored_card_predates_is_no_upstream_difference(real_data: Path) -> None:
    """A card written before a field existed does not name it; its pipeline takes the default, which renders
    the same requests: no row (was: listed as needing new generations)."""
    from pytest_benchaudit.dataset.suites import load_suite

    card = load_suite(SUITES / "athenabench" / "suite.toml").pipeline("vsp", "released").card()
    card["fields"].pop("inference.reask_on_invalid")
    assert upstream_differences({"athenabench.vsp": card}, "released", SUITES, str(real_data)) == []
