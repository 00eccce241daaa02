"""A task's pipeline card as collected: what it holds beyond the pipeline's fields, assembled once.

:func:`materials` gathers what shapes a request or a score but is not a pipeline field: the
prompt template's text (system prompt, option format, separators, fixed shots), the few-shot
exemplars used, the checksums of the data files read (questions, exemplars, a metric's lookup
files) and, with ``--judge``, the judge's prompts.  :meth:`Pipeline.card` hashes them with the
fields, so an edited template changes the card's ``hash`` and ``upstream_hash``.

:func:`pin_warnings` compares each data file with the checksum the suite pins in
``[fetch.files]``; :func:`task_card` adds to a hashed card what run.json shows beside the hash
(the data files' checksums, the suite files, those warnings, where each override came from,
the variant, the judge, each hosted model's provider card).  Pure: the collector reads the files
and passes what it found (:mod:`pytest_benchaudit.pytest_plugin.collect`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import JsonValue

from pytest_benchaudit.pipeline.record_documents import CardJudge, CardWarning, PipelineCard, VariantInfo
from pytest_benchaudit.pipeline.stages import Pipeline, is_unspecified
from pytest_benchaudit.pipeline.types import Question

__all__ = ["TaskMaterials", "materials", "pin_warnings", "task_card"]


class Dumpable(Protocol):
    """A prompt template as :func:`materials` reads it (:class:`pytest_benchaudit.prompt.templates.Template`)."""

    def model_dump(self, *, mode: str = ...) -> dict[str, JsonValue]: ...


def _sha(data: JsonValue) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def materials(
    templates: Mapping[str, Dumpable],
    pipeline: Pipeline,
    shots: Sequence[Question],
    data_checksums: Mapping[str, str],
    resource_checksums: Mapping[str, str],
    judge: Mapping[str, JsonValue] | None,
) -> dict[str, JsonValue]:
    """The materials of ``pipeline`` on a task whose suite has ``templates`` (keys ``STAGE.what``; see module doc)."""
    out: dict[str, JsonValue] = {}
    template = templates.get(pipeline.prompt.template)
    if template is not None:
        out["prompt.template_text"] = template.model_dump(mode="json")
    few = pipeline.prompt.format.few_shot
    k = 0 if is_unspecified(few) else int(few)
    if k:
        used = list(shots)[:k]
        out["prompt.few_shot_exemplars"] = {
            "ids": [q.id for q in used],
            "sha256": _sha([q.model_dump(mode="json") for q in used]),
        }
    out["dataset.checksums"] = dict(data_checksums)
    if resource_checksums:
        out["scoring.resources"] = dict(resource_checksums)
    if judge:
        out["scoring.judge"] = dict(judge)
    return out


def pin_warnings(
    pins: Mapping[str, Mapping[str, JsonValue]],
    found: Mapping[str, str],
    data_folder: str,
    suite_dir: str,
    benchmark: str,
) -> list[CardWarning]:
    """A warning for each data file (``found``: name in the data folder -> sha256) whose checksum differs
    from the one the suite's ``[fetch.files]`` table (``pins``: name -> ``{sha256 = ...}``) pins."""
    out: list[CardWarning] = []
    for name, sha in found.items():
        pinned = (pins.get(name) or {}).get("sha256")
        if isinstance(pinned, str) and pinned != sha:
            out.append(
                {
                    "kind": "data_checksum",
                    "message": f"{data_folder}/{name}: sha256 {sha[:12]}… differs from the "
                    f"{pinned[:12]}… {suite_dir}/suite.toml pins; its scores are "
                    f"not comparable with runs on the pinned file (benchaudit fetch "
                    f"{benchmark} --force restores it)",
                }
            )
    return out


@dataclass(frozen=True)
class TaskMaterials:
    """What every variant's card of one task shows beside its hash: the questions file's checksum
    (``dataset_checksums``), the suite files read (``suite_files``), the pin warnings, the number of
    questions the task has (a ``-k`` / ``--limit`` run is then labelled a subset)."""

    dataset_checksums: Mapping[str, str]
    suite_files: Mapping[str, str]
    questions_total: int
    warnings: Sequence[CardWarning] = field(default_factory=tuple)


def task_card(
    card: PipelineCard,
    task: TaskMaterials,
    *,
    variant: VariantInfo | None = None,
    judge: CardJudge | None = None,
    providers: Mapping[str, dict[str, JsonValue]] | None = None,
) -> PipelineCard:
    """Complete ``card`` (a :meth:`Pipeline.card`, hashed) in place with what run.json shows beside its
    hash; return it.  ``variant``: a variant's description (None for the base); ``judge``: the judge's
    card; ``providers``: model label -> how that hosted model is reached and what its quirks change."""
    card["dataset_checksums"] = dict(task.dataset_checksums)
    card["suite_files"] = dict(task.suite_files)
    if task.warnings:
        card["warnings"] = [w.copy() for w in task.warnings]
    if card.get("overrides"):
        card["override_origins"] = {name: "--set" for name in card["overrides"]}
    if variant is not None:
        card["variant"] = variant.copy()
    if judge is not None:
        card["judge"] = judge.copy()
    if providers:
        card["providers"] = dict(providers)
    card["questions_total"] = task.questions_total
    return card
