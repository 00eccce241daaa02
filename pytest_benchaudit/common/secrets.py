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
from typing import Any, Iterable

__all__ = ["register_secret", "register_secret_env", "redact", "redact_obj", "secret_values"]

_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words
_MASK = "***"
_values: set[str] = set()
_names: set[str] = {"OPENAI_API_KEY"}


def register_secret_env(names: Iterable[str | None]) -> None:
    """Treat the values of these environment variables (now and later) as secrets."""
    global _cache
    _cache = None
    for name in names:
        if not name:
            continue
        _names.add(name)
        value = os.environ.get(name)
        if value and len(value) >= _MIN_SECRET_LEN:
            _values.add(value)


def register_secret(value: str | None) -> None:
    """Treat ``value`` itself as a secret (e.g. a password written into an endpoint URL)."""
    global _cache
    _cache = None
    if value and len(value) >= _MIN_SECRET_LEN:
        _values.add(value)


# The last answer of secret_values and what it was computed from: the very _values and _names sets
# (tests swap them) and their sizes, and for each name the environment's raw entry (os.environ's
# own storage: ``_data``, keyed by ``encodekey``).  Reading that storage is cheap; os.environ.get
# of an unset name raises and catches a KeyError (~1 us a name, for every record).  Any change
# (register_*, a set, changed or removed variable, a swapped os.environ) recomputes.
_cache: tuple[Any, ...] | None = None


def secret_values() -> frozenset[str]:
    """Every known secret value: the registered ones and the current values of the registered names."""
    global _cache
    environ = os.environ
    data = getattr(environ, "_data", None)
    encodekey = getattr(environ, "encodekey", None)
    if not isinstance(data, dict) or encodekey is None:
        return _secret_values_now()
    cache = _cache
    if (cache is not None and cache[0] is _values and cache[1] == len(_values) and cache[2] is _names
            and cache[3] == len(_names) and cache[4] is data and tuple(map(data.get, cache[5])) == cache[6]):
        return cache[7]
    values, names = _values, _names
    size_values, size_names = len(values), len(names)
    keys = tuple(map(encodekey, list(names)))
    snapshot = tuple(map(data.get, keys))  # read before the values: a change in between recomputes next time
    found = _secret_values_now()
    _cache = (values, size_values, names, size_names, data, keys, snapshot, found)
    return found


def _secret_values_now() -> frozenset[str]:
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
