"""Tests for the model specs (pytest_benchaudit.inference.backend) and the OpenAI-compatible
client (pytest_benchaudit.inference.openai_compat) against a real HTTP endpoint: the
scripted test server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_benchaudit.common import secrets
from pytest_benchaudit.inference.backend import (
    ModelSpec,
    ModelSpecError,
    parse_model_spec,
    strip_credentials,
)
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.pipeline.types import Generation, Message, Request
from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer, by_marker, sequence
from pytest_benchaudit.testing.virtual_time import VirtualClock

CANARY = "sk-canary-1234567890"


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(model_id="served-model").start()
    try:
        yield srv
    finally:
        srv.stop()


def spec_for(server: ScriptedServer, **kw: Any) -> ModelSpec:
    fields: dict[str, Any] = dict(
        label="m",
        kind="endpoint",
        base_url=server.url,
        model_id="my-model",
        retry_base=0.01,
        max_retries=2,
        timeout=5.0,
    )
    fields.update(kw)
    return ModelSpec(**fields)


def generate(server: ScriptedServer, request: Request, clock: VirtualClock | None = None, **spec_kw: Any) -> Generation:
    """One generation through a fresh backend; with ``clock``, its limiter's pauses wait on that clock."""

    async def go() -> Generation:
        backend = OpenAICompatBackend(spec_for(server, **spec_kw), concurrency=4)
        if clock is not None:
            backend.limiter.clock = clock
        try:
            return await backend.generate(request)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def chat(text: str = "Q1: pick one", **params: Any) -> Request:
    return Request(
        mode="chat",
        messages=(Message(role="system", content="Be brief."), Message(role="user", content=text)),
        params=params,
    )


def completion(prompt: str = "Question: 1+1?\nAnswer:", **params: Any) -> Request:
    return Request(mode="completion", prompt=prompt, params=params)


def completion_calls(server: ScriptedServer) -> list[Call]:
    return [c for c in server.calls if c.path.endswith("completions")]


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # a key set in the developer's environment must not change what is sent
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# --------------------------------------------------------------------------- request shape


def test_chat_request_body_is_exactly_model_messages_and_params(server):
    server.script = lambda call: Reply(content="Answer: B")
    gen = generate(server, chat(temperature=0.0, max_tokens=32))
    assert gen.error is None
    assert gen.text == "Answer: B"
    assert gen.finish_reason == "stop"
    assert gen.served_model == "served-model"
    assert gen.attempts == 1 and gen.latency_s > 0
    assert gen.usage["completion_tokens"] == 2
    (call,) = server.calls
    assert call.path == "/v1/chat/completions"
    assert call.body == {
        "model": "my-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1: pick one"}],
        "temperature": 0.0,
        "max_tokens": 32,
    }
    assert "authorization" not in call.headers  # no key in the environment


def test_unspecified_params_are_absent_from_the_body(server):
    gen = generate(server, chat())
    assert gen.error is None
    (call,) = server.calls
    assert set(call.body) == {"model", "messages"}
    for absent in ("temperature", "max_tokens", "top_p", "logprobs", "top_logprobs", "seed"):
        assert absent not in call.body


def test_completion_mode_with_logprobs(server):
    server.script = lambda call: Reply(content=" B", top_logprobs={" B": -0.1, " A": -2.5, " C": -4.0, " D": -6.0})
    gen = generate(server, completion(max_tokens=1, top_logprobs=3))
    assert gen.error is None
    assert gen.text == " B"
    (call,) = server.calls
    assert call.path == "/v1/completions"
    assert call.body == {"model": "my-model", "prompt": "Question: 1+1?\nAnswer:", "logprobs": 3, "max_tokens": 1}
    assert "top_logprobs" not in call.body and "messages" not in call.body
    assert gen.top_logprobs == ({" B": -0.1, " A": -2.5, " C": -4.0},)


def test_chat_logprobs(server):
    server.script = lambda call: Reply(content="A", top_logprobs={"A": -0.05, "B": -3.0, "C": -5.0})
    gen = generate(server, chat(top_logprobs=2))
    assert gen.error is None
    (call,) = server.calls
    assert call.body["logprobs"] is True
    assert call.body["top_logprobs"] == 2
    assert gen.top_logprobs == ({"A": -0.05, "B": -3.0},)


def test_no_logprobs_requested_gives_none(server):
    server.script = lambda call: Reply(content="A", top_logprobs={"A": -0.05})
    assert generate(server, chat()).top_logprobs is None
    assert generate(server, completion()).top_logprobs is None


def test_reasoning_content_and_length_finish(server):
    server.script = lambda call: Reply(
        content="Answer: C", reasoning_content="Let me think about C.", finish_reason="length"
    )
    gen = generate(server, chat(max_tokens=64))
    assert gen.error is None
    assert gen.text == "Answer: C"
    assert gen.reasoning == "Let me think about C."
    assert gen.finish_reason == "length"


def test_null_content_becomes_empty_text(server):
    server.script = lambda call: Reply(content=None, finish_reason="length")
    gen = generate(server, chat())
    assert gen.error is None and gen.text == "" and gen.finish_reason == "length"


def test_by_marker_routes_per_question(server):
    server.script = by_marker({"Q-2": Reply(content="Answer: D")}, default=Reply(content="Answer: A"))
    assert generate(server, chat("Q-1 text")).text == "Answer: A"
    assert generate(server, chat("Q-2 text")).text == "Answer: D"


# --------------------------------------------------------------------------- retries and failures


def test_503_then_success_is_retried(server):
    server.script = sequence(Reply(status=503), Reply(content="Answer: B"))
    gen = generate(server, chat())
    assert gen.error is None
    assert gen.text == "Answer: B"
    assert gen.attempts == 2
    assert [c.attempt for c in completion_calls(server)] == [1, 2]


def test_429_with_retry_after_zero_then_success(server):
    server.script = sequence(Reply(status=429, headers={"Retry-After": "0"}), Reply(content="Answer: C"))
    clock = VirtualClock()  # the limiter's pause is read off this clock, not off the machine's speed
    gen = generate(server, chat(), clock=clock, retry_base=30.0)  # a jittered backoff would pause 15-30 s
    assert gen.error is None
    assert gen.text == "Answer: C"
    assert gen.attempts == 2
    assert [wait for wait in clock.sleeps if wait > 0] == [] and clock.now() == VirtualClock().now()


def test_400_is_not_retried(server):
    server.min_max_tokens = 16
    gen = generate(server, chat(max_tokens=5))
    assert gen.attempts == 1
    assert gen.text == ""
    assert gen.error is not None
    assert "HTTP 400" in gen.error
    assert "max_tokens is too small. Minimum value is 16." in gen.error
    assert len(completion_calls(server)) == 1


def test_always_500_gives_up_after_max_retries_plus_one(server):
    server.script = lambda call: Reply(status=500, error_message="boom")
    gen = generate(server, chat(), max_retries=3)
    assert gen.attempts == 4
    assert len(completion_calls(server)) == 4
    assert gen.error is not None
    assert "HTTP 500: boom" in gen.error
    assert "gave up after 4 attempts" in gen.error


def test_dropped_connection_is_a_connection_error_after_retries(server):
    server.script = lambda call: Reply(drop_connection=True)
    gen = generate(server, chat(), max_retries=2)
    assert gen.attempts == 3
    assert gen.error is not None
    assert "connection error" in gen.error
    assert "gave up after 3 attempts" in gen.error
    assert gen.text == ""


def test_connection_cut_mid_body_is_retried_as_a_connection_error(server):
    """Headers and 20 bytes of a longer announced body, then the socket closes: retried as a
    connection failure (the breaker counts it), not read as a malformed answer."""
    server.script = sequence(Reply(content="Answer: A", cut_body_after=20), Reply(content="Answer: B"))
    gen = generate(server, chat())
    assert gen.error is None and gen.text == "Answer: B" and gen.attempts == 2
    server.script = lambda call: Reply(content="Answer: A", cut_body_after=20)
    gen = generate(server, chat("Q2"), max_retries=2)
    assert gen.attempts == 3 and gen.error is not None
    assert gen.error.startswith("connection error: cut mid-body")
    assert "received 20 of" in gen.error and "gave up after 3 attempts" in gen.error


def test_stalled_body_ends_at_the_read_timeout_and_is_retried(server):
    """Half the body, then nothing for longer than the read timeout: a timeout, retried. (The stall lasts
    until the server stops; the timeout leaves the retry's answer seconds to come on a loaded machine.)"""
    server.script = sequence(Reply(content="Answer: A", stall_body=600.0), Reply(content="Answer: B"))
    gen = generate(server, chat(), timeout=3.0)
    assert gen.error is None and gen.text == "Answer: B" and gen.attempts == 2


def test_malformed_body_is_an_error(server):
    server.script = lambda call: Reply(raw_body=b"{not json")
    gen = generate(server, chat(), max_retries=1)
    assert gen.error is not None
    assert "malformed response" in gen.error
    assert "{not json" in gen.error
    assert gen.attempts == 2


def test_malformed_body_then_good_answer_recovers(server):
    server.script = sequence(Reply(raw_body=b"{not json"), Reply(content="Answer: A"))
    gen = generate(server, chat())
    assert gen.error is None and gen.text == "Answer: A" and gen.attempts == 2


def test_200_without_choices_is_an_error(server):
    server.script = lambda call: Reply(raw_body=b'{"id": "x", "object": "chat.completion", "choices": []}')
    gen = generate(server, chat(), max_retries=0)
    assert gen.error is not None
    assert "no 'choices'" in gen.error
    assert gen.attempts == 1


def test_non_string_content_is_an_error(server):
    server.script = lambda call: Reply(raw_body=b'{"choices": [{"message": {"content": 42}}]}')
    gen = generate(server, chat(), max_retries=0)
    assert gen.error is not None and "malformed response" in gen.error


def test_non_json_error_body_is_reported_as_text(server):
    server.script = lambda call: Reply(status=404, raw_body=b"nothing here", content_type="text/plain")
    gen = generate(server, chat())
    assert gen.error == "HTTP 404: nothing here"
    assert gen.attempts == 1  # 404 is not retryable


def test_connection_refused_is_an_error():
    srv = ScriptedServer().start()
    srv.stop()  # nothing listens on this port any more
    gen = generate(_Stopped(srv.port), chat(), max_retries=1)  # type: ignore[arg-type]
    assert gen.error is not None and "connection error" in gen.error
    assert gen.attempts == 2


class _Stopped:  # a stand-in with the .url of a stopped server
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/v1"


def test_backend_needs_an_endpoint():
    with pytest.raises(ValueError, match="no endpoint URL"):
        OpenAICompatBackend(ModelSpec(label="x", kind="local"), concurrency=1)


# --------------------------------------------------------------------------- credentials


def test_api_key_sent_as_bearer_token(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    gen = generate(server, chat())
    assert gen.error is None
    (call,) = server.calls
    assert call.headers["authorization"] == f"Bearer {CANARY}"
    assert CANARY not in str(call.body)


def test_api_key_from_named_variable(server, monkeypatch):
    monkeypatch.setenv("MY_KEY_VAR", CANARY)
    generate(server, chat(), api_key_env="MY_KEY_VAR")
    (call,) = server.calls
    assert call.headers["authorization"] == f"Bearer {CANARY}"


def test_echoed_key_is_redacted_from_the_error(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    secrets.register_secret_env(["OPENAI_API_KEY"])
    assert CANARY in secrets.secret_values()
    server.script = lambda call: Reply(status=401, error_message=f"Incorrect API key provided: {CANARY}.")
    gen = generate(server, chat())
    assert gen.error is not None
    assert CANARY not in gen.error
    assert "HTTP 401: Incorrect API key provided: ***." == gen.error
    assert server.calls[0].headers["authorization"] == f"Bearer {CANARY}"


def test_short_values_are_not_registered_as_secrets(monkeypatch):
    monkeypatch.setenv("SHORT_SECRET_VAR", "abc")
    secrets.register_secret_env(["SHORT_SECRET_VAR", None])
    assert "abc" not in secrets.secret_values()
    assert secrets.redact("abc abc") == "abc abc"


# --------------------------------------------------------------------------- model specs


def test_parse_local():
    spec = parse_model_spec("local")
    assert spec.kind == "local"
    assert spec.label == "local"
    assert spec.api_key_env is None
    assert spec.base_url is None


def test_parse_id_at_url():
    spec = parse_model_spec("qwen3@http://127.0.0.1:8000/v1/")
    assert spec.kind == "endpoint"
    assert spec.label == "qwen3" and spec.model_id == "qwen3"
    assert spec.base_url == "http://127.0.0.1:8000/v1"
    assert spec.api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize("bad", ["@http://127.0.0.1:8000/v1", "qwen3@127.0.0.1:8000", "qwen3@ftp://h/v1"])
def test_parse_bad_id_at_url(bad: str):
    with pytest.raises(ModelSpecError, match="expected ID@URL"):
        parse_model_spec(bad)


def test_parse_named_model():
    named = {
        "azure": {
            "endpoint": "https://r.example.com/openai/v1",
            "model": "gpt-4o",
            "api_key_env": "AZURE_OPENAI_API_KEY",
            "min_max_tokens": 16,
        }
    }
    spec = parse_model_spec("azure", named)
    assert spec.label == "azure"
    assert spec.kind == "endpoint"
    assert spec.base_url == "https://r.example.com/openai/v1"
    assert spec.model_id == "gpt-4o"
    assert spec.api_key_env == "AZURE_OPENAI_API_KEY"
    assert spec.min_max_tokens == 16
    assert named["azure"]["endpoint"] == "https://r.example.com/openai/v1"  # the config is not consumed


def test_named_model_defaults_model_id_to_name():
    spec = parse_model_spec("llama", {"llama": {"endpoint": "http://127.0.0.1:9/v1"}})
    assert spec.model_id == "llama"


def test_named_model_errors():
    with pytest.raises(ModelSpecError, match="needs an 'endpoint'"):
        parse_model_spec("x", {"x": {"model": "m"}})
    with pytest.raises(ModelSpecError, match=r"\[tool.benchaudit.models.x\]: colour"):
        parse_model_spec("x", {"x": {"endpoint": "http://h/v1", "colour": "red"}})
    with pytest.raises(ModelSpecError, match="min_max_tokens"):
        parse_model_spec("x", {"x": {"endpoint": "http://h/v1", "min_max_tokens": "many"}})


def test_unknown_model_lists_options():
    with pytest.raises(ModelSpecError) as info:
        parse_model_spec("mystery-9", {"gpt-5-4": {"endpoint": "https://h/v1"}, "azure": {"endpoint": "https://a/v1"}})
    message = str(info.value)
    assert "mystery-9" in message
    assert "ID@URL" in message
    assert "known: local, gpt-5-4, azure" in message


def test_strip_credentials():
    assert strip_credentials("http://u:p@h:8/v1") == "http://h:8/v1"
    assert strip_credentials("https://user@h/v1") == "https://h/v1"
    assert strip_credentials("http://h:8/v1?x=1") == "http://h:8/v1?x=1"


def test_public_never_contains_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    spec = parse_model_spec(f"m@http://user:{CANARY}@127.0.0.1:9/v1")
    public = spec.public()
    assert CANARY not in repr(public)
    assert public == {
        "spec": "m",
        "kind": "endpoint",
        "endpoint": "http://127.0.0.1:9/v1",
        "model_id": "m",
        "api_key_env": "OPENAI_API_KEY",
        "min_max_tokens": None,
    }
    assert CANARY not in spec.model_dump_json().replace(spec.base_url or "", "")  # key value never stored
    monkeypatch.delenv("OPENAI_API_KEY")
    assert spec.public()["api_key_env"] is None  # a variable that is not set is not reported


def test_model_spec_is_frozen_and_strict():
    spec = parse_model_spec("local")
    with pytest.raises(ValidationError):
        spec.label = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ModelSpec(label="x", kind="endpoint", api_key="secret")  # type: ignore[call-arg]


def test_read_timeout_is_reported_as_timeout_and_retried(server):
    # A held answer comes only when the server stops (never within the timeout); the timeout leaves the
    # retry's answer seconds to come on a loaded machine (0.3 s did not always).
    server.script = sequence(Reply(delay=600.0), Reply(content="Answer: B", delay=0.0))
    gen = generate(server, chat(), timeout=2.5, max_retries=1)
    assert gen.error is None and gen.text == "Answer: B" and gen.attempts == 2
    server.script = lambda call: Reply(delay=600.0)
    gen = generate(server, chat("other"), timeout=2.5, max_retries=1)
    assert gen.error is not None and gen.error.startswith("timeout: no answer within 2.5s")
    assert gen.attempts == 2


def test_request_bodies_and_answers_are_json_whichever_codec_writes_them() -> None:
    import json
    import math

    from pytest_benchaudit.inference.openai_compat import _Response, request_body

    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "ünïcode ✓ \"quoted\""}],
        "temperature": 0.0,
        "logit_bias": {50256: -100},
    }
    assert json.loads(request_body(body)) == {**body, "logit_bias": {"50256": -100}}  # int keys as json writes them
    huge = {"model": "m", "seed": 2**70}  # beyond orjson's 64 bits: json writes it
    assert json.loads(request_body(huge)) == huge
    # Answers: orjson reads them; what it refuses but json takes (NaN log-probabilities, UTF-16) still reads.
    assert _Response(200, {}, b'{"a": [1, "x"]}').json() == {"a": [1, "x"]}
    assert math.isnan(_Response(200, {}, b'{"logprob": NaN}').json()["logprob"])
    assert _Response(200, {}, '{"a": "é"}'.encode("utf-16")).json() == {"a": "é"}
    with pytest.raises(ValueError):
        _Response(200, {}, b"<html>not json</html>").json()


def test_redactor_masks_like_redact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", {"sk-secret-0123456789", "sk-secret-0123456789-longer"})
    mask = secrets.redactor()
    for text in ("no key", "sk-secret-0123456789-longer and sk-secret-0123456789", ""):
        assert mask(text) == secrets.redact(text)
    monkeypatch.setattr(secrets, "_values", set())
    monkeypatch.setattr(secrets, "_names", set())
    assert secrets.redactor()("sk-secret-0123456789") == "sk-secret-0123456789"
