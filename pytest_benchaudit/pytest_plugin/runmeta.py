"""What run.json records of the invocation: the versions, the command line (secrets masked), redacted values.

Read once per process (:func:`versions` is cached: at the first record, reused at the end) and
shared by the controller's run.json and the ``--resume`` checks, which compare values as run.json
stores them (:func:`redact_json`).
"""

from __future__ import annotations

import functools
import platform
import re
from importlib import metadata
from typing import Any, Iterable, Mapping

from pytest_benchaudit.common.secrets import redact
from pytest_benchaudit.inference.backend import strip_credentials
from pytest_benchaudit.runs.documents import GenerationCache

__all__ = ["clean_argv", "redact_json", "sum_cache_stats", "versions"]


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
    """argv as run.json records it: URL credentials dropped, known secrets masked."""
    from pytest_benchaudit.pytest_plugin.remote import mask_tx  # --tx ...//env:NAME=VALUE: the value may be a key

    return [redact(mask_tx(_URL.sub(lambda m: strip_credentials(m.group(0)), arg))) for arg in args]


def redact_json(value: Any) -> Any:
    """``value`` as run.json stores it (JSON round trip, secrets masked), for comparisons."""
    import json

    from pytest_benchaudit.common.secrets import redact_obj

    return json.loads(json.dumps(redact_obj(value), default=str))


def sum_cache_stats(stats: Iterable[Mapping[str, Any]]) -> GenerationCache:
    """The generation caches' statistics of every process of a run, summed (run.json ``generation_cache``)."""
    stats = list(stats)
    return {"enabled": any(s.get("enabled") for s in stats),
            "hits": sum(int(s.get("hits", 0)) for s in stats),
            "misses": sum(int(s.get("misses", 0)) for s in stats),
            "disabled": sorted({s["disabled"] for s in stats if s.get("disabled")})}
