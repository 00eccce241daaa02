"""The runs of a multiverse as cells: one model's records of one task under one set of generations.

A task's records come from the runs given.  Each *set of generations* is what one upstream pipeline
made the model answer:

- a run's base records (``variant == ""``) are the generations of its card's pipeline (its layer);
- a ``--vary`` variant of an upstream field, or a ``--pipelines`` layer that asks other requests
  (``card["variant"]["needs_generations"]``), holds generations of its own, named after the variant;
- a downstream variant, or a layer that sends the base's requests, re-reads the base generations:
  its records are left out (the multiverse re-reads them itself);
- two runs of one model made under pipelines with different upstream hashes hold two sets; when
  their labels (the layer's name) coincide the hash tells them apart (``released@1a2b3c4d``).

The runs are taken in the order of their ``run_id`` (then path), so the order in which they were
named changes nothing: a model's cell of a task and set comes from the first run that holds it.

What the records hold (log-probabilities, log-likelihoods, a judge's reading, repeats, the number
of option labels) and the downstream values their cards state are the task's :class:`Evidence`.

Pure: the runs are loaded by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from pytest_benchaudit.multiverse.fast_rescore import Cell
from pytest_benchaudit.multiverse.space import FIELDS, Evidence, value_key
from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.pipeline.variants import card_key
from pytest_benchaudit.runs.run_meta import RunMeta

__all__ = ["LoadedRuns", "TaskRecords", "gather"]

#: (run directory, run.json, records) of each run, as :func:`pytest_benchaudit.runs.store.load_run` reads them
LoadedRuns = Sequence[tuple[str, RunMeta, list[RecordRow]]]


@dataclass
class TaskRecords:
    """One task's cells (sorted by generation set, then model) and what its records say."""

    benchmark: str
    task: str
    cells: list[Cell] = field(default_factory=list)
    evidence: Evidence = field(default_factory=Evidence)
    notes: list[str] = field(default_factory=list)


def _set_of(card: PipelineCard, variant: str) -> tuple[str, str] | None:
    """(label, upstream hash) of the generations a card's records hold; None when they re-read the base's."""
    info = card.get("variant")
    upstream = str(card.get("upstream_hash") or "")
    if not variant or info is None:
        return str(card.get("pipeline") or "run"), upstream
    if info.get("same_as_base") or not info.get("needs_generations"):
        return None
    return variant, upstream


def gather(runs: LoadedRuns) -> dict[str, TaskRecords]:
    """The cells of every task (key ``bench.task``) of ``runs`` (module docstring)."""
    order = sorted(range(len(runs)), key=lambda i: (str(runs[i][1].get("run_id") or ""), runs[i][0]))
    found: dict[tuple[str, str, str, str], Cell] = {}  # (task key, label, hash, model) -> cell
    labels: dict[str, dict[str, set[str]]] = {}  # task key -> label -> upstream hashes
    dropped: dict[str, int] = {}
    for i in order:
        path, meta, records = runs[i]
        cards = meta.get("pipeline_cards") or {}
        mine: dict[tuple[str, str, str, str], Cell] = {}
        for rec in records:
            variant = rec.get("variant") or ""
            key = card_key(rec["benchmark"], rec["task"], variant)
            card = cards.get(key) or cards.get(key.split("|", 1)[0])
            if card is None:
                continue  # no card: what it was asked cannot be told (load_run has warned)
            task = f"{rec['benchmark']}.{rec['task']}"
            made = _set_of(card, variant)
            if made is None:
                dropped[task] = dropped.get(task, 0) + 1
                continue
            slot = (task, made[0], made[1], rec["model"])
            if slot in found:
                continue  # an earlier run holds this model's generations of this set
            cell = mine.get(slot)
            if cell is None:
                cell = mine[slot] = Cell(rec["model"], made[0], card, [])
                labels.setdefault(task, {}).setdefault(made[0], set()).add(made[1])
            cell.records.append(rec)
        found.update(mine)
    tasks: dict[str, TaskRecords] = {}
    for (task, label, upstream, _model), cell in sorted(found.items()):
        bench, _, name = task.partition(".")
        entry = tasks.setdefault(task, TaskRecords(bench, name))
        if len(labels[task][label]) > 1:  # one label, several upstream pipelines: the hash tells them apart
            cell.generations = f"{label}@{upstream[:8]}"
        entry.cells.append(cell)
    for task, entry in tasks.items():
        entry.cells.sort(key=lambda c: (c.generations, c.model))
        entry.evidence = _evidence(entry.cells)
        if dropped.get(task):
            entry.notes.append(
                f"{dropped[task]} records of downstream variants or layers re-read the base "
                "generations: left out (the multiverse re-reads those itself)"
            )
    return tasks


def _evidence(cells: list[Cell]) -> Evidence:
    ev = Evidence()
    sets = {c.generations for c in cells}
    for cell in cells:
        fields = cell.card.get("fields") or {}
        for path in FIELDS:
            value: JsonValue = fields.get(path)
            known = ev.stored.setdefault(path, [])
            if value is not None and value_key(value) not in {value_key(v) for v in known}:
                known.append(value)
        if len(sets) > 1:
            ev.generations[cell.generations] = (
                f"the generations of {cell.generations} (upstream hash {str(cell.card.get('upstream_hash') or '?')[:8]})"
            )
        for rec in cell.records:
            if rec.get("top_logprobs"):
                ev.holds.add("logprobs")
            if rec.get("continuations"):
                ev.holds.add("continuations")
            if rec.get("judge"):
                ev.holds.add("judge")
            ev.repeats = max(ev.repeats, int(rec.get("repeat") or 0) + 1)
            labels = rec.get("question_labels")
            if labels:
                ev.option_counts.add(len(labels))
    return ev
