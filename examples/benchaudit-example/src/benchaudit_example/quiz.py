"""The quiz benchmark's own file format, extraction rule and metric.

A ``.quiz`` file is INI: one section per question (the section name is its id), keys ``question``,
``A`` .. ``D`` and ``answer``::

    [q001]
    question = Which port does HTTPS listen on by default?
    A = 22
    B = 443
    answer = B

Only names of :mod:`pytest_benchaudit.api` are imported: the rest of benchaudit is internal.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_benchaudit.api import DataError, Generation, Question, Score, metric, rule

__all__ = ["quiz_marked", "quiz_points", "read_quiz"]

LABELS = ("A", "B", "C", "D", "E", "F")


def read_quiz(text: str, path: Path, mapping: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Rows of a ``.quiz`` file: ``{"id", "question", "choices": {label: text}, "answer"}`` per section."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep the labels' case
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as err:
        raise DataError(f"{path}: not a .quiz file: {err}") from None
    for name in parser.sections():
        section = parser[name]
        missing = [key for key in ("question", "answer") if key not in section]
        if missing:
            raise DataError(f"{path}: [{name}]: missing {', '.join(missing)}")
        choices = {label: section[label] for label in LABELS if label in section}
        yield (
            f"[{name}]",
            {"id": name, "question": section["question"], "choices": choices, "answer": section["answer"]},
        )


_MARKED = re.compile(r"<<\s*([A-Z])\s*>>")


@rule(name="quiz_marked", reads="text", answers="label")
def quiz_marked(text: str, question: Question, generation: Generation) -> tuple[str | None, str]:
    """The option letter between ``<<`` and ``>>`` (the last one marked); none marked: no answer."""
    found = [m for m in _MARKED.findall(text) if m in question.choices]
    if not found:
        return None, "no option marked <<X>>"
    return found[-1], f"marked <<{found[-1]}>>"


@metric(
    name="quiz_points",
    answers="label",
    lower_is_better=False,
    kind="continuous",
    description="exam marking: 1 for the right option, -1/(k-1) for a wrong one of k, 0 for no answer",
    value_range=(-1.0, 1.0),
)
def quiz_points(prediction: str, question: Question, resources: Mapping[str, Any]) -> Score:
    """1 for the gold option, ``-1/(k-1)`` for another (guessing scores 0 on average), as exams mark."""
    right = prediction.strip().upper() == question.gold.strip().upper()
    wrong_value = -1.0 / max(len(question.choices) - 1, 1)
    return Score(value=1.0 if right else wrong_value, correct=right)
