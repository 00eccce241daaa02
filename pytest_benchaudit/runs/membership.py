"""Whether a record of ``records.jsonl`` belongs to the run whose ``run.json`` sits beside it.

``run.json`` says what its records can be: the models the run asked (``models[].spec``, what each
record names as ``model``) and one pipeline card per task and variant (``pipeline_cards``, keyed
``benchmark.task[|variant]``), whose ``hash`` every record of that task carries as
``pipeline_hash`` (or, where a ``conftest.py`` fixture changed some items' pipeline, a hash the
card lists under ``item_pipelines``).  A record that names a model the run never asked, a task
the run has no card of, or a pipeline its task's card does not list was written by another run:
a file appended to or concatenated by hand or by a script.  Summarised with the run's own, it
would count another model's answers, or answers to other prompts, as this run's.

So the store refuses such a record (:class:`~pytest_benchaudit.runs.store.ForeignRecord`, naming
``file:line`` and what does not match), and ``--skip-bad-records`` sets it aside with the other
lines that are not this run's records, counted in one warning.  What ``run.json`` does not
declare constrains nothing: a hand-made run directory, or one from before a field, is read as
it always was.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow, RunModel
from pytest_benchaudit.pipeline.variants import card_key

__all__ = ["RunMembership"]

_NAMED = 6  # how many of the run's models or tasks a message lists


class RunMembership:
    """What a record must be to belong to a run, from its ``run.json``; :meth:`why_not` judges one."""

    def __init__(self, models: list[RunModel] | None, cards: Mapping[str, PipelineCard] | None) -> None:
        labels = [m.get("spec") for m in models or () if isinstance(m, Mapping)]
        #: The model labels the run asked; ``None``: run.json lists none (nothing to check).
        self.models: frozenset[str] | None = frozenset(str(x) for x in labels if x) or None
        #: Per card key, the pipeline hashes its records may carry (``None``: the card has no hash).
        self.hashes: dict[str, frozenset[str] | None] = {}
        for key, card in (cards or {}).items():
            if not isinstance(card, Mapping):
                continue
            digest = card.get("hash")
            others = card.get("item_pipelines") or {}
            self.hashes[key] = frozenset({str(digest), *map(str, others)}) if digest else None

    def checks_anything(self) -> bool:
        """False when run.json declares neither models nor cards (every record belongs)."""
        return self.models is not None or bool(self.hashes)

    def why_not(self, record: RecordRow) -> str | None:
        """Why ``record`` is not one of this run's (one sentence), or ``None`` when it may be."""
        model = str(record.get("model"))
        if self.models is not None and model not in self.models:
            return (
                f"model {model!r} is not one the run asked (run.json models: {_listed(self.models)}); a record "
                "of another run?"
            )
        if not self.hashes:
            return None
        bench, task, variant = str(record.get("benchmark")), str(record.get("task")), str(record.get("variant") or "")
        key = card_key(bench, task, variant)
        if key not in self.hashes:
            if card_key(bench, task) in self.hashes:  # a variant read under its task's card (as rescore reads it)
                return None
            return (
                f"task {key} has no pipeline card in run.json (cards: {_listed(self.hashes)}); a record of another run?"
            )
        allowed = self.hashes[key]
        digest = str(record.get("pipeline_hash"))
        if allowed is not None and digest not in allowed:
            return (
                f"its pipeline_hash {digest!r} is not the hash of the run's card for {key} "
                f"({_listed(allowed)}): a record made under another pipeline (another run's?)"
            )
        return None


def _listed(names: frozenset[str] | Mapping[str, object]) -> str:
    ordered = sorted(names)
    more = f", and {len(ordered) - _NAMED} more" if len(ordered) > _NAMED else ""
    return ", ".join(ordered[:_NAMED]) + more
