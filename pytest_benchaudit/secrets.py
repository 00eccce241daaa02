"""Keep API keys out of everything the project writes.

Keys are read from environment variables named by model specs and sent only as
a bearer token to their endpoint.  :func:`redact` replaces any known key value in
a text (an error message echoed by a server, a traceback, an argv element) with
``***``; the records writer, run.json and the terminal report pass their text
through it as a last line of defence.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

__all__ = ["register_secret_env", "redact", "redact_obj", "secret_values"]

_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words
_values: set[str] = set()


def register_secret_env(names: Iterable[str | None]) -> None:
    """Remember the current values of these environment variables as secrets."""
    for name in names:
        value = os.environ.get(name) if name else None
        if value and len(value) >= _MIN_SECRET_LEN:
            _values.add(value)


def secret_values() -> frozenset[str]:
    return frozenset(_values)


def redact(text: str) -> str:
    """``text`` with every registered secret value replaced by ``***``."""
    for value in _values:
        if value in text:
            text = text.replace(value, "***")
    return text


def redact_obj(obj: Any) -> Any:
    """Redact every string inside a JSON-like structure."""
    if not _values:
        return obj
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj
