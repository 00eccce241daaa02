"""Tests for pytest_benchaudit.pipeline.stages: ``--set`` parsing and validation, layer building,
the pipeline hash / upstream hash, the pipeline card and ``unspecified_fields``.

Pure tests: no data files, no network."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from pytest_benchaudit.pipeline.layering import apply_overrides, deep_merge
from pytest_benchaudit.pipeline.stages import (
    CARD_VERSION,
    DOWNSTREAM_STAGES,
    UNSPECIFIED,
    UPSTREAM_STAGES,
    Pipeline,
    PipelineError,
    build_pipeline,
    field_paths,
    is_unspecified,
    parse_override,
)

# A fully specified pipeline (every stage field set), close to the project's standardized layer.
FULL: dict = {
    "dataset": {"source": "https://example.org/bench", "revision": "abc123", "files": ["q.json"], "split": "test"},
    "prompt": {"template": "standard_mcq", "format": {"mode": "chat", "system_role": "none", "few_shot": 0}},
    "inference": {
        "decoding": {"temperature": 0.0, "top_p": 1.0, "seed": 42},
        "max_tokens": 2048,
        "stop": [],
    },
    "extraction": {"rule": "final_answer_letter", "reasoning": "strip"},
    "scoring": {"metric": "exact_match", "denominator": "total"},
    "aggregation": {"method": "micro"},
}


def full(**extra) -> Pipeline:
    return build_pipeline("standardized", "bench", "task", {**FULL, **extra})


def override(pipe: Pipeline, *texts: str) -> Pipeline:
    return apply_overrides(pipe, [parse_override(t) for t in texts])


# --------------------------------------------------------------------------- parse_override


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("inference.max_tokens=5", "inference.max_tokens", 5),
        ("inference.decoding.temperature=0.7", "inference.decoding.temperature", 0.7),
        ("inference.decoding.seed=null", "inference.decoding.seed", None),
        ('inference.stop=["\\n", "###"]', "inference.stop", ["\n", "###"]),
        ("prompt.template=released", "prompt.template", "released"),  # not JSON: plain string
        ('prompt.template="released"', "prompt.template", "released"),  # JSON string
        ("scoring.denominator=valid", "scoring.denominator", "valid"),
        ("aggregation.by=topics", "aggregation.by", "topics"),
        ("extraction.rule=a=b", "extraction.rule", "a=b"),  # only the first '=' splits
        ("  inference.max_tokens =7", "inference.max_tokens", 7),  # field name is stripped
        ("prompt.template=", "prompt.template", ""),
    ],
)
def test_parse_override_reads_json_else_plain_string(text, field, value):
    assert parse_override(text) == (field, value)


def test_parse_override_keeps_json_types_distinct():
    # A quoted number stays a string; an unquoted one is an int.
    assert parse_override('inference.max_tokens="5"') == ("inference.max_tokens", "5")
    assert type(parse_override("inference.max_tokens=5")[1]) is int
    assert type(parse_override("inference.decoding.temperature=1.0")[1]) is float


def test_parse_override_without_equals_sign():
    with pytest.raises(PipelineError, match=r"expected FIELD=VALUE") as exc:
        parse_override("inference.max_tokens")
    assert "inference.max_tokens" in str(exc.value)


@pytest.mark.parametrize("bad", ["inference.max_token", "temperature", "inference.decoding.temp", "why", "name"])
def test_parse_override_unknown_field_names_it_and_lists_known_ones(bad):
    with pytest.raises(PipelineError) as exc:
        parse_override(f"{bad}=5")
    msg = str(exc.value)
    assert f"unknown field {bad!r}" in msg
    assert "known fields:" in msg
    listed = msg.split("known fields:", 1)[1]
    for known in (
        "inference.max_tokens",
        "inference.decoding.temperature",
        "scoring.denominator",
        "prompt.format.few_shot",
    ):
        assert known in listed


def test_field_paths_cover_every_stage_and_nested_field():
    paths = field_paths()
    assert len(paths) == len(set(paths))
    for stage in (*UPSTREAM_STAGES, *DOWNSTREAM_STAGES):
        assert stage in paths
    for leaf in (
        "dataset.split",
        "prompt.template",
        "prompt.format.mode",
        "prompt.format.system_role",
        "prompt.format.few_shot",
        "inference.decoding.temperature",
        "inference.decoding.top_p",
        "inference.decoding.seed",
        "inference.decoding.top_logprobs",
        "inference.max_tokens",
        "inference.stop",
        "extraction.rule",
        "extraction.reasoning",
        "scoring.metric",
        "scoring.denominator",
        "aggregation.method",
        "aggregation.by",
    ):
        assert leaf in paths
    # Metadata of the pipeline is not a stage field and cannot be --set.
    for meta in ("name", "benchmark", "task", "why", "notes", "overrides"):
        assert meta not in paths


# --------------------------------------------------------------------------- apply_overrides: values


def test_stop_from_string_with_literal_backslash_n_becomes_newline():
    field, value = parse_override(r"inference.stop=\n")
    assert value == "\\n"  # what the shell hands over: backslash + n
    pipe = apply_overrides(full(), [(field, value)])
    assert pipe.inference.stop == ("\n",)
    assert pipe.overrides == {"inference.stop": "\\n"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (r"\n\n", ("\n\n",)),
        (r"\t###", ("\t###",)),
        ("Question:", ("Question:",)),
        # Non-ASCII stop strings must survive the escape decoding unchanged.
        ("Réponse", ("Réponse",)),
        ("→", ("→",)),
        (r"é\n", ("é\n",)),
    ],
)
def test_stop_string_escapes_decoded_and_text_kept(raw, expected):
    pipe = override(full(), f"inference.stop={raw}")
    assert pipe.inference.stop == expected


def test_stop_json_list_is_taken_as_is():
    pipe = override(full(), 'inference.stop=["\\n", "Q:"]')
    assert pipe.inference.stop == ("\n", "Q:")


def test_stop_unspecified_string_stays_unspecified():
    pipe = override(full(), "inference.stop=unspecified")
    assert pipe.inference.stop == UNSPECIFIED


def test_valid_overrides_are_applied_and_recorded():
    base = full()
    pipe = override(base, "inference.max_tokens=5", "prompt.format.few_shot=3", "scoring.denominator=valid")
    assert pipe.inference.max_tokens == 5
    assert pipe.prompt.format.few_shot == 3
    assert pipe.scoring.denominator == "valid"
    # untouched fields keep their values
    assert pipe.inference.decoding.temperature == 0.0
    assert pipe.prompt.format.mode == "chat"
    assert pipe.overrides == {"inference.max_tokens": 5, "prompt.format.few_shot": 3, "scoring.denominator": "valid"}
    # the original is frozen and unchanged
    assert base.inference.max_tokens == 2048 and base.overrides == {}


def test_overrides_accumulate_across_calls_and_last_wins():
    pipe = override(
        override(full(), "inference.max_tokens=5"), "extraction.rule=answer_regex", "inference.max_tokens=9"
    )
    assert pipe.inference.max_tokens == 9
    assert pipe.extraction.rule == "answer_regex"
    assert pipe.overrides == {"inference.max_tokens": 9, "extraction.rule": "answer_regex"}


def test_no_overrides_returns_same_pipeline():
    base = full()
    assert apply_overrides(base, []) is base


def test_override_can_set_a_field_back_to_unspecified():
    pipe = override(full(), "inference.decoding.temperature=unspecified", "inference.max_tokens=unspecified")
    assert is_unspecified(pipe.inference.decoding.temperature)
    assert is_unspecified(pipe.inference.max_tokens)


def test_override_whole_stage_with_json_object():
    pipe = override(full(), 'scoring={"metric": "letter_set_exact", "denominator": "valid"}')
    assert pipe.scoring.metric == "letter_set_exact"
    assert pipe.scoring.denominator == "valid"


@pytest.mark.parametrize(
    ("text", "field", "allowed"),
    [
        ("inference.max_tokens=abc", "inference.max_tokens", ["valid integer", "'unspecified'"]),
        ("inference.max_tokens=0", "inference.max_tokens", [">= 1"]),
        ("inference.max_tokens=-3", "inference.max_tokens", [">= 1"]),
        ("inference.max_tokens=1.5", "inference.max_tokens", ["valid integer"]),
        ("scoring.denominator=some", "scoring.denominator", ["'total'", "'valid'", "'unspecified'"]),
        ("prompt.format.few_shot=-1", "prompt.format.few_shot", [">= 0"]),
        ("prompt.format.mode=text", "prompt.format.mode", ["'chat'", "'completion'"]),
        ("prompt.format.system_role=developer", "prompt.format.system_role", ["'system'", "'prepend_user'", "'none'"]),
        ("extraction.reasoning=drop", "extraction.reasoning", ["'strip'", "'keep'"]),
        ("aggregation.method=weighted", "aggregation.method", ["'micro'", "'macro'"]),
        ("inference.decoding.temperature=hot", "inference.decoding.temperature", ["valid number"]),
        ("inference=5", "inference", ["dictionary"]),
    ],
)
def test_invalid_override_value_names_field_and_what_is_allowed(text, field, allowed):
    with pytest.raises(PipelineError) as exc:
        override(full(), text)
    msg = str(exc.value)
    assert msg.startswith(f"--set {field}: invalid value:")
    assert f"{field}:" in msg.split("invalid value:", 1)[1]  # the location inside the model
    for word in allowed:
        assert word in msg, f"{word!r} missing from {msg!r}"
    # no pydantic internals leak into the message
    assert "literal[" not in msg and "function-after" not in msg


def test_invalid_override_among_several_names_all_set_fields():
    with pytest.raises(PipelineError) as exc:
        override(full(), "inference.max_tokens=5", "scoring.denominator=some")
    msg = str(exc.value)
    assert msg.startswith("--set inference.max_tokens, scoring.denominator: invalid value:")
    assert "scoring.denominator:" in msg
    # the valid one is not reported as a problem
    assert "inference.max_tokens: " not in msg.split("invalid value:", 1)[1]


def test_boolean_is_not_accepted_as_max_tokens():
    with pytest.raises(PipelineError):
        override(full(), "inference.max_tokens=true")


# --------------------------------------------------------------------------- build_pipeline


def test_build_pipeline_defaults_are_explicitly_unspecified():
    pipe = build_pipeline("documented", "bench", "task", {})
    assert pipe.name == "documented" and pipe.benchmark == "bench" and pipe.task == "task"
    assert pipe.prompt.template == UNSPECIFIED
    assert pipe.prompt.format.mode == UNSPECIFIED
    assert pipe.inference.decoding.temperature == UNSPECIFIED
    assert pipe.inference.max_tokens == UNSPECIFIED
    assert pipe.inference.stop == UNSPECIFIED
    assert pipe.inference.decoding.top_logprobs is None
    assert pipe.scoring.denominator == UNSPECIFIED


def test_build_pipeline_unknown_field_raises_pipeline_error_naming_layer_and_field():
    with pytest.raises(PipelineError) as exc:
        build_pipeline("released", "bench", "task", {"inference": {"max_token": 5}})
    msg = str(exc.value)
    assert msg.startswith("bench.task layer 'released':")
    assert "inference.max_token" in msg


def test_build_pipeline_invalid_value_names_field():
    with pytest.raises(PipelineError, match=r"bench\.task layer 'released': scoring\.denominator"):
        build_pipeline("released", "bench", "task", {"scoring": {"denominator": "some"}})


def test_pipeline_is_frozen():
    pipe = full()
    with pytest.raises(ValidationError):
        pipe.inference.max_tokens = 3  # type: ignore[misc]


def test_deep_merge_recursive_top_wins_inputs_untouched():
    base = {"a": {"b": 1, "c": 2}, "d": 1}
    top = {"a": {"c": 3}, "e": 4}
    assert deep_merge(base, top) == {"a": {"b": 1, "c": 3}, "d": 1, "e": 4}
    assert base == {"a": {"b": 1, "c": 2}, "d": 1} and top == {"a": {"c": 3}, "e": 4}


def test_is_unspecified():
    assert is_unspecified("unspecified")
    assert not is_unspecified(None)
    assert not is_unspecified("Unspecified")
    assert not is_unspecified(0)


# --------------------------------------------------------------------------- hash


def test_hash_is_stable_and_short_hex():
    pipe = full()
    h = pipe.hash
    assert re.fullmatch(r"[0-9a-f]{16}", h)
    assert pipe.hash == h == full().hash
    assert re.fullmatch(r"[0-9a-f]{16}", pipe.upstream_hash)
    assert pipe.upstream_hash != pipe.hash


def test_hash_equal_for_equal_pipelines_regardless_of_layer_name_and_key_order():
    a = build_pipeline("standardized", "bench", "task", FULL)
    reordered = json.loads(json.dumps(FULL))
    reordered = {k: reordered[k] for k in reversed(list(reordered))}
    reordered["inference"] = {k: reordered["inference"][k] for k in reversed(list(reordered["inference"]))}
    b = build_pipeline("my-layer", "bench", "task", reordered)
    assert a.hash == b.hash
    assert a.upstream_hash == b.upstream_hash


def test_same_pipeline_via_override_hashes_like_pipeline_built_directly():
    via_set = override(full(), "inference.max_tokens=5")
    direct = build_pipeline("standardized", "bench", "task", deep_merge(FULL, {"inference": {"max_tokens": 5}}))
    assert via_set.hash == direct.hash  # the overrides record does not enter the hash


STAGE_CHANGES = [
    "dataset.split=dev",
    "dataset.revision=def456",
    "dataset.subset=web",
    "prompt.template=released",
    "prompt.format.mode=completion",
    "prompt.format.system_role=system",
    "prompt.format.few_shot=5",
    "inference.decoding.temperature=0.7",
    "inference.decoding.top_p=0.9",
    "inference.decoding.seed=7",
    "inference.decoding.top_logprobs=20",
    "inference.max_tokens=5",
    r"inference.stop=\n",
    "extraction.rule=answer_regex",
    "extraction.reasoning=keep",
    "scoring.metric=letter_set_exact",
    "scoring.denominator=valid",
    "aggregation.method=macro",
    "aggregation.by=topics",
]


@pytest.mark.parametrize("change", STAGE_CHANGES)
def test_hash_changes_when_any_stage_field_changes(change):
    base = full()
    changed = override(base, change)
    assert changed.hash != base.hash
    field = change.split("=", 1)[0]
    if field.split(".")[0] in UPSTREAM_STAGES:
        assert changed.upstream_hash != base.upstream_hash
    else:
        assert changed.upstream_hash == base.upstream_hash


def test_stage_changes_cover_every_stage():
    assert {c.split(".")[0] for c in STAGE_CHANGES} == {*UPSTREAM_STAGES, *DOWNSTREAM_STAGES}


def test_hash_ignores_why_and_notes():
    base = full()
    annotated = full(why={"inference.max_tokens": "because"}, notes=["a note", "another"])
    other = full(why={"inference.max_tokens": "another reason", "scoring.metric": "x"}, notes=[])
    assert annotated.why and annotated.notes
    assert base.hash == annotated.hash == other.hash
    assert base.upstream_hash == annotated.upstream_hash == other.upstream_hash


def test_upstream_hash_unchanged_by_downstream_override():
    base = full()
    down = override(
        base, "extraction.rule=all_capital_letters", "scoring.denominator=valid", "aggregation.method=macro"
    )
    assert down.upstream_hash == base.upstream_hash
    assert down.hash != base.hash


def test_upstream_hash_changed_by_upstream_override():
    base = full()
    up = override(base, "inference.max_tokens=16")
    assert up.upstream_hash != base.upstream_hash
    assert up.hash != base.hash


def test_hash_distinguishes_unspecified_from_empty_stop():
    assert full().hash != override(full(), "inference.stop=unspecified").hash


# --------------------------------------------------------------------------- card / unspecified


def test_card_structure():
    pipe = override(full(why={"inference.max_tokens": "room to reason"}, notes=["n1"]), "inference.max_tokens=5")
    card = pipe.card()
    assert card["card_version"] == CARD_VERSION == "benchaudit.pipeline-card/1"
    assert card["benchmark"] == "bench" and card["task"] == "task" and card["pipeline"] == "standardized"
    assert card["hash"] == pipe.hash and card["upstream_hash"] == pipe.upstream_hash
    fields = card["fields"]
    # dotted leaf names, JSON values
    assert fields["inference.max_tokens"] == 5
    assert fields["inference.decoding.temperature"] == 0.0
    assert fields["inference.decoding.seed"] == 42
    assert fields["inference.stop"] == []
    assert fields["prompt.format.few_shot"] == 0
    assert fields["dataset.files"] == ["q.json"]
    assert fields["aggregation.by"] is None
    assert "inference" not in fields and "inference.decoding" not in fields
    assert all(k.split(".")[0] in (*UPSTREAM_STAGES, *DOWNSTREAM_STAGES) for k in fields)
    # every leaf field path appears in the card
    leaves = [p for p in field_paths() if not any(q.startswith(p + ".") for q in field_paths())]
    assert set(fields) == set(leaves)
    assert card["overrides"] == {"inference.max_tokens": 5}
    assert card["why"] == {"inference.max_tokens": "room to reason"}
    assert card["notes"] == ["n1"]
    assert card["unspecified"] == []
    json.dumps(card)  # JSON-ready


def test_card_unspecified_lists_upstream_and_downstream_fields():
    pipe = build_pipeline("documented", "bench", "task", {"prompt": {"template": "t"}})
    card = pipe.card()
    unspecified = card["unspecified"]
    assert "prompt.template" not in unspecified
    for path in (
        "dataset.source",
        "prompt.format.mode",
        "inference.decoding.temperature",
        "inference.max_tokens",
        "inference.stop",
        "extraction.rule",
        "scoring.denominator",
        "aggregation.method",
    ):
        assert path in unspecified
    # None (not asked) is not "unspecified"
    assert "inference.decoding.top_logprobs" not in unspecified
    assert "aggregation.by" not in unspecified
    assert all(card["fields"][p] == UNSPECIFIED for p in unspecified)


def test_unspecified_fields_defaults_to_downstream_stages():
    pipe = build_pipeline("documented", "bench", "task", {"extraction": {"rule": "answer_regex"}})
    assert pipe.unspecified_fields() == [
        "extraction.reasoning",
        "scoring.metric",
        "scoring.denominator",
        "aggregation.method",
    ]
    assert pipe.unspecified_fields(("inference",)) == [
        "inference.decoding.temperature",
        "inference.decoding.top_p",
        "inference.decoding.seed",
        "inference.max_tokens",
        "inference.stop",
    ]
    assert full().unspecified_fields() == []
    assert full().unspecified_fields((*UPSTREAM_STAGES, *DOWNSTREAM_STAGES)) == []


def test_unspecified_fields_follow_overrides():
    pipe = override(full(), "scoring.denominator=unspecified")
    assert pipe.unspecified_fields() == ["scoring.denominator"]
    assert pipe.card()["unspecified"] == ["scoring.denominator"]


def test_stages_returns_only_the_six_stages():
    pipe = full(why={"x": "y"}, notes=["z"])
    assert list(pipe.stages()) == [*UPSTREAM_STAGES, *DOWNSTREAM_STAGES]


@pytest.mark.parametrize(
    ("bad", "meant"),
    [
        ("inference.max_token", "inference.max_tokens"),
        ("temperature", "inference.decoding.temperature"),
        ("decoding.seed", "inference.decoding.seed"),
        ("inference.decoding.temprature", "inference.decoding.temperature"),
        ("aggregation.passk", "aggregation.pass_k"),
        ("scoring.denominater", "scoring.denominator"),
    ],
)
def test_an_unknown_field_name_says_the_nearest_known_one(bad, meant):
    """As other names (layers, rules, metrics, suites) already did: `did you mean` for --set/--vary fields."""
    from pytest_benchaudit.pipeline.variants import parse_vary

    with pytest.raises(PipelineError) as exc:
        parse_override(f"{bad}=5")
    assert f"unknown field {bad!r} (did you mean {meant!r}?)" in str(exc.value)
    with pytest.raises(PipelineError) as exc:
        parse_vary(f"{bad}=5,6")
    assert str(exc.value).startswith("--vary ") and f"(did you mean {meant!r}?)" in str(exc.value)


def test_a_name_far_from_every_field_gets_no_guess():
    with pytest.raises(PipelineError) as exc:
        parse_override("why=5")
    assert "did you mean" not in str(exc.value)


def test_check_override_checks_a_stage_alone_and_leaves_cross_stage_rules_to_the_layer():
    """An override's own stage rules are checked before any layer is known; pass_k against repeats
    waits for the layer and the other overrides (it depends on both)."""
    from pytest_benchaudit.pipeline.layering import check_override

    check_override("aggregation.pass_k", 3)  # no layer yet: how many repeats is not known
    for path, value, says in [
        ("inference.max_tokens", 0, "inference.max_tokens: max_tokens must be >= 1"),
        ("aggregation.pass_k", 0, "pass_k must be >= 1"),
        ("inference", {"max_tokens": -1}, "inference.max_tokens: max_tokens must be >= 1"),
    ]:
        with pytest.raises(PipelineError) as exc:
            check_override(path, value)
        assert str(exc.value).startswith(f"--set {path}: invalid value: ") and says in str(exc.value)
    with pytest.raises(PipelineError) as exc:
        check_override("inference.repeats", 0, "--repeats 0")
    assert str(exc.value).startswith("--repeats 0: invalid value")
