"""Providers: model names as users write them, and each provider's quirks as data.

The registry is ``providers.toml`` next to this module (package data), extended or
overridden per project under ``[tool.benchaudit.providers.NAME]`` in pyproject.toml.
:func:`resolve` turns ``PROVIDER/MODEL`` (``openai/gpt-4o``, ``azure/DEPLOYMENT``,
``openrouter/VENDOR/MODEL``, ``vllm/MODEL@URL``, ...) or a bare well-known name
(``gpt-5.4``, ``o3-mini``, ``claude-sonnet-4-5``, ``gemini-2.5-pro``) into a
:class:`Resolved`: base URL, key variable, auth header, the quirks that apply.
Keys and base URLs come from each provider's conventional environment variables;
a key that is needed and not set is one :class:`ProviderError` naming the variable.

Quirks are adjustments this project makes to what a pipeline layer asks, because a
provider refuses it as written (Azure's minimum of 16 for ``max_tokens``, OpenAI
reasoning models' ``max_completion_tokens``, Anthropic's required ``max_tokens``).
:func:`adjust_params` applies them and says each one in a line
("inference.max_tokens 5 → 16: provider minimum: ..."), which goes into the
request's ``adjustments`` (so into every record and the cache key) and into the
pipeline card.  With ``--strict-provider`` nothing is adjusted: the layer is sent
as it is, and the provider's refusal becomes the record.

Pure: reads the package's TOML file and the environment, imports nothing of the
project beyond :mod:`pytest_benchaudit.common` and the pipeline's value types.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_benchaudit.common.errors import UsageError
from pytest_benchaudit.pipeline.types import Request

if TYPE_CHECKING:
    from pytest_benchaudit.inference.backend import ModelSpec

__all__ = [
    "Provider",
    "ProviderError",
    "Quirk",
    "Resolved",
    "adjust_params",
    "adjust_request",
    "load_providers",
    "resolve",
]

# Request parameter -> the pipeline field it comes from (what an adjustment line names).
_FIELD = {
    "max_tokens": "inference.max_tokens",
    "stop": "inference.stop",
    "temperature": "inference.decoding.temperature",
    "top_p": "inference.decoding.top_p",
    "seed": "inference.decoding.seed",
    "top_logprobs": "inference.decoding.top_logprobs",
}


class ProviderError(UsageError):
    """A provider spec, a provider table or a provider's environment is not usable."""


class Quirk(BaseModel):
    """One adjustment a provider needs (see providers.toml for the keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = ""
    models: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    min: dict[str, int] = Field(default_factory=dict)
    require: dict[str, Any] = Field(default_factory=dict)
    drop: tuple[str, ...] = ()
    set: dict[str, Any] = Field(default_factory=dict)
    rename: dict[str, str] = Field(default_factory=dict)
    why: str

    def __hash__(self) -> int:  # dict fields: hash the canonical JSON (a ModelSpec holding quirks is hashed)
        return hash(self.model_dump_json())

    def applies_to(self, model: str) -> bool:
        name = model.lower()
        if self.models and not any(fnmatch.fnmatchcase(name, p.lower()) for p in self.models):
            return False
        return not any(fnmatch.fnmatchcase(name, p.lower()) for p in self.unless)


class Provider(BaseModel):
    """One entry of the registry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    title: str = ""
    api: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    base_url_env: str | None = None
    path: str = ""
    api_key_env: tuple[str, ...] = ()
    key_required: bool = True
    auth: Literal["bearer", "api-key", "x-api-key"] = "bearer"
    headers: dict[str, str] = Field(default_factory=dict)
    api_version_env: str | None = None
    api_version: str | None = None
    bare: tuple[str, ...] = ()
    url_in_spec: bool = False
    concurrency: int | None = None
    quirks: tuple[Quirk, ...] = ()

    @field_validator("api_key_env", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    def matches_bare(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model.lower(), p.lower()) for p in self.bare)


@dataclass(frozen=True)
class Resolved:
    """Where and how to reach one model of a provider."""

    provider: Provider
    model: str
    base_url: str
    api_key_env: str | None
    quirks: tuple[Quirk, ...]
    query: tuple[tuple[str, str], ...] = ()
    note: str | None = None  # the one line saying how a bare name was resolved


@lru_cache(maxsize=1)
def _builtin() -> dict[str, Any]:
    text = resources.files("pytest_benchaudit.inference").joinpath("providers.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def load_providers(extra: dict[str, Any] | None = None) -> dict[str, Provider]:
    """The registry: the shipped providers, then ``extra`` (``[tool.benchaudit.providers]``).

    A table in ``extra`` for a shipped provider replaces the keys it gives and appends
    its quirks; a new name adds a provider.  Providers from ``extra`` come first, so
    their ``bare`` patterns win over the shipped ones.
    """
    merged: dict[str, dict[str, Any]] = {}
    for name, table in (extra or {}).items():
        if not isinstance(table, dict):
            raise ProviderError(f"[tool.benchaudit.providers.{name}] must be a table")
        base = dict(_builtin().get(name, {}))
        quirks = [*base.pop("quirks", []), *table.get("quirks", [])]
        merged[name] = {**base, **table, "quirks": quirks}
    for name, table in _builtin().items():
        merged.setdefault(name, dict(table))
    out: dict[str, Provider] = {}
    for name, table in merged.items():
        where = f"[tool.benchaudit.providers.{name}]" if name in (extra or {}) else f"providers.toml [{name}]"
        try:
            parsed = tuple(Quirk(provider=name, **q) for q in table.get("quirks", []))
            out[name] = Provider(name=name, **{k: v for k, v in table.items() if k != "quirks"}, quirks=parsed)
        except (ValidationError, TypeError) as err:
            raise ProviderError(f"{where}: {_first_error(err)}") from None
    return out


def _first_error(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(err)


def resolve(spec: str, providers: dict[str, Provider]) -> Resolved | None:
    """``PROVIDER/MODEL`` or a bare well-known name -> :class:`Resolved`; ``None`` for any other spec.

    ``X/Y@URL`` is a provider spec only for providers that take a URL in the spec
    (vLLM, Ollama); otherwise it stays an ``ID@URL`` endpoint whose id contains a
    slash (``openai/gpt-oss-20b@http://127.0.0.1:8000/v1`` served by vLLM).
    """
    prefix, slash, rest = spec.partition("/")
    note = None
    url = None
    if slash and prefix in providers:
        provider = providers[prefix]
        if "@" in rest:
            if not provider.url_in_spec:
                return None
            rest, _, url = rest.partition("@")
            if not url.startswith(("http://", "https://")):
                raise ProviderError(f"--model {spec}: expected {prefix}/MODEL@http(s)://HOST:PORT/v1")
        model = rest
        if not model:
            raise ProviderError(f"--model {spec}: no model name after '{prefix}/'")
    elif not slash and "@" not in spec and ":" not in spec:
        provider = next((p for p in providers.values() if p.matches_bare(spec)), None)  # type: ignore[assignment]
        if provider is None:
            return None
        model = spec
        note = f"--model {spec} → {provider.name}/{spec} ({provider.title or provider.name}, a well-known name)"
    else:
        return None
    where = f"--model {spec}"
    base = url or _base_url(provider, model, where)
    key_env = _key_env(provider, where)
    query: tuple[tuple[str, str], ...] = ()
    if provider.api_version_env or provider.api_version:
        version = (
            os.environ.get(provider.api_version_env) if provider.api_version_env else None
        ) or provider.api_version
        query = (("api-version", str(version)),)
    quirks = tuple(q for q in provider.quirks if q.applies_to(model))
    return Resolved(
        provider=provider,
        model=model,
        base_url=base.rstrip("/"),
        api_key_env=key_env,
        quirks=quirks,
        query=query,
        note=note,
    )


def _base_url(provider: Provider, model: str, where: str) -> str:
    env = os.environ.get(provider.base_url_env, "").strip() if provider.base_url_env else ""
    if env:
        root = env.rstrip("/")
        if "://" not in root:  # OLLAMA_HOST=host:port
            root = "http://" + root
        return root + provider.path.format(model=quote(model, safe=""))
    if provider.base_url:
        return provider.base_url.format(model=quote(model, safe=""))
    hint = f"${provider.base_url_env} is not set" if provider.base_url_env else "no base URL is known"
    form = " (or give it as " + provider.name + "/MODEL@URL)" if provider.url_in_spec else ""
    raise ProviderError(f"{where}: {hint}; {provider.title or provider.name} needs its base URL{form}")


def _key_env(provider: Provider, where: str) -> str | None:
    for name in provider.api_key_env:
        if os.environ.get(name):
            return name
    if provider.key_required and provider.api_key_env:
        first = provider.api_key_env[0]
        also = "" if len(provider.api_key_env) == 1 else f" (or ${', $'.join(provider.api_key_env[1:])})"
        raise ProviderError(
            f"{where}: ${first}{also} is not set; {provider.title or provider.name} needs an API key in it"
        )
    return provider.api_key_env[0] if provider.api_key_env else None


def _field(param: str) -> str:
    return _FIELD.get(param, param)


def adjust_params(params: Mapping[str, object], quirks: tuple[Quirk, ...]) -> tuple[dict[str, object], list[str]]:
    """Apply ``quirks`` to request parameters; the adjusted parameters and one line per change.

    The parameters are a layer's (:class:`~pytest_benchaudit.pipeline.record_documents.InferenceParams`) or a
    request's, and a quirk may set or rename any of them: what comes out is JSON values for the
    request body, passed on as they are (only ``min`` reads one, checked to be a number)."""
    out = dict(params)
    notes: list[str] = []
    for q in quirks:
        who = f"{q.why} [{q.provider}]" if q.provider else q.why
        for name, low in q.min.items():
            value = out.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < low:
                notes.append(f"{_field(name)} {value} → {low}: {who}")
                out[name] = low
        for name, value in q.require.items():
            if name not in out:
                notes.append(f"{_field(name)} unspecified → {value}: {who}")
                out[name] = value
        for name in q.drop:
            if name in out:
                notes.append(f"{_field(name)} {_show(out.pop(name))} → not sent: {who}")
        for name, value in q.set.items():
            if name not in out:
                notes.append(f"{_field(name)} not sent → {_show(value)}: {who}")
                out[name] = value
        for old, new in q.rename.items():
            if old in out and new not in out:
                notes.append(f"{_field(old)} sent as {new}: {who}")
                out[new] = out.pop(old)
    return out, notes


def _show(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) if not isinstance(value, (int, float)) else str(value)


def adjust_request(request: Request, spec: ModelSpec) -> Request:
    """``request`` as the provider of ``spec`` will get it: quirks applied and listed in
    ``adjustments``; unchanged under ``--strict-provider`` or without quirks."""
    if spec.strict_provider or not spec.quirks:
        return request
    params, notes = adjust_params(request.params, spec.quirks)
    if not notes:
        return request
    return request.model_copy(update={"params": params, "adjustments": (*request.adjustments, *notes)})
