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

Credentials can also be written into an endpoint URL: ``https://user:password@host/v1`` or a
query parameter (``.../v1?api_key=K``, as some providers want).  :func:`strip_url_credentials`
gives the URL as it may be written (no user info; a credential parameter's value ``***``),
:func:`mask_url_credentials` the URL as a command line to copy may show it (``https://***@host/v1``:
the reader sees where the credentials go), and :func:`register_url_secrets` makes those values
known secrets, so that a server's error text or a log line quoting the URL is masked too: the
password, ``user:password`` and the HTTP Basic token the client sends for them (an error body that
echoes the ``Authorization`` header).  A credential shorter than 8 characters cannot be masked in
every text without masking ordinary words (``pass``): :func:`redact_error` masks it, as a whole
word, in what an endpoint says about a request (error texts), never in a model's answer.  A query
parameter is a credential when its name says so (:func:`is_credential_param`: key, token, secret,
password, signature, auth, credential).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, unquote_plus

__all__ = [
    "is_credential_param",
    "mask_url_credentials",
    "mask_url_credentials_in",
    "register_secret",
    "register_secret_env",
    "register_url_secrets",
    "redact",
    "redact_error",
    "redact_obj",
    "redactor",
    "secret_values",
    "strip_url_credentials",
    "strip_url_credentials_in",
    "url_secrets",
]

_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words
_MASK = "***"
_values: set[str] = set()
_names: set[str] = {"OPENAI_API_KEY"}
_short: set[str] = set()  # credentials too short to mask everywhere: masked as words in error texts


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


def redact_error(text: str) -> str:
    """:func:`redact`, and the short URL credentials (:func:`register_url_secrets`) masked where they
    stand as a word: for what an endpoint says about a request (an error body, an exception's text),
    which may echo them; never used on a model's answer, whose words they could be."""
    text = redact(text)
    if not isinstance(text, str) or not _short:
        return text
    for value in sorted(_short, key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(value)}(?![\w])", _MASK, text)
    return text


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


# A query parameter whose name contains one of these carries a credential (api_key, apikey, key,
# access_token, X-Amz-Signature, X-Amz-Credential, sig, auth, password, client_secret, ...).
_CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|pwd|sig|auth|credential|session", re.IGNORECASE)


def is_credential_param(name: str) -> bool:
    """Whether a URL query parameter named ``name`` carries a credential (judged by its name)."""
    return bool(_CREDENTIAL_NAME.search(unquote_plus(name)))


def _query_parts(query: str) -> list[tuple[str, str | None]]:
    """``a=1&b`` -> ``[("a", "1"), ("b", None)]``, the raw (still quoted) text of each part."""
    parts: list[tuple[str, str | None]] = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        parts.append((name, value if eq else None))
    return parts


def _masked_query(query: str) -> str:
    return "&".join(
        name if value is None else f"{name}={_MASK if value and is_credential_param(name) else value}"
        for name, value in _query_parts(query)
    )


class _Url:
    """A URL cut at its delimiters as written (``scheme://userinfo@host/path?query#fragment``), by
    hand: ``urllib.parse.urlsplit`` raises on some malformed URLs (``http://[::1/v1``), and a URL
    the run will refuse must still be masked in the message that refuses it."""

    def __init__(self, url: str) -> None:
        head, sep, rest = url.partition("://")
        if not sep:
            head, rest = "", url
        cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
        netloc, tail = rest[:cut], rest[cut:]
        self.prefix = head + sep
        self.userinfo, at, self.host = netloc.rpartition("@")
        self.has_userinfo = bool(at)
        before_fragment, hash_, self.fragment = tail.partition("#")
        self.path, question, self.query = before_fragment.partition("?")
        self.suffix_marks = (question, hash_)

    def text(self, userinfo: str | None) -> str:
        """The URL with ``userinfo`` (``None``: none) and each credential query value masked."""
        question, hash_ = self.suffix_marks
        query = _masked_query(self.query) if self.query else self.query
        user = f"{userinfo}@" if userinfo is not None else ""
        return f"{self.prefix}{user}{self.host}{self.path}{question}{query}{hash_}{self.fragment}"


def mask_url_credentials(url: str) -> str:
    """``url`` with its user info replaced by ``***`` (``https://***@host/v1``) and each credential
    query parameter's value by ``***``: what a printed command shows, so the reader knows that
    credentials belong there and puts them back (:func:`strip_url_credentials` drops the user info)."""
    parts = _Url(url)
    return parts.text(_MASK if parts.has_userinfo else None)


def mask_url_credentials_in(text: str) -> str:
    """``text`` with :func:`mask_url_credentials` applied to every http(s) URL in it."""
    return _URL_IN_TEXT.sub(lambda m: mask_url_credentials(m.group(0)), text)


def strip_url_credentials(url: str) -> str:
    """``url`` as it may be written to a record, run.json, a cache row or a log: without
    ``user:password@``, and with the value of each credential query parameter replaced by
    ``***`` (the other parameters, the path and the fragment kept as they were written)."""
    return _Url(url).text(None)


_URL_IN_TEXT = re.compile(r"https?://[^\s,]+")


def strip_url_credentials_in(text: str) -> str:
    """``text`` with :func:`strip_url_credentials` applied to every http(s) URL in it (an argv
    word ``m@https://user:pw@host/v1``, a log line)."""
    return _URL_IN_TEXT.sub(lambda m: strip_url_credentials(m.group(0)), text)


def url_secrets(url: str) -> list[str]:
    """The credentials written into ``url``, each as written and decoded (an error text may quote
    either): its user info (``user:password``; a user alone is a token, ``https://TOKEN@host``),
    the password, the HTTP Basic token an HTTP client sends for them (``base64(user:password)``,
    which a server may echo from the ``Authorization`` header), and each credential query
    parameter's value."""
    parts = _Url(url)
    found: list[str] = []
    if parts.userinfo:
        found += [parts.userinfo, unquote(parts.userinfo)]
        user, _, password = parts.userinfo.partition(":")
        login, secret = unquote(user), unquote(password)
        if password:
            found += [password, secret]
        elif user:  # a token written as the user name
            found += [user, login]
        for encoding in ("latin-1", "utf-8"):  # aiohttp's BasicAuth encodes latin-1; others utf-8
            try:
                found.append(base64.b64encode(f"{login}:{secret}".encode(encoding)).decode("ascii"))
            except UnicodeEncodeError:
                continue
    for name, value in _query_parts(parts.query):
        if value and is_credential_param(name):
            found += [value, unquote_plus(value)]
    return [v for v in dict.fromkeys(found) if v]


def register_url_secrets(url: str | None) -> None:
    """Treat the credentials written into ``url`` (:func:`url_secrets`) as secrets; those too short to
    be masked everywhere are masked as words in error texts (:func:`redact_error`)."""
    for value in url_secrets(url or ""):
        (_values if len(value) >= _MIN_SECRET_LEN else _short).add(value)
