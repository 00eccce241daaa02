"""Model specs and the one backend interface every model speaks.

Every model the project talks to over the network is an OpenAI-compatible
endpoint; ``local`` and ``vllm:`` only *launch* a server in front of the same
client.  ``--model`` accepts:

- ``local``: the embedded SmolLM2-135M-Instruct, served by llama-cpp-python on
  127.0.0.1, started once per run by the controller and shared by xdist workers;
- ``vllm:HF_ID``: ``vllm serve HF_ID --host 127.0.0.1 --port P`` launched once per
  run the same way (see :mod:`.vllm`); extra ``vllm serve`` arguments come from
  ``$BENCHAUDIT_VLLM_ARGS`` (shell words) or a named entry with ``launch = "vllm"``;
- ``ID@URL``: any OpenAI-compatible endpoint (key from ``$OPENAI_API_KEY``);
- ``ID@URL1,URL2,...``: one model served by several endpoints, balanced request by
  request (see :mod:`.balanced`; ``--concurrency`` applies to each endpoint);
- ``replay:RUN_DIR`` (``replay:RUN_DIR#MODEL`` for a run with several models): the
  run's stored generations, no model at all (downstream changes only);
- ``PROVIDER/MODEL`` (``openai/gpt-4o``, ``azure/DEPLOYMENT``, ``anthropic/MODEL``,
  ``gemini/MODEL``, ``openrouter/VENDOR/MODEL``, ``together/``, ``groq/``, ``deepseek/``,
  ``mistral/``, ``ollama/MODEL[@URL]``, ``vllm/MODEL@URL``) and bare well-known names
  (``gpt-*``, ``o1``/``o3``/``o4-*``, ``claude-*``, ``gemini-*``): a hosted or local provider
  from the registry (see :mod:`.providers`), key and base URL from its conventional
  environment variables, its quirks applied to each request and recorded;
- ``NAME``: a model defined under ``[tool.benchaudit.models.NAME]`` in pyproject.toml
  (``endpoint``, ``model``, ``api_key_env``, ``min_max_tokens``, ``concurrency``,
  ``timeout``, ``max_retries``); ``endpoint`` may be a list (balanced), or the entry
  may say ``launch = "vllm"`` with ``model`` (the HF id, default NAME), ``args``
  (extra ``vllm serve`` arguments) and ``startup_timeout`` (seconds) instead.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from pytest_benchaudit.common.errors import UsageError
from pytest_benchaudit.common.secrets import mask_url_credentials_in, register_url_secrets, strip_url_credentials
from pytest_benchaudit.inference.providers import Provider, ProviderError, Quirk, adjust_params, load_providers, resolve
from pytest_benchaudit.pipeline.record_documents import InferenceParams, RunModel
from pytest_benchaudit.pipeline.types import Generation, Request

__all__ = [
    "ModelSpec",
    "ModelSpecError",
    "Backend",
    "BackendBug",
    "auth_headers",
    "endpoint_problem",
    "parse_model_spec",
    "strip_credentials",
]


class ModelSpecError(UsageError):
    """A ``--model`` value could not be understood."""


class ModelSpec(BaseModel):
    """How to reach one model. Holds the *name* of the key variable, never the key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    kind: Literal["local", "endpoint", "replay", "vllm"]
    base_url: str | None = None
    model_id: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    min_max_tokens: int | None = None
    concurrency: int | None = None
    timeout: float = 120.0
    max_retries: int = 4
    retry_base: float = 0.5
    replay_dir: str | None = None  # kind "replay": the run directory whose generations are served
    endpoints: tuple[str, ...] = ()  # kind "endpoint" balanced over several URLs (base_url is the first)
    launch_args: tuple[str, ...] = ()  # kind "vllm": extra `vllm serve` arguments
    startup_timeout: float | None = None  # kind "vllm": seconds to wait for health (default in .vllm)
    # Providers (see .providers): who serves the model, how it is asked, what is adjusted.
    provider: str | None = None
    api: Literal["openai", "anthropic"] = "openai"
    auth: Literal["bearer", "api-key", "x-api-key"] = "bearer"
    headers: tuple[tuple[str, str], ...] = ()  # fixed extra headers (never a key)
    query: tuple[tuple[str, str], ...] = ()  # query parameters of every request (Azure's api-version)
    quirks: tuple[Quirk, ...] = ()
    strict_provider: bool = False  # --strict-provider: send the layer as it is, no quirk applied
    resolved_note: str | None = None  # how a bare name was resolved, said once and in the card

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def public(self) -> RunModel:
        """What run.json records about the model (no credentials)."""
        info: RunModel = {
            "spec": self.label,
            "kind": self.kind,
            "endpoint": strip_credentials(self.base_url) if self.base_url else None,
            "model_id": self.model_id,
            "api_key_env": self.api_key_env if self.api_key() else None,
            "min_max_tokens": self.min_max_tokens,
        }
        if self.replay_dir:
            info["replay_of"] = self.replay_dir
        if self.endpoints:
            info["endpoints"] = [strip_credentials(u) for u in self.endpoints]
        if self.kind == "vllm":
            # (a vllm spec always has its model id: the parser sets it to the HF id)
            info["launch"] = ["vllm", "serve", self.model_id or "", *self.launch_args]
        if self.provider:
            info.update(
                {"provider": self.provider, "api": self.api, "auth": self.auth, "strict_provider": self.strict_provider}
            )
        if self.resolved_note:
            info["resolved"] = self.resolved_note
        return info

    def provider_card(self, params: InferenceParams) -> dict[str, JsonValue]:
        """What a pipeline card says about this provider model for a layer's request parameters
        (``card["providers"][label]``): how it is reached and each adjustment its quirks make (none
        under --strict-provider)."""
        _, notes = adjust_params(params, () if self.strict_provider else self.quirks)
        card: dict[str, JsonValue] = {
            "provider": self.provider,
            "model_id": self.model_id,
            "endpoint": strip_credentials(self.base_url) if self.base_url else None,
            "api": self.api,
            "auth": self.auth,
            "strict_provider": self.strict_provider,
            "adjustments": [*notes],
        }
        if self.resolved_note:
            card["resolved"] = self.resolved_note
        return card


class BackendBug(RuntimeError):
    """A backend's own code failed (not the endpoint, not its answer): a bug in benchaudit.

    Never recorded as the model's ``inference_error`` (that would score a harness bug as a wrong
    answer): the run stops with this message, the records written so far kept."""


class Backend(Protocol):
    """Anything that turns a :class:`Request` into a :class:`Generation`.

    ``generate`` never raises for a failed request: the failure is returned as
    ``Generation(error=...)`` so that it becomes an invalid response, not a crash.  It raises
    :class:`BackendBug` when its own code fails (or lets the exception through: the engine treats
    any other exception the same way), and cancellation.
    """

    async def generate(self, request: Request) -> Generation: ...

    async def aclose(self) -> None: ...


def auth_headers(spec: ModelSpec, key: str | None) -> dict[str, str]:
    """The header that carries ``key`` to ``spec``'s endpoint, as its provider's ``auth`` says
    (``Authorization: Bearer`` by default); none without a key."""
    if not key:
        return {}
    if spec.auth == "api-key":
        return {"api-key": key}
    if spec.auth == "x-api-key":
        return {"x-api-key": key}
    return {"Authorization": f"Bearer {key}"}


def endpoint_problem(spec: ModelSpec) -> str | None:
    """Why no request to ``spec``'s endpoint(s) could be sent, found before any is, as the HTTP client
    (aiohttp, on yarl's URLs) finds it when it builds each request: a URL it cannot parse (a port out
    of range or not a number, an unclosed IPv6 bracket), one without a host, credentials in the URL
    that HTTP Basic auth cannot encode (latin-1), or credentials in the URL beside a key sent as the
    ``Authorization`` header (aiohttp refuses to combine them).  ``None`` when there is none, or no
    URL to check (a server the run launches)."""
    sends_authorization = any(
        h.lower() == "authorization" for h in (*dict(spec.headers), *auth_headers(spec, spec.api_key()))
    )
    urls = spec.endpoints or ((spec.base_url,) if spec.base_url else ())
    for url in urls:
        problem = _url_problem(url, sends_authorization, spec.api_key_env)
        if problem:  # which endpoint, where there are several
            return f"{mask_url_credentials_in(url)}: {problem}" if len(urls) > 1 else problem
    return None


def _url_problem(url: str, sends_authorization: bool, key_env: str | None) -> str | None:
    """:func:`endpoint_problem` for one URL (yarl is aiohttp's URL type: imported here, not at start-up)."""
    import yarl

    try:
        parsed = yarl.URL(url)  # yarl reads the port (and refuses a bad one) as it parses
    except ValueError as err:
        return f"not a URL a request can be sent to ({err})"
    if not parsed.raw_host:
        return "no host in the URL"
    if parsed.user is None and parsed.password is None:
        return None
    try:
        f"{parsed.user or ''}:{parsed.password or ''}".encode("latin-1")
    except UnicodeEncodeError:
        return "the user name or password in the URL has characters HTTP Basic auth cannot send (latin-1 only)"
    if sends_authorization:
        key = f"${key_env}" if key_env else "a key"
        return (
            f"the URL holds credentials (sent as HTTP Basic auth) and {key} is set (sent as the "
            "Authorization header); a request carries one of them: take the credentials out of the URL, "
            f"or leave {key} unset for this run"
        )
    return None


def strip_credentials(url: str) -> str:
    """``url`` as it may be written to a record (no ``user:password@``, no credential in its query):
    :func:`pytest_benchaudit.common.secrets.strip_url_credentials`."""
    return strip_url_credentials(url)


def parse_model_spec(
    spec: str, named: dict[str, dict[str, Any]] | None = None, providers: dict[str, Provider] | None = None
) -> ModelSpec:
    """Turn a ``--model`` value into a :class:`ModelSpec` (see module docstring).

    ``providers`` is the registry (:func:`~.providers.load_providers`; the shipped one by default).
    Credentials written into an endpoint URL (a password, an ``api_key=`` query parameter) become
    known secrets here, in every process that reads the option (the xdist controller too); an error
    quotes the spec with them masked.
    """
    try:
        parsed = _parse_model_spec(spec, named or {}, providers)
    except ModelSpecError as err:
        raise ModelSpecError(mask_url_credentials_in(str(err))) from None
    for url in parsed.endpoints or ((parsed.base_url,) if parsed.base_url else ()):
        register_url_secrets(url)
    return parsed


def _parse_model_spec(spec: str, named: dict[str, dict[str, Any]], providers: dict[str, Provider] | None) -> ModelSpec:
    if spec.startswith("replay:"):
        # Which model a run directory replays is read from its run.json by the run-directory
        # side (pytest_benchaudit.runs.replay.resolve_replay_spec).
        target, _, model = spec[len("replay:") :].partition("#")
        if not target:
            raise ModelSpecError(f"--model {spec}: expected replay:RUN_DIR or replay:RUN_DIR#MODEL")
        # the label is provisional until resolved; `#MODEL` is kept as the model id it asks for
        return ModelSpec(
            label=spec, kind="replay", replay_dir=target, model_id=model or None, api_key_env=None, concurrency=64
        )
    if spec == "local":
        # llama.cpp's server answers one request at a time: one in flight plus one queued
        # keeps it busy without piling up timeouts.
        return ModelSpec(
            label="local",
            kind="local",
            model_id="SmolLM2-135M-Instruct",
            api_key_env=None,
            concurrency=2,
            timeout=600.0,
        )
    if spec.startswith("vllm:"):
        hf_id = spec[len("vllm:") :]
        if not hf_id or hf_id.startswith("-"):
            raise ModelSpecError(f"--model {spec}: expected vllm:HF_ID, e.g. vllm:Qwen/Qwen3-0.6B")
        return ModelSpec(label=hf_id, kind="vllm", model_id=hf_id, api_key_env=None, launch_args=_vllm_env_args(spec))
    if spec in named:
        cfg = dict(named[spec])
        where = f"--model {spec}: [tool.benchaudit.models.{spec}]"
        provider_keys = sorted(set(cfg) & _PROVIDER_FIELDS)
        if provider_keys:  # set by the registry only, so that auth, URL and quirks always agree
            raise ModelSpecError(
                f"{where}: {', '.join(provider_keys)} cannot be set here; use --model "
                "PROVIDER/MODEL, or define a provider under [tool.benchaudit.providers]"
            )
        launch = cfg.pop("launch", None)
        try:
            if launch is not None:
                if launch != "vllm":
                    raise ModelSpecError(f"{where}: launch = {launch!r}; the only launcher is \"vllm\"")
                if "endpoint" in cfg:
                    raise ModelSpecError(f"{where}: give either launch = \"vllm\" or an 'endpoint', not both")
                args = cfg.pop("args", [])
                if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                    raise ModelSpecError(f"{where}: args must be a list of strings (extra `vllm serve` arguments)")
                cfg.setdefault("api_key_env", None)
                return ModelSpec(
                    label=spec,
                    kind="vllm",
                    model_id=cfg.pop("model", spec),
                    launch_args=(*args, *_vllm_env_args(spec)),
                    **cfg,
                )
            endpoint = cfg.pop("endpoint")
            urls = [endpoint] if isinstance(endpoint, str) else list(endpoint)
            if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
                raise ModelSpecError(f"{where}: endpoint must be an http(s) URL or a list of them")
            urls = [u.rstrip("/") for u in urls]
            return ModelSpec(
                label=spec,
                kind="endpoint",
                base_url=urls[0],
                endpoints=tuple(urls) if len(urls) > 1 else (),
                model_id=cfg.pop("model", spec),
                **cfg,
            )
        except KeyError:
            raise ModelSpecError(f"{where} needs an 'endpoint' (or launch = \"vllm\")") from None
        except ValidationError as err:
            raise ModelSpecError(f"{where}: {err.errors()[0]['loc'][0]}: {err.errors()[0]['msg']}") from None
    try:
        found = resolve(spec, providers if providers is not None else load_providers())
    except ProviderError as err:
        raise ModelSpecError(str(err)) from None
    if found is not None:
        p = found.provider
        return ModelSpec(
            label=spec,
            kind="endpoint",
            base_url=found.base_url,
            model_id=found.model,
            api_key_env=found.api_key_env,
            concurrency=p.concurrency,
            provider=p.name,
            api=p.api,
            auth=p.auth,
            headers=tuple(p.headers.items()),
            query=found.query,
            quirks=found.quirks,
            resolved_note=found.note,
        )
    if "@" in spec:
        model_id, _, url_list = spec.partition("@")
        urls = [u.strip().rstrip("/") for u in url_list.split(",")]
        if not model_id or not all(u.startswith(("http://", "https://")) for u in urls):
            raise ModelSpecError(
                f"--model {spec}: expected ID@URL or ID@URL1,URL2,..., e.g. qwen3@http://127.0.0.1:8000/v1"
            )
        if len(set(urls)) != len(urls):
            raise ModelSpecError(f"--model {spec}: the same endpoint is listed twice")
        return ModelSpec(
            label=model_id,
            kind="endpoint",
            base_url=urls[0],
            model_id=model_id,
            endpoints=tuple(urls) if len(urls) > 1 else (),
        )
    known = ", ".join(["local", *named]) or "local"
    names = "/, ".join(providers if providers is not None else load_providers()) + "/"
    raise ModelSpecError(
        f"--model {spec}: unknown model; use 'local', vllm:HF_ID, ID@URL (e.g. qwen3@http://127.0.0.1:8000/v1), "
        f"PROVIDER/MODEL ({names}) or a name from [tool.benchaudit.models] in pyproject.toml (known: {known})"
    )


_PROVIDER_FIELDS = frozenset(
    {"provider", "api", "auth", "headers", "query", "quirks", "strict_provider", "resolved_note"}
)

VLLM_ARGS_ENV = "BENCHAUDIT_VLLM_ARGS"


def _vllm_env_args(spec: str) -> tuple[str, ...]:
    """Extra ``vllm serve`` arguments from ``$BENCHAUDIT_VLLM_ARGS`` (shell words), for every vLLM model."""
    try:
        return tuple(shlex.split(os.environ.get(VLLM_ARGS_ENV, "")))
    except ValueError as err:
        raise ModelSpecError(f"--model {spec}: ${VLLM_ARGS_ENV}: {err}") from None
