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

from collections.abc import Mapping

from pydantic import JsonValue

from pytest_benchaudit.pipeline.record_documents import Cards, CardWarning, ItemPipeline, PipelineCard
from pytest_benchaudit.pipeline.stages import Pipeline

__all__ = [
    "QUESTION_MATERIAL",
    "USED",
    "add_item_card",
    "item_card",
    "merge_cards",
    "nearest_why",
    "note_collected_used",
    "public_cards",
    "resumed_cards",
    "run_warnings",
    "suite_checksums",
    "suite_file_changes",
    "suite_hash",
]


def nearest_why(why: Mapping[str, str], field: str) -> str | None:
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


def suite_hash(card: PipelineCard) -> str | None:
    """The hash of the card as collected from the suite, before any fixture changed it."""
    return card.get("suite_hash", card.get("hash"))


def item_card(
    collected: PipelineCard,
    pipeline: Pipeline,
    materials: Mapping[str, JsonValue],
    pipeline_origin: str | None,
    question_origin: str | None,
) -> PipelineCard:
    """The card of what one item used, made from its task's ``collected`` card.

    ``pipeline``: the item's pipeline (after every fixture), ``materials`` its materials
    (:meth:`Pipeline.card`); ``pipeline_origin`` / ``question_origin``: where the fixture that
    replaced the pipeline / the question is defined (``None``: not replaced).  Returns
    ``collected`` itself when nothing differs.
    """
    mats: dict[str, JsonValue] = dict(materials)
    if question_origin is not None:
        mats[QUESTION_MATERIAL] = question_origin
    own = pipeline.card(mats)
    if own["hash"] == collected.get("hash"):
        return _without_used(collected)
    before = collected.get("fields") or {}
    changed = {f: v for f, v in own["fields"].items() if before.get(f, _MISSING) != v}
    origins = {f: SET_ORIGIN for f in collected.get("overrides") or {}}
    origins.update(collected.get("override_origins") or {})
    overrides: dict[str, JsonValue] = dict(collected.get("overrides") or {})
    for name, value in changed.items():
        overrides[name] = value
        origins[name] = pipeline_origin or "a fixture"
    if question_origin is not None:
        overrides["question"] = f"replaced by the question fixture at {question_origin}"
        origins["question"] = question_origin
    card = _without_used(collected)
    card["hash"], card["upstream_hash"] = own["hash"], own["upstream_hash"]
    card["fields"], card["unspecified"] = own["fields"], own["unspecified"]
    card["overrides"], card["override_origins"], card["materials"] = overrides, origins, mats
    card["suite_hash"] = collected.get("suite_hash", collected["hash"])
    card["suite_upstream_hash"] = collected.get("suite_upstream_hash", collected.get("upstream_hash"))
    return card


_MISSING = object()


# On a collected card an xdist worker hands back: items of that worker ran under it.  The
# controller reads it when another worker's items made a card of the same task (merge_cards);
# public_cards leaves it out of what run.json and the summary read.
USED = "_used_by_items"


def _without_used(card: PipelineCard) -> PipelineCard:
    """A copy of ``card`` without the :data:`USED` mark."""
    out = card.copy()
    out.pop("_used_by_items", None)
    return out


def _summary(card: PipelineCard) -> ItemPipeline:
    return {
        "upstream_hash": card.get("upstream_hash"),
        "overrides": dict(card.get("overrides") or {}),
        "override_origins": dict(card.get("override_origins") or {}),
    }


def _with_other(card: PipelineCard, other: PipelineCard) -> PipelineCard:
    """``card`` with ``other`` (and what ``other`` lists) under ``item_pipelines``, by hash."""
    others = dict(card.get("item_pipelines") or {})
    listed: list[tuple[str | None, ItemPipeline]] = [
        (other.get("hash"), _summary(other)),
        *(other.get("item_pipelines") or {}).items(),
    ]
    for digest, summary in listed:
        if isinstance(digest, str) and digest != card.get("hash"):
            others.setdefault(digest, summary)
    if not others:
        return card
    out = card.copy()
    out["item_pipelines"] = others
    return out


def add_item_card(cards: Cards, key: str, card: PipelineCard, collected_used: bool = False) -> None:
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


def note_collected_used(cards: Cards, key: str, collected: PipelineCard) -> None:
    """An item ran under its task's collected card: where an item card has replaced that card, the
    collected one is listed under its ``item_pipelines``."""
    have = cards.get(key)
    if have is not None and "suite_hash" in have and collected.get("hash") not in (have.get("item_pipelines") or {}):
        cards[key] = _with_other(have, collected)


def merge_cards(into: Cards, cards: Mapping[str, PipelineCard]) -> None:
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
            if card.get(USED) or (have is not None and have.get(USED)):
                marked = card.copy()
                marked["_used_by_items"] = True
                into[key] = marked
            else:
                into[key] = card


def public_cards(cards: Mapping[str, PipelineCard]) -> Cards:
    """``cards`` as run.json and the summary read them: without the workers' :data:`USED` marks."""
    return {key: _without_used(card) for key, card in cards.items()}


def resumed_cards(now: Mapping[str, PipelineCard], resumed: Mapping[str, PipelineCard]) -> Cards:
    """The cards of a resumed run: the run's own (its records were made under them), with the item
    cards this invocation's fixtures made added to them (:func:`add_item_card`: a task's new
    pipeline is listed, never silently taken for the run's)."""
    out: Cards = {**now, **resumed}
    for key, card in now.items():
        if key in resumed and "suite_hash" in card:
            add_item_card(out, key, card, collected_used=True)
    return out


def suite_checksums(cards: Mapping[str, PipelineCard]) -> dict[str, str]:
    """Every suite file the cards were made from and its sha256 (run.json ``suite_checksums``)."""
    out: dict[str, str] = {}
    for card in cards.values():
        out.update(card.get("suite_files") or {})
    return dict(sorted(out.items()))


def suite_file_changes(old: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """``"FILE (sha256 abc… then, def… now)"`` for each suite file both runs read whose checksum differs."""
    return [
        f"{name} (sha256 {old[name][:12]}… then, {digest[:12]}… now)"
        for name, digest in sorted(now.items())
        if name in old and old[name] != digest
    ]


def run_warnings(cards: Mapping[str, PipelineCard]) -> list[CardWarning]:
    """The warnings the cards carry, each once (``{"kind", "message"}``), in card order."""
    seen: dict[tuple[str, str], CardWarning] = {}
    for card in cards.values():
        for warning in card.get("warnings") or ():
            seen.setdefault((str(warning.get("kind")), str(warning.get("message"))), warning.copy())
    return list(seen.values())
