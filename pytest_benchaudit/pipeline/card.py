"""Pipeline cards of what items actually used: fixture overrides, per-item cards, suite files, warnings.

A task's card is made at collection from its suite layer (and ``--set``); an item whose
``pipeline`` or ``question`` fixture is overridden in a ``conftest.py`` (or a plugin) may ask
and score with something else.  :func:`item_card` then makes the card of the pipeline the item
used: its fields, its hashes, and each field that differs from the collected card listed in
``overrides`` with its origin (``conftest.py:12``) in ``override_origins``.  The collected
card's hash stays in ``suite_hash`` (what ``--resume`` compares a new collection with).

Cards also carry what a run was made from beyond the fields: ``suite_files`` (sha256 of
suite.toml and the files it reads, keyed by their path) and ``warnings`` (a data file that
differs from the checksum its suite pins).  :func:`suite_file_changes` and
:func:`run_warnings` read them back for ``--resume`` and for run.json.

Pure: no pytest, no I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

from pytest_benchaudit.pipeline.stages import Pipeline

__all__ = ["QUESTION_MATERIAL", "add_item_card", "item_card", "merge_cards", "run_warnings", "suite_checksums",
           "suite_file_changes", "suite_hash"]

# The material an overridden ``question`` fixture adds (upstream: the data file no longer says what was asked).
QUESTION_MATERIAL = "dataset.question_fixture"
SET_ORIGIN = "--set"


def suite_hash(card: Mapping[str, Any]) -> Any:
    """The hash of the card as collected from the suite, before any fixture changed it."""
    return card.get("suite_hash", card.get("hash"))


def item_card(collected: Mapping[str, Any], pipeline: Pipeline, materials: Mapping[str, Any],
              pipeline_origin: str | None, question_origin: str | None) -> dict[str, Any]:
    """The card of what one item used, made from its task's ``collected`` card.

    ``pipeline``: the item's pipeline (after every fixture), ``materials`` its materials
    (:meth:`Pipeline.card`); ``pipeline_origin`` / ``question_origin``: where the fixture that
    replaced the pipeline / the question is defined (``None``: not replaced).  Returns
    ``collected`` itself when nothing differs.
    """
    mats = dict(materials)
    if question_origin is not None:
        mats[QUESTION_MATERIAL] = question_origin
    own = pipeline.card(mats)
    if own["hash"] == collected.get("hash"):
        return dict(collected)
    before = collected.get("fields") or {}
    changed = {f: v for f, v in own["fields"].items() if before.get(f, _MISSING) != v}
    origins = {f: SET_ORIGIN for f in collected.get("overrides") or {}}
    origins.update(collected.get("override_origins") or {})
    overrides = dict(collected.get("overrides") or {})
    for name, value in changed.items():
        overrides[name] = value
        origins[name] = pipeline_origin or "a fixture"
    if question_origin is not None:
        overrides["question"] = f"replaced by the question fixture at {question_origin}"
        origins["question"] = question_origin
    card = {**collected, **{k: own[k] for k in ("hash", "upstream_hash", "fields", "unspecified")},
            "overrides": overrides, "override_origins": origins, "materials": mats,
            "suite_hash": suite_hash(collected),
            "suite_upstream_hash": collected.get("suite_upstream_hash", collected.get("upstream_hash"))}
    return card


_MISSING = object()


def merge_cards(into: dict[str, dict[str, Any]], cards: Mapping[str, dict[str, Any]]) -> None:
    """Add ``cards`` (an xdist worker's) to ``into``: a card an item made (it has ``suite_hash``)
    is never replaced by the card collected for the same task, and two different item cards of
    one task are both kept (the later under the first's ``item_pipelines``, by hash)."""
    for key, card in cards.items():
        have = into.get(key)
        if "suite_hash" in card:
            add_item_card(into, key, card)
        elif have is None or "suite_hash" not in have:
            into[key] = card


def add_item_card(cards: dict[str, dict[str, Any]], key: str, card: dict[str, Any]) -> None:
    """Record the item card ``card`` under ``key``: the first one made replaces the collected card;
    one with another hash (a fixture that changes some items only) goes under ``item_pipelines``."""
    have = cards.get(key)
    if have is None or "suite_hash" not in have:
        cards[key] = card
        return
    if card["hash"] == have["hash"]:
        return
    others = {**(have.get("item_pipelines") or {}), **(card.get("item_pipelines") or {})}
    if card["hash"] not in others:
        others[card["hash"]] = {k: card[k] for k in ("upstream_hash", "overrides", "override_origins")}
    cards[key] = {**have, "item_pipelines": others}


def suite_checksums(cards: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Every suite file the cards were made from and its sha256 (run.json ``suite_checksums``)."""
    out: dict[str, str] = {}
    for card in cards.values():
        out.update(card.get("suite_files") or {})
    return dict(sorted(out.items()))


def suite_file_changes(old: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """``"FILE (sha256 abc… then, def… now)"`` for each suite file both runs read whose checksum differs."""
    return [f"{name} (sha256 {old[name][:12]}… then, {digest[:12]}… now)"
            for name, digest in sorted(now.items()) if name in old and old[name] != digest]


def run_warnings(cards: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """The warnings the cards carry, each once (``{"kind", "message"}``), in card order."""
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for card in cards.values():
        for warning in card.get("warnings") or ():
            seen.setdefault((str(warning.get("kind")), str(warning.get("message"))), dict(warning))
    return list(seen.values())
