"""Cache entries for the generation-cache tests, and the writer two spawned processes run at once (it lives in
a module a spawned interpreter can import by name, whatever pytest's import mode names the test module)."""

from __future__ import annotations

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.cache import GenerationCache, model_identity
from pytest_benchaudit.pipeline.types import Generation, Message, Request

IDENTITY = model_identity(ModelSpec(label="m", kind="endpoint", base_url="http://127.0.0.1:9/v1", model_id="m"))


def req(text: str = "What is 2+2?", **params: object) -> Request:
    """A one-message chat request."""
    return Request(mode="chat", messages=(Message(role="user", content=text),), params=params)


def gen(text: str = "Answer: B", **kw: object) -> Generation:
    """A finished generation with usage, latency and attempts set."""
    return Generation(
        text=text,
        finish_reason="stop",
        usage={"prompt_tokens": 3, "completion_tokens": 2},
        latency_s=0.25,
        attempts=2,
        served_model="srv",
        **kw,
    )


def concurrent_writer(directory: str, worker: int, n: int) -> None:
    """One of the processes writing the same cache (a spawned process's target: importable by name there)."""
    # A short busy timeout makes the two writers meet the lock and go through the retries; many retries
    # (about 30 s of waits in all) keep a writer stalled mid-transaction on a loaded machine from turning
    # the other's cache off (the 6 by default wait about 1.5 s).
    cache = GenerationCache(directory, busy_timeout=0.05, retries=64)
    for i in range(n):
        # half the keys are written by both processes (the same content), half by one only
        text = f"shared {i}" if i % 2 else f"own {worker} {i}"
        assert cache.put(IDENTITY, req(text), gen(f"Answer: {text}"))
        assert cache.get(IDENTITY, req(text)) is not None
    assert cache.disabled is None, cache.disabled
    cache.close()
