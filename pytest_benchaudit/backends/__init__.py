"""Model specs and the one backend interface every model speaks.

Every model the project talks to over the network is an OpenAI-compatible
endpoint; ``local`` (and later ``vllm``) only *launch* a server in front of the
same client.  ``--model`` accepts:

- ``local``: the embedded SmolLM2-135M-Instruct, served by llama-cpp-python on
  127.0.0.1, started once per run by the controller and shared by xdist workers;
- ``ID@URL``: any OpenAI-compatible endpoint (key from ``$OPENAI_API_KEY``);
- ``replay:RUN_DIR`` (``replay:RUN_DIR#MODEL`` for a run with several models): the
  run's stored generations, no model at all (downstream changes only);
- ``NAME``: a model defined under ``[tool.benchaudit.models.NAME]`` in pyproject.toml
  (``endpoint``, ``model``, ``api_key_env``, ``min_max_tokens``, ``concurrency``,
  ``timeout``, ``max_retries``).
"""

from __future__ import annotations

import os
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from ..types import Generation, Request

__all__ = ["ModelSpec", "ModelSpecError", "Backend", "parse_model_spec", "strip_credentials"]


class ModelSpecError(ValueError):
    """A ``--model`` value could not be understood."""


class ModelSpec(BaseModel):
    """How to reach one model. Holds the *name* of the key variable, never the key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    kind: Literal["local", "endpoint", "replay"]
    base_url: str | None = None
    model_id: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    min_max_tokens: int | None = None
    concurrency: int | None = None
    timeout: float = 120.0
    max_retries: int = 4
    retry_base: float = 0.5
    replay_dir: str | None = None  # kind "replay": the run directory whose generations are served

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def public(self) -> dict[str, Any]:
        """What run.json records about the model (no credentials)."""
        return {
            "spec": self.label,
            "kind": self.kind,
            "endpoint": strip_credentials(self.base_url) if self.base_url else None,
            "model_id": self.model_id,
            "api_key_env": self.api_key_env if self.api_key() else None,
            "min_max_tokens": self.min_max_tokens,
            **({"replay_of": self.replay_dir} if self.replay_dir else {}),
        }


class Backend(Protocol):
    """Anything that turns a :class:`Request` into a :class:`Generation`.

    ``generate`` never raises for a failed request: the failure is returned as
    ``Generation(error=...)`` so that it becomes an invalid response, not a crash.
    """

    async def generate(self, request: Request) -> Generation: ...

    async def aclose(self) -> None: ...


def strip_credentials(url: str) -> str:
    """Drop ``user:password@`` from a URL so it can be written to a record."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    return urlunsplit(parts)


def parse_model_spec(spec: str, named: dict[str, dict[str, Any]] | None = None) -> ModelSpec:
    """Turn a ``--model`` value into a :class:`ModelSpec` (see module docstring)."""
    named = named or {}
    if spec.startswith("replay:"):
        from pathlib import Path

        from .replay import ReplayError, replay_model_label

        target, _, model = spec[len("replay:"):].partition("#")
        try:
            label = replay_model_label(Path(target), model or None)
        except ReplayError as err:
            raise ModelSpecError(f"--model {spec}: {err}") from None
        return ModelSpec(label=label, kind="replay", replay_dir=target, api_key_env=None, concurrency=64)
    if spec == "local":
        # llama.cpp's server answers one request at a time: one in flight plus one queued
        # keeps it busy without piling up timeouts.
        return ModelSpec(label="local", kind="local", model_id="SmolLM2-135M-Instruct", api_key_env=None,
                         concurrency=2, timeout=600.0)
    if spec in named:
        cfg = dict(named[spec])
        try:
            return ModelSpec(
                label=spec,
                kind="endpoint",
                base_url=cfg.pop("endpoint"),
                model_id=cfg.pop("model", spec),
                **cfg,
            )
        except KeyError:
            raise ModelSpecError(f"--model {spec}: [tool.benchaudit.models.{spec}] needs an 'endpoint'") from None
        except ValidationError as err:
            raise ModelSpecError(f"--model {spec}: [tool.benchaudit.models.{spec}]: {err.errors()[0]['loc'][0]}: {err.errors()[0]['msg']}") from None
    if "@" in spec:
        model_id, _, url = spec.partition("@")
        if not model_id or not url.startswith(("http://", "https://")):
            raise ModelSpecError(f"--model {spec}: expected ID@URL, e.g. qwen3@http://127.0.0.1:8000/v1")
        return ModelSpec(label=model_id, kind="endpoint", base_url=url.rstrip("/"), model_id=model_id)
    known = ", ".join(["local", *named]) or "local"
    raise ModelSpecError(
        f"--model {spec}: unknown model; use 'local', ID@URL (e.g. qwen3@http://127.0.0.1:8000/v1) "
        f"or a name from [tool.benchaudit.models] in pyproject.toml (known: {known})"
    )
