"""pipeline/card.py: the card of what an item used, and how the cards of several processes merge."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from pytest_benchaudit.pipeline.card import (
    USED,
    add_item_card,
    item_card,
    merge_cards,
    public_cards,
    resumed_cards,
    run_warnings,
    suite_file_changes,
)
from pytest_benchaudit.pipeline.layering import apply_overrides
from pytest_benchaudit.pipeline.stages import Pipeline

BASE = Pipeline(
    name="standardized",
    benchmark="toy",
    task="mcq",
    inference={"max_tokens": 64},
    scoring={"metric": "exact_match", "denominator": "total"},
)
MATERIALS = {"prompt.template_text": {"user": "{question}"}, "dataset.checksums": {"toy.jsonl": "ab" * 32}}


def collected() -> dict[str, Any]:
    return BASE.card(MATERIALS)


def test_an_unchanged_pipeline_gives_the_collected_card() -> None:
    same = apply_overrides(BASE, [("inference.max_tokens", 64)]).model_copy(update={"overrides": {}})
    assert item_card(collected(), same, MATERIALS, "conftest.py:5", None) == collected()


def test_an_item_card_names_each_changed_field_and_its_origin() -> None:
    card_in = {**collected(), "overrides": {"scoring.denominator": "valid"}}
    pipe = apply_overrides(BASE, [("inference.max_tokens", 7), ("inference.stop", ["\n"])])
    card = item_card(card_in, pipe, MATERIALS, "conftest.py:5", None)
    assert card["overrides"] == {"scoring.denominator": "valid", "inference.max_tokens": 7, "inference.stop": ["\n"]}
    assert card["override_origins"] == {
        "scoring.denominator": "--set",
        "inference.max_tokens": "conftest.py:5",
        "inference.stop": "conftest.py:5",
    }
    assert card["hash"] == pipe.card(MATERIALS)["hash"] and card["suite_hash"] == card_in["hash"]
    assert card["suite_upstream_hash"] == card_in["upstream_hash"] != card["upstream_hash"]


def test_materials_move_the_hashes_as_their_stage_says() -> None:
    card = collected()
    edited = BASE.card({**MATERIALS, "prompt.template_text": {"user": "Q: {question}"}})
    judged = BASE.card({**MATERIALS, "scoring.judge": {"prompts_sha256": "00"}})
    assert edited["hash"] != card["hash"] and edited["upstream_hash"] != card["upstream_hash"]  # upstream material
    assert judged["hash"] != card["hash"] and judged["upstream_hash"] == card["upstream_hash"]  # downstream one
    assert BASE.card()["hash"] == BASE.hash  # without materials: the pipeline's own hashes


def _worker_cards() -> list[dict[str, dict[str, Any]]]:
    key = "toy.mcq"
    seven = item_card(collected(), apply_overrides(BASE, [("inference.max_tokens", 7)]), MATERIALS, "c.py:1", None)
    eight = item_card(collected(), apply_overrides(BASE, [("inference.max_tokens", 8)]), MATERIALS, "c.py:1", None)
    return [{key: {**collected(), USED: True}}, {key: seven}, {key: eight}, {key: collected()}]


def test_merged_worker_cards_list_every_pipeline_used_in_any_order() -> None:
    results = []
    for order in itertools.permutations(_worker_cards()):
        into: dict[str, dict[str, Any]] = {}
        for cards in order:
            merge_cards(into, copy.deepcopy(cards))
        card = public_cards(into)["toy.mcq"]
        assert USED not in card
        results.append(({card["hash"], *card.get("item_pipelines", {})}, card["suite_hash"]))
    seven, eight = (c["toy.mcq"]["hash"] for c in _worker_cards()[1:3])
    assert all(hashes == {seven, eight, collected()["hash"]} for hashes, _ in results)
    assert {suite for _, suite in results} == {collected()["hash"]}


def test_a_collected_card_nobody_used_is_not_listed() -> None:
    into: dict[str, dict[str, Any]] = {}
    seven = _worker_cards()[1]
    for cards in (seven, {"toy.mcq": collected()}):
        merge_cards(into, copy.deepcopy(cards))
    assert "item_pipelines" not in into["toy.mcq"] and into["toy.mcq"]["hash"] == seven["toy.mcq"]["hash"]


def test_add_item_card_keeps_the_collected_card_its_items_used() -> None:
    cards = {"toy.mcq": collected()}
    seven = _worker_cards()[1]["toy.mcq"]
    add_item_card(cards, "toy.mcq", seven, collected_used=True)
    assert cards["toy.mcq"]["hash"] == seven["hash"]
    assert list(cards["toy.mcq"]["item_pipelines"]) == [collected()["hash"]]


def test_a_resumed_run_keeps_its_card_and_lists_a_new_pipeline() -> None:
    seven = _worker_cards()[1]["toy.mcq"]
    out = resumed_cards({"toy.mcq": seven}, {"toy.mcq": collected()})
    assert out["toy.mcq"]["hash"] == seven["hash"] and collected()["hash"] in out["toy.mcq"]["item_pipelines"]
    assert resumed_cards({"toy.mcq": collected()}, {"toy.mcq": seven}) == {"toy.mcq": seven}


def test_suite_file_changes_and_warnings() -> None:
    assert suite_file_changes(
        {"a.toml": "1" * 64, "b.toml": "2" * 64}, {"a.toml": "1" * 64, "b.toml": "3" * 64, "c.toml": "4" * 64}
    ) == [f"b.toml (sha256 {'2' * 12}… then, {'3' * 12}… now)"]
    warning = {"kind": "data_checksum", "message": "x"}
    assert run_warnings({"a": {"warnings": [warning]}, "b": {"warnings": [warning]}, "c": {}}) == [warning]
