"""What the collector reads from fixtures and the judge's prompts for a task's pipeline card.

The card itself is assembled by pure functions (:mod:`pytest_benchaudit.pipeline.assembly`:
its materials, the pin warnings, what run.json shows beside the hash) from what
:mod:`pytest_benchaudit.dataset.materials` reads of the suite and its data (the same reading
``benchaudit card`` makes); this module adds what only pytest or the judge can tell:
:func:`judge_material` hashes the judge's prompt texts.

:func:`fixture_origin` says where a fixture that replaced ``pipeline`` or ``question`` is defined
(``conftest.py:LINE``, or the plugin's module); the runner hands it to
:func:`pytest_benchaudit.pipeline.card.item_card` with the pipeline the item used.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_benchaudit.pipeline.types import Question

__all__ = ["fixture_origin", "judge_material"]


def _sha(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def _judge_prompts_sha() -> str:
    """sha256 of the judge's requests for a fixed probe question: its prompt texts and parameters."""
    from pytest_benchaudit.scoring import judge_prompts

    probe = Question(
        benchmark="probe",
        task="probe",
        id="probe",
        index=0,
        text="QUESTION",
        choices={"A": "OPTION A", "B": "OPTION B"},
        gold="A",
    )
    requests = [
        judge_prompts.extraction_request(probe, "RESPONSE", ("A", "B")),
        judge_prompts.grading_request(probe, "RESPONSE"),
    ]
    return _sha([r.model_dump(mode="json") for r in requests])


def judge_material(card: Mapping[str, Any]) -> dict[str, Any]:
    """The judge as a material: what its card says, and the sha256 of its prompts' texts."""
    return {**card, "prompts_sha256": _judge_prompts_sha()}


def fixture_origin(fixturedefs: Any, default_module: str, rootdir: Path) -> str | None:
    """Where the fixture that gives an item its value is defined, or ``None`` when it is the
    plugin's own (``default_module``): ``conftest.py:LINE`` relative to ``rootdir`` for a file
    under it, else the defining module's name (a plugin)."""
    if not fixturedefs:
        return None
    func = fixturedefs[-1].func
    func = getattr(func, "__wrapped__", func)
    module = getattr(func, "__module__", "") or ""
    if module == default_module:
        return None
    code = getattr(func, "__code__", None)
    if code is None:
        return module or repr(func)
    path = Path(code.co_filename)
    try:
        rel = path.resolve().relative_to(rootdir.resolve())
    except ValueError:
        return module or path.name
    return f"{rel.as_posix()}:{code.co_firstlineno}"
