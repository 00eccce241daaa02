"""pipeline/layering.py: how layers, ``base =``, ``--set`` and re-targeting combine into one pipeline.

Properties of the merge (hypothesis), the order and the ``base =`` rule against hand-written
expectations, and metamorphic checks of ``apply_overrides`` and ``retarget`` against the fields of the
cards they produce.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_benchaudit.dataset.suites import SuiteError, load_suite
from pytest_benchaudit.pipeline.layering import (
    UpstreamChange,
    apply_overrides,
    deep_merge,
    retarget,
    task_layers,
    upstream_changes,
)
from pytest_benchaudit.pipeline.stages import DOWNSTREAM_STAGES, UPSTREAM_STAGES, PipelineError, build_pipeline

LEAVES = st.one_of(st.integers(-3, 3), st.text("xy", max_size=2), st.booleans(), st.none())
# Tables of one shape, as layers of a pipeline are: a key holds a value ("a", "b") or a table ("c", "d") in
# every table drawn (a layer that puts a value where another has a table is refused by the pipeline model;
# deep_merge is associative only on tables of one shape).
TABLES = st.recursive(
    st.fixed_dictionaries({}, optional={"a": LEAVES, "b": LEAVES}),
    lambda inner: st.fixed_dictionaries({}, optional={"a": LEAVES, "b": LEAVES, "c": inner, "d": inner}),
    max_leaves=8,
)


def _leaves(table: dict, prefix: str = "") -> dict[str, object]:
    """Flat leaves written independently of the code under test (an empty table is a leaf)."""
    out: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@settings(max_examples=200, deadline=None)
@given(TABLES, TABLES, TABLES)
def test_deep_merge_is_associative_idempotent_has_an_identity_and_leaves_its_inputs(a, b, c) -> None:
    before = copy.deepcopy((a, b, c))
    assert deep_merge(a, {}) == a and deep_merge({}, a) == a
    assert deep_merge(a, a) == a
    assert deep_merge(deep_merge(a, b), c) == deep_merge(a, deep_merge(b, c))
    assert (a, b, c) == before


@settings(max_examples=200, deadline=None)
@given(TABLES, TABLES)
def test_deep_merge_keeps_every_leaf_of_the_top_and_the_bottom_leaves_the_top_does_not_cover(base, top) -> None:
    merged = _leaves(deep_merge(base, top))
    top_leaves = _leaves(top)
    assert all(merged[k] == v for k, v in top_leaves.items() if not (v == {} and isinstance(v, dict)))
    for key, value in _leaves(base).items():
        covered = any(key == t or key.startswith(t + ".") or t.startswith(key + ".") for t in top_leaves)
        if not covered:
            assert merged[key] == value


def test_task_layers_puts_the_task_over_the_shared_layer_in_a_fixed_order_and_resolves_base() -> None:
    shared = {
        "standardized": {"prompt": {"mode": "chat", "template": "std"}, "why": {"prompt.mode": "shared"}},
        "extra": {"scoring": {"metric": "accuracy"}},
    }
    task = {
        "data": {"file": "q.json"},
        "mine": {"base": "released", "inference": {"max_tokens": 9}, "notes": ["own"]},
        "released": {"inference": {"max_tokens": 5, "decoding": {"temperature": 0}}, "notes": ["rel"]},
        "standardized": {"prompt": {"template": "task"}},
    }
    layers = task_layers("t", shared, task, frozenset({"data"}))
    # the three known layers first (those present), then the task's own tables, then shared-only ones
    assert list(layers) == ["released", "standardized", "mine", "extra"]
    assert layers["standardized"] == {"prompt": {"mode": "chat", "template": "task"}, "why": {"prompt.mode": "shared"}}
    assert layers["mine"] == {"inference": {"max_tokens": 9, "decoding": {"temperature": 0}}, "notes": ["rel", "own"]}
    assert layers["extra"] == {"scoring": {"metric": "accuracy"}}


@pytest.mark.parametrize("base", ["nope", "mine", "chained"])
def test_a_base_that_is_not_another_plain_layer_is_refused_naming_the_layers(base: str) -> None:
    task = {"released": {}, "chained": {"base": "released"}, "mine": {"base": base}}
    with pytest.raises(
        PipelineError,
        match=rf"t layer 'mine': base '{base}' must name another layer of the task "
        r"that has no base itself; layers: released, chained, mine",
    ):
        task_layers("t", {}, task, frozenset())


def test_a_suite_with_a_bad_base_is_one_suite_error_naming_the_file(tmp_path: Path) -> None:
    suite = tmp_path / "b" / "suite.toml"
    suite.parent.mkdir()
    suite.write_text(
        '[benchmark]\nname = "b"\n[tasks.t.data]\nfile = "q.json"\nformat = "json"\nquestion = "q"\ngold = "a"\n'
        '[tasks.t.released]\ninference.max_tokens = 5\n[tasks.t.released_mine]\nbase = "nope"\n'
    )
    with pytest.raises(SuiteError) as err:
        load_suite(suite)
    assert str(err.value) == (
        f"{suite}: t layer 'released_mine': base 'nope' must name another layer of the task that has "
        "no base itself; layers: released, released_mine"
    )


FULL = {
    "prompt": {"format": {"mode": "chat"}, "template": "t"},
    "inference": {"max_tokens": 5, "decoding": {"temperature": 0}},
    "extraction": {"rule": "final_line", "reasoning": "strip"},
    "scoring": {"metric": "accuracy", "denominator": "total"},
    "aggregation": {"method": "micro"},
}


def test_overrides_applied_together_equal_overrides_applied_one_at_a_time() -> None:
    base = build_pipeline("standardized", "b", "t", FULL)
    sets = [("inference.max_tokens", 7), ("scoring", {"denominator": "valid"}), ("extraction.rule", "first_letter")]
    together = apply_overrides(base, sets)
    one_by_one = base
    for change in sets:
        one_by_one = apply_overrides(one_by_one, [change])
    assert together == one_by_one
    fields = together.card()["fields"]
    assert fields["inference.max_tokens"] == 7 and fields["scoring.denominator"] == "valid"
    assert fields["scoring.metric"] == "accuracy"  # an object value merges into the stage, it does not replace it


def test_retarget_takes_the_layers_downstream_fields_and_keeps_the_stored_upstream_ones() -> None:
    stored = build_pipeline("released", "b", "t", FULL)
    layer = build_pipeline(
        "standardized",
        "b",
        "t",
        {
            **FULL,
            "inference": {"max_tokens": 2048},
            "extraction": {"rule": "first_letter", "reasoning": "keep"},
            "scoring": {"metric": "accuracy", "denominator": "valid"},
        },
    )
    new = retarget(stored, layer, [])
    got, was, want = new.card()["fields"], stored.card()["fields"], layer.card()["fields"]
    for field, value in got.items():
        stage = field.split(".")[0]
        assert value == (want[field] if stage in DOWNSTREAM_STAGES else was[field]), field
    assert new.upstream_hash == stored.upstream_hash and new.name == "standardized"
    assert any("inference.max_tokens: stored 5, asked 2048" in note for note in new.notes)
    # the extraction stage alone: the name says so and scoring stays as stored
    only = retarget(stored, layer, [], ("extraction",))
    assert only.name == "standardized~extraction" and only.scoring == stored.scoring
    assert only.extraction == layer.extraction


def test_retarget_without_a_layer_is_the_stored_pipeline_with_downstream_overrides_only() -> None:
    stored = build_pipeline("released", "b", "t", FULL)
    assert retarget(stored, None, []) == stored
    assert retarget(stored, None, [("scoring.denominator", "valid")]) == apply_overrides(
        stored, [("scoring.denominator", "valid")]
    )
    with pytest.raises(UpstreamChange, match="inference.max_tokens: stored 5, asked 9 — this needs new generations"):
        retarget(stored, None, [("inference.max_tokens", 9)])
    with pytest.raises(PipelineError, match="downstream stages only"):
        retarget(stored, stored, [], ("prompt",))


def test_upstream_changes_lists_exactly_the_upstream_fields_that_differ() -> None:
    a = build_pipeline("x", "b", "t", FULL)
    b = apply_overrides(a, [("inference.max_tokens", 9), ("prompt.template", "u"), ("scoring.denominator", "valid")])
    assert upstream_changes(a, b) == [
        "inference.max_tokens: stored 5, asked 9",
        "prompt.template: stored 't', asked 'u'",
    ]
    assert upstream_changes(a, a) == []
    assert all(change.split(".")[0] in UPSTREAM_STAGES for change in upstream_changes(a, b))
