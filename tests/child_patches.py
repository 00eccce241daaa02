"""Patches a test applies inside the inference process, which a monkeypatch in the test process
cannot reach: :func:`in_children` writes a ``sitecustomize.py`` that the child interpreter (started
with the test process's environment) imports at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent


def install_url_raising_send(canary: str) -> None:
    """The real HTTP exchange, except that two questions fail with an exception whose message holds
    the request URL as a client that passes the key in the query string would build it."""
    import aiohttp

    from pytest_benchaudit.inference import openai_compat

    real = openai_compat.OpenAICompatBackend._send

    async def send(self: Any, method: str, path: str, content: bytes | None = None, timeout: Any = None) -> Any:
        keyed = f"{self._base}{path}?key={canary}"
        if content and b"[RAISE_URL]" in content:  # an error of the client whose message holds the URL
            raise aiohttp.InvalidURL(f"unexpected failure posting to {keyed}")
        if content and b"[CONNECT_URL]" in content:
            raise aiohttp.ClientConnectionError(f"All connection attempts failed for {keyed}")
        return await real(self, method, path, content, timeout)

    openai_compat.OpenAICompatBackend._send = send  # type: ignore[method-assign]


def in_children(monkeypatch: pytest.MonkeyPatch, site: Path, call: str) -> None:
    """Child interpreters of this test run ``call`` (a call of a function of this module) at start-up."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nimport child_patches\nchild_patches.{call}\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
