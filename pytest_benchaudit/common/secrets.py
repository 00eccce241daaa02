"""Keep API keys out of everything the project writes.

Keys are read from environment variables named by model specs and sent only as
a bearer token to their endpoint.  :func:`redact` replaces any known key value in
a text (an error message echoed by a server, a model answer that quotes the key,
a traceback, an argv element) with ``***``; the HTTP client redacts every text it
hands back (answers and errors, so the generation cache never holds a key), and
the records writer, run.json and the terminal report pass their text through it
as a last line of defence.

Known values are those registered (:func:`register_secret_env`,
:func:`register_secret`) plus the *current* values of the registered variable
names, read when redacting.  ``OPENAI_API_KEY`` (the default key variable of every
``ID@URL`` model) is always one of those names, so a process that never built a
model (the xdist controller, which writes the records) still masks it.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

__all__ = ["register_secret", "register_secret_env", "redact", "redact_obj", "redactor", "secret_values"]

_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words
_MASK = "***"
_values: set[str] = set()
_names: set[str] = {"OPENAI_API_KEY"}


def register_secret_env(names: Iterable[str | None]) -> None:
    """Treat the values of these environment variables (now and later) as secrets."""
    for name in names:
        if not name:
            continue
        _names.add(name)
        value = os.environ.get(name)
        if value and len(value) >= _MIN_SECRET_LEN:
            _values.add(value)


def register_secret(value: str | None) -> None:
    """Treat ``value`` itself as a secret (e.g. a password written into an endpoint URL)."""
    if value and len(value) >= _MIN_SECRET_LEN:
        _values.add(value)


def secret_values() -> frozenset[str]:
    """Every known secret value: the registered ones and the current values of the registered names
    (read from the environment at each call, so a key set later is never missed)."""
    found = set(_values)
    for name in _names:
        value = os.environ.get(name)
        if value and len(value) >= _MIN_SECRET_LEN:
            found.add(value)
    return frozenset(found)


def _ordered(values: Iterable[str]) -> list[str]:
    """Longest first: a key that contains another key is masked whole."""
    return sorted(values, key=len, reverse=True)


def _redact_with(text: str, values: list[str]) -> str:
    for value in values:
        if value in text:
            text = text.replace(value, _MASK)
    return text


def redact(text: str) -> str:
    """``text`` with every known secret value replaced by ``***``."""
    if not isinstance(text, str):
        return text
    return _redact_with(text, _ordered(secret_values()))


def redactor() -> Callable[[str], str]:
    """:func:`redact` with the secrets known now: for masking several texts at once (the known
    values are read once, not for each text)."""
    values = _ordered(secret_values())
    if not values:
        return _unchanged
    return lambda text: _redact_with(text, values)


def _unchanged(text: str) -> str:
    return text


def redact_obj(obj: Any) -> Any:
    """Redact every string inside a JSON-like structure (dict keys included)."""
    values = _ordered(secret_values())
    if not values:
        return obj
    return _walk(obj, values)


def _walk(obj: Any, values: list[str]) -> Any:
    if isinstance(obj, str):
        return _redact_with(obj, values)
    if isinstance(obj, dict):
        return {(_redact_with(k, values) if isinstance(k, str) else k): _walk(v, values) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v, values) for v in obj]
    return obj
