"""Servers a run launches itself (``local``: llama.cpp; ``vllm:``): which server a model needs,
its cache identity, and :class:`LocalUrl`, the per-run registry of their URLs and keys (handed to
xdist workers in ``workerinput``)."""

from __future__ import annotations

import json
from typing import Any, Protocol

import pytest

from pytest_benchaudit.inference.backend import ModelSpec

__all__ = ["KEYS_KEY", "LAUNCHED", "LocalUrl", "launch_key", "launched_identity"]


LAUNCHED = ("local", "vllm")  # model kinds whose server the run launches itself
_URLS_KEY = "benchaudit_launched_urls"  # workerinput: launch key -> base URL
KEYS_KEY = "benchaudit_launched_keys"  # workerinput: launch key -> the server's per-run API key


def launch_key(spec: ModelSpec) -> str:
    """Which server a launched model needs: one per distinct launch (a judge on the same vLLM
    model as the one evaluated shares its server)."""
    if spec.kind == "local":
        return "local"
    return " ".join(["vllm", str(spec.model_id), *spec.launch_args])


def launched_identity(spec: ModelSpec) -> str:
    """The generation cache's name for a launched model: what is served and how, not the port."""
    if spec.kind == "local":
        from pytest_benchaudit.inference.cache import model_identity

        return model_identity(spec)
    return json.dumps(
        {"spec": spec.label, "endpoint": None, "model_id": spec.model_id, "launch": ["vllm", *spec.launch_args]},
        sort_keys=True,
        separators=(",", ":"),
    )


def _spec_text(spec: ModelSpec) -> str:
    """How the user wrote the model, for messages."""
    if spec.kind == "vllm" and spec.label == spec.model_id:
        return f"vllm:{spec.model_id}"
    return spec.label.removeprefix("judge:")


class _Server(Protocol):
    """A server this run launches (``inference.launch``: LocalServer, VllmServer)."""

    api_key: str

    def start(self) -> str: ...

    def stop(self) -> None: ...


class LocalUrl:
    """Servers the run launches itself (``local``: llama.cpp; ``vllm:``): a small registry.

    The process that owns the run starts each one on demand, once (a serial run: before
    items run; under xdist: the controller, in ``pytest_configure_node``), and stops them
    in ``pytest_unconfigure``; xdist workers get the URLs in ``workerinput`` and never
    launch anything.  A failed start is remembered, so it is not retried for every item.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.servers: dict[str, _Server] = {}
        self._failures: dict[str, Exception] = {}
        self._urls: dict[str, str] = dict(getattr(config, "workerinput", {}).get(_URLS_KEY) or {})
        self.max_logprobs: int | None = None  # the most log-probabilities a selected layer asks for
        self._keys: dict[str, str] = dict(getattr(config, "workerinput", {}).get(KEYS_KEY) or {})

    @property
    def server(self) -> Any:
        """The embedded model's server, if this process started it."""
        return self.servers.get("local")

    def get(self, spec: ModelSpec | None = None) -> str:
        """The base URL serving ``spec`` (default: the local model), launching it if needed."""
        key = "local" if spec is None else launch_key(spec)
        if key not in self._urls:
            if hasattr(self.config, "workerinput"):
                raise RuntimeError(f"the controller did not hand a URL for {key!r} to this worker")
            if key in self._failures:
                raise self._failures[key]
            server = self._new_server(spec, self.max_logprobs)
            self.servers[key] = server
            self._keys[key] = server.api_key
            try:
                self._urls[key] = server.start()
            except Exception as err:
                self._failures[key] = err
                raise
        return self._urls[key]

    @staticmethod
    def _new_server(spec: ModelSpec | None, max_logprobs: int | None = None) -> _Server:
        if spec is None or spec.kind == "local":
            from pytest_benchaudit.inference.launch.local import LocalServer

            return LocalServer()
        from pytest_benchaudit.inference.launch.vllm import VllmServer

        return VllmServer(
            str(spec.model_id), spec.launch_args, startup_timeout=spec.startup_timeout, max_logprobs=max_logprobs
        )

    def get_or_usage_error(self, spec: ModelSpec | None = None) -> str:
        """``get()``, with a missing runtime or a failed start turned into a usage error."""
        from pytest_benchaudit.inference.launch.local import LocalModelUnavailable
        from pytest_benchaudit.inference.launch.vllm import VllmUnavailable

        try:
            return self.get(spec)
        except (LocalModelUnavailable, VllmUnavailable) as err:
            raise pytest.UsageError(f"--model {'local' if spec is None else _spec_text(spec)}: {err}") from None

    def start_all(self, specs: Any) -> dict[str, str]:
        """Launch every server ``specs`` need (each once); the URLs by launch key, for workers."""
        for spec in specs:
            if spec is not None and spec.kind in LAUNCHED:
                self.get_or_usage_error(spec)
        return dict(self._urls)

    def api_key_env(self, spec: ModelSpec) -> str | None:
        """The environment variable holding the per-run key of the server launched for ``spec``."""
        from pytest_benchaudit.inference.launch.keys import use_api_key

        key = launch_key(spec)
        return use_api_key(key, self._keys[key]) if self._keys.get(key) else None

    def keys(self) -> dict[str, str]:
        """Launch key -> API key of every server launched, for xdist workers (``workerinput``)."""
        return dict(self._keys)

    def url_of(self, spec: ModelSpec) -> str | None:
        """Where this run served ``spec`` (``None`` if it launched nothing for it)."""
        return self._urls.get(launch_key(spec)) if spec.kind in LAUNCHED else None

    def stop(self) -> None:
        servers, self.servers = self.servers, {}
        for server in servers.values():
            server.stop()
