"""What must hold of a resolved pipeline before its items can score, found once per task x variant.

Pure functions over typed inputs (the pipeline, its suite's templates, the task's questions);
the collector (:mod:`pytest_benchaudit.pytest_plugin.collect`) calls them and turns what they
say into a skip marker or a pre-run usage error:

- :func:`runnable_problems`: fields left unspecified that a score needs (the item is skipped,
  ``choose with --set FIELD=VALUE``);
- :func:`skip_reason`: the one reason every item of a task x variant is skipped, or None;
- :func:`template_problem` / :func:`aggregation_by_problem`: a template the suite does not
  have, an ``aggregation.by`` no question's metadata holds (a usage error before any item).

Whether a rule or metric name exists, and whether a judge is needed, is scoring's to say
(:mod:`pytest_benchaudit.scoring.names`, :mod:`pytest_benchaudit.scoring.judge_calls`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pytest_benchaudit.common.errors import did_you_mean
from pytest_benchaudit.pipeline.stages import Pipeline, is_unspecified
from pytest_benchaudit.pipeline.types import Question

__all__ = ["aggregation_by_problem", "runnable_problems", "skip_reason", "template_problem", "where_of"]


class HasSystem(Protocol):
    """What :func:`runnable_problems` reads of a prompt template (:class:`pytest_benchaudit.prompt.templates.Template`)."""

    @property
    def system(self) -> str | None: ...


def where_of(benchmark: str, task: str, variant: str = "") -> str:
    """How a message names a task x variant: ``seceval.mcq``, ``seceval.mcq [max_tokens=5]``."""
    return f"{benchmark}.{task}" + (f" [{variant}]" if variant else "")


def runnable_problems(pipeline: Pipeline, templates: Mapping[str, HasSystem]) -> list[str]:
    """Fields that must be specified before this pipeline can produce a score (``aggregation.method``
    is not one: the aggregator has a default), the prompt's first."""
    missing = [f for f in pipeline.unspecified_fields(("extraction", "scoring")) if f != "aggregation.method"]
    if is_unspecified(pipeline.prompt.template):
        missing.insert(0, "prompt.template")
    if is_unspecified(pipeline.prompt.format.mode):
        missing.insert(0, "prompt.format.mode")
    template = templates.get(pipeline.prompt.template)
    if template is not None and template.system and is_unspecified(pipeline.prompt.format.system_role):
        missing.append("prompt.format.system_role")
    return missing


def skip_reason(where: str, pipeline: Pipeline, problems: Sequence[str], judge_problem: str | None) -> str | None:
    """Why every item of ``pipeline`` at ``where`` is skipped: fields left unspecified (``problems``,
    from :func:`runnable_problems`), else a judge it needs and was not given; None when it runs."""
    if problems:
        return f"{where} under {pipeline.name!r}: {', '.join(problems)} unspecified; choose with --set FIELD=VALUE"
    if judge_problem:
        return f"{where}: {judge_problem}"
    return None


def template_problem(benchmark: str, pipeline: Pipeline, template_names: Sequence[str]) -> str | None:
    """Why ``prompt.template`` names no template of the suite ``benchmark`` (its ``template_names``), or None."""
    name = pipeline.prompt.template
    if name in template_names:
        return None
    return f"prompt.template {name!r} is not a template of {benchmark}; allowed: {', '.join(template_names)}"


def aggregation_by_problem(pipeline: Pipeline, questions: Sequence[Question]) -> str | None:
    """Why ``aggregation.by`` names no metadata field of ``questions``, or None (unset, no questions, found)."""
    by = pipeline.aggregation.by
    if by is None or not questions or any(by in q.meta for q in questions):
        return None
    fields = sorted({k for q in questions for k in q.meta})
    allowed = ", ".join(fields) or "none (this task has no metadata)"
    return (
        f"aggregation.by {by!r} is not a metadata field of its questions{did_you_mean(by, fields)}; "
        f"allowed: {allowed}, or null"
    )
