"""What a task's pipeline card holds beyond its fields, and the card of an item whose fixtures changed.

:func:`materials` gathers what shapes a request or a score but is not a pipeline field: the
prompt template's text (system prompt, option format, separators, fixed shots), the few-shot
exemplars used, the checksums of the data files read (questions, exemplars, a metric's lookup
files) and, with ``--judge``, the judge's prompts.  :meth:`Pipeline.card` hashes them with the
fields, so an edited template changes the card's ``hash`` and ``upstream_hash``.

:func:`suite_files` checksums suite.toml and the file it extends; :func:`pin_warnings` compares
each data file with the checksum the suite pins in ``[fetch.files]``.

:func:`fixture_origin` says where a fixture that replaced ``pipeline`` or ``question`` is defined
(``conftest.py:LINE``, or the plugin's module); the runner hands it to
:func:`pytest_benchaudit.pipeline.card.item_card` with the pipeline the item used.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_benchaudit.dataset.readers import file_checksum
from pytest_benchaudit.dataset.suites import Suite
from pytest_benchaudit.pipeline.stages import Pipeline, is_unspecified
from pytest_benchaudit.pipeline.types import Question

__all__ = ["fixture_origin", "judge_material", "materials", "pin_warnings", "suite_files"]


def _sha(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def materials(suite: Suite, pipeline: Pipeline, shots: Sequence[Question], data_checksums: Mapping[str, str],
              resource_checksums: Mapping[str, str], judge: Mapping[str, Any] | None) -> dict[str, Any]:
    """The materials of ``pipeline`` on a task of ``suite`` (keys ``STAGE.what``; see module doc)."""
    out: dict[str, Any] = {}
    template = suite.templates.get(pipeline.prompt.template)
    if template is not None:
        out["prompt.template_text"] = template.model_dump(mode="json")
    few = pipeline.prompt.format.few_shot
    k = 0 if is_unspecified(few) else int(few)
    if k:
        used = list(shots)[:k]
        out["prompt.few_shot_exemplars"] = {"ids": [q.id for q in used],
                                            "sha256": _sha([q.model_dump(mode="json") for q in used])}
    out["dataset.checksums"] = dict(data_checksums)
    if resource_checksums:
        out["scoring.resources"] = dict(resource_checksums)
    if judge:
        out["scoring.judge"] = dict(judge)
    return out


@functools.lru_cache(maxsize=None)
def _judge_prompts_sha() -> str:
    """sha256 of the judge's requests for a fixed probe question: its prompt texts and parameters."""
    from pytest_benchaudit.scoring import judge

    probe = Question(benchmark="probe", task="probe", id="probe", index=0, text="QUESTION",
                     choices={"A": "OPTION A", "B": "OPTION B"}, gold="A")
    requests = [judge.extraction_request(probe, "RESPONSE", ("A", "B")), judge.grading_request(probe, "RESPONSE")]
    return _sha([r.model_dump(mode="json") for r in requests])


def judge_material(card: Mapping[str, Any]) -> dict[str, Any]:
    """The judge as a material: what its card says, and the sha256 of its prompts' texts."""
    return {**card, "prompts_sha256": _judge_prompts_sha()}


def suite_files(suite: Suite, rootdir: Path) -> dict[str, str]:
    """sha256 of each file the suite was read from, keyed by its path relative to ``rootdir``
    (``suites/toy/suite.toml``, ``suites/standardized.toml``; absolute where outside it)."""
    out = {}
    for path in suite.files or (suite.path,):
        try:
            name = Path(os.path.relpath(path, rootdir)).as_posix()
        except ValueError:  # another drive
            name = str(path)
        out[name if not name.startswith("..") else str(path)] = file_checksum(path)
    return out


def pin_warnings(suite: Suite, files: Mapping[str, str]) -> list[dict[str, str]]:
    """A warning for each data file (name in the data folder -> sha256 found) whose checksum
    differs from the one ``[fetch.files]`` pins."""
    pins = (suite.own_tables.get("fetch") or {}).get("files") or {}
    out = []
    for name, found in files.items():
        pinned = (pins.get(name) or {}).get("sha256")
        if isinstance(pinned, str) and pinned != found:
            out.append({"kind": "data_checksum",
                        "message": f"{suite.data_folder}/{name}: sha256 {found[:12]}… differs from the "
                                   f"{pinned[:12]}… {suite.path.parent.name}/suite.toml pins; its scores are "
                                   f"not comparable with runs on the pinned file (benchaudit fetch "
                                   f"{suite.name} --force restores it)"})
    return out


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
