"""The inputs a task family's rules and metrics take, as types.

A rule reads a model's text: ``(text, question, generation) -> (prediction | None, detail)``.
A metric compares a valid prediction with the gold: ``(prediction, question, resources) -> Score``.
``resources`` are the task's data files by the names the suite config gives them
(``[tasks.<task>.resources]``, read as JSON by ``dataset.readers.load_resources``): the names are the
suite's, hence open, and each value is a JSON document whose shape the metric that reads it checks
(the actor tables: :data:`ActorTable`).

Pure: imports only ``pipeline.types``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import JsonValue

from pytest_benchaudit.pipeline.types import Generation, Question, Score

__all__ = ["ActorTable", "Metric", "Resources", "Rule"]

Rule = Callable[[str, Question, Generation], tuple[str | None, str]]

# A task's resource files by their suite-config names (open names), each the JSON it holds.
Resources = Mapping[str, JsonValue]

Metric = Callable[[str, Question, Resources], Score]

# An actor table (CTI-Bench alias_dict / related_dict): actor -> aliases or related actors (lower-case
# by convention; a null or a non-string entry is read as the released scorer read it, with str()).
ActorTable = Mapping[str, list[JsonValue] | None]
