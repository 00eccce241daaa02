"""What run.json records of the invocation: the versions, the command line (secrets masked), redacted values.

Read once per process (:func:`versions` is cached: at the first record, reused at the end) and
shared by the controller's run.json and the ``--resume`` checks, which compare values as run.json
stores them (:func:`redact_json`).
"""

from __future__ import annotations

import functools
import platform
import re
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

from pytest_benchaudit.common.secrets import mask_url_credentials, redact
from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.pipeline.record_documents import CardWarning
from pytest_benchaudit.runs.run_meta import GenerationCache, RunModel

if TYPE_CHECKING:
    from pytest_benchaudit.inference.cache import CacheStats

__all__ = [
    "PER_SESSION_WARNINGS",
    "clean_argv",
    "redact_json",
    "run_models",
    "run_warning_list",
    "sum_cache_stats",
    "versions",
]

# Warnings only the session that saw them can tell (the generation cache's counts, a plugin's hook that
# raised): the earlier sessions of a resumed run keep theirs. Every other kind is found again, at each end,
# from the whole run (its cards and all of records.jsonl), so an earlier copy of one would be stale.
PER_SESSION_WARNINGS = frozenset({"cache_unusable", "hook_failed"})


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """The versions run.json records; read once (at the first record) and reused at the end,
    where each metadata lookup would add to the wait after the last answer."""
    out = {"python": platform.python_version()}
    for dist in ("pytest", "pytest-benchaudit", "pytest-xdist", "httpx", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


_URL = re.compile(r"https?://[^\s,]+")


def clean_argv(args: list[str]) -> list[str]:
    """argv as run.json records it and the resume command prints it: URL credentials masked
    (``http://***@host``: they were there, and must be given again), known secrets masked."""
    from pytest_benchaudit.pytest_plugin.remote import mask_tx  # --tx ...//env:NAME=VALUE: the value may be a key

    return [redact(mask_tx(_URL.sub(lambda m: mask_url_credentials(m.group(0)), arg))) for arg in args]


def redact_json(value: Any) -> Any:
    """``value`` as run.json stores it (JSON round trip, secrets masked), for comparisons."""
    import json

    from pytest_benchaudit.common.secrets import redact_obj

    return json.loads(json.dumps(redact_obj(value), default=str))


def sum_cache_stats(stats: Iterable[CacheStats]) -> GenerationCache:
    """The generation caches' statistics of every process of a run, summed (run.json ``generation_cache``)."""
    stats = list(stats)
    return {
        "enabled": any(s.get("enabled") for s in stats),
        "hits": sum(int(s.get("hits", 0)) for s in stats),
        "misses": sum(int(s.get("misses", 0)) for s in stats),
        "disabled": sorted({why for s in stats if (why := s.get("disabled"))}),
    }


def run_models(
    models: Iterable[ModelSpec], launched_url: Callable[[ModelSpec], str | None], served: Mapping[str, Iterable[str]]
) -> list[RunModel]:
    """run.json's ``models``: each spec's public fields, the endpoint of a server this run launched
    (local, vllm:) and the model ids its answers and ``GET /models`` named."""
    out: list[RunModel] = []
    for m in models:
        info = m.public()
        if launched_url(m):
            info["endpoint"] = launched_url(m)
        info["served_model_ids"] = sorted(served.get(m.label, ()))
        out.append(info)
    return out


def run_warning_list(current: Iterable[CardWarning], earlier: Iterable[CardWarning]) -> list[CardWarning]:
    """run.json's ``warnings``: this end's (each once, in order), then those of a resumed run's
    earlier sessions that this one cannot see (:data:`PER_SESSION_WARNINGS`) and does not repeat."""
    out: list[CardWarning] = []
    for warning in current:
        if warning not in out:
            out.append(warning)
    for warning in earlier:
        if warning.get("kind") in PER_SESSION_WARNINGS and warning not in out:
            out.append(warning)
    return out
