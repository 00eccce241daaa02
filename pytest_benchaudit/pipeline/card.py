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

__all__ = ["QUESTION_MATERIAL", "USED", "add_item_card", "item_card", "merge_cards", "nearest_why",
           "note_collected_used", "public_cards", "resumed_cards", "run_warnings", "suite_checksums", "suite_file_changes", "suite_hash"]

def nearest_why(why: Mapping[str, Any], field: str) -> str | None:
    """A layer's ``why`` for a flat field name (``inference.decoding.seed``), or for the nearest field
    above it that has one (``inference.decoding``): a layer may explain a whole table at once."""
    parts = field.split(".")
    for end in range(len(parts), 0, -1):
        text = why.get(".".join(parts[:end]))
        if text:
            return str(text)
    return None


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
        return {k: v for k, v in collected.items() if k != USED}
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
    card = {**{k: v for k, v in collected.items() if k != USED},
            **{k: own[k] for k in ("hash", "upstream_hash", "fields", "unspecified")},
            "overrides": overrides, "override_origins": origins, "materials": mats,
            "suite_hash": suite_hash(collected),
            "suite_upstream_hash": collected.get("suite_upstream_hash", collected.get("upstream_hash"))}
    return card


_MISSING = object()


# On a collected card an xdist worker hands back: items of that worker ran under it.  The
# controller reads it when another worker's items made a card of the same task (merge_cards);
# public_cards leaves it out of what run.json and the summary read.
USED = "_used_by_items"


def _summary(card: Mapping[str, Any]) -> dict[str, Any]:
    return {"upstream_hash": card.get("upstream_hash"), "overrides": dict(card.get("overrides") or {}),
            "override_origins": dict(card.get("override_origins") or {})}


def _with_other(card: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """``card`` with ``other`` (and what ``other`` lists) under ``item_pipelines``, by hash."""
    others = dict(card.get("item_pipelines") or {})
    for digest, summary in [(other.get("hash"), _summary(other)), *(other.get("item_pipelines") or {}).items()]:
        if isinstance(digest, str) and digest != card.get("hash"):
            others.setdefault(digest, summary)
    return {**card, "item_pipelines": others} if others else card


def add_item_card(cards: dict[str, dict[str, Any]], key: str, card: dict[str, Any],
                  collected_used: bool = False) -> None:
    """Record the item card ``card`` under ``key``.  The first one made replaces the collected card
    (which stays listed under ``item_pipelines`` when items ran under it: ``collected_used``, or
    its :data:`USED` mark); one with another hash (a fixture that changes some items only) goes
    under ``item_pipelines``.  Every hash a record of the task carries is then in its card."""
    have = cards.get(key)
    if have is None:
        cards[key] = card
    elif "suite_hash" not in have:
        cards[key] = _with_other(card, have) if collected_used or have.get(USED) else card
    elif card["hash"] != have["hash"] or card.get("item_pipelines"):
        cards[key] = _with_other(have, card)


def note_collected_used(cards: dict[str, dict[str, Any]], key: str, collected: Mapping[str, Any]) -> None:
    """An item ran under its task's collected card: where an item card has replaced that card, the
    collected one is listed under its ``item_pipelines``."""
    have = cards.get(key)
    if have is not None and "suite_hash" in have and collected.get("hash") not in (have.get("item_pipelines") or {}):
        cards[key] = _with_other(have, collected)


def merge_cards(into: dict[str, dict[str, Any]], cards: Mapping[str, dict[str, Any]]) -> None:
    """Add ``cards`` (an xdist worker's) to ``into``: a card an item made (it has ``suite_hash``)
    is never replaced by the card collected for the same task, and every pipeline some worker's
    items used stays listed (:func:`add_item_card`).  The result does not depend on the order
    the workers' cards arrive in."""
    for key, card in cards.items():
        have = into.get(key)
        if "suite_hash" in card:
            add_item_card(into, key, card)
        elif have is not None and "suite_hash" in have:
            if card.get(USED):
                note_collected_used(into, key, card)
        else:
            into[key] = {**card, USED: True} if card.get(USED) or (have or {}).get(USED) else card


def public_cards(cards: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``cards`` as run.json and the summary read them: without the workers' :data:`USED` marks."""
    return {key: ({k: v for k, v in card.items() if k != USED} if USED in card else dict(card))
            for key, card in cards.items()}


def resumed_cards(now: Mapping[str, dict[str, Any]], resumed: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The cards of a resumed run: the run's own (its records were made under them), with the item
    cards this invocation's fixtures made added to them (:func:`add_item_card`: a task's new
    pipeline is listed, never silently taken for the run's)."""
    out = {**now, **resumed}
    for key, card in now.items():
        if key in resumed and "suite_hash" in card:
            add_item_card(out, key, card, collected_used=True)
    return out


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
