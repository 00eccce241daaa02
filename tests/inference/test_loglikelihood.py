"""The log-likelihood request path: what is sent per continuation and how the echo is read."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.loglikelihood import echoed_tokens, read_continuation, sub_requests
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.pipeline.stages import PipelineError, build_pipeline
from pytest_benchaudit.pipeline.types import EchoedTokens, Question, Request
from pytest_benchaudit.prompt.loglikelihood_request import with_continuations
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

CONTEXT = "Q?\nA. x\nB. y\nAnswer:"


def _echo(prompt: str, tokens: list[str], values: list[float | None]) -> EchoedTokens:
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return EchoedTokens(text=prompt + "\n", tokens=tuple(tokens), logprobs=tuple(values), offsets=tuple(offsets))


def test_the_continuation_is_the_tokens_between_the_context_and_the_generated_one() -> None:
    prompt = CONTEXT + " B"
    echo = _echo(prompt, ["Q?", "\nA.", " x", "\nB.", " y", "\nAnswer:", " B", "\n"], [None, -1, -1, -1, -1, -1, -0.7, -9])
    read = read_continuation(echo, CONTEXT, " B")
    assert read.missing is None and read.tokens == (" B",) and read.logprobs == (-0.7,) and read.loglikelihood == -0.7
    # Two continuation tokens are summed, the generated token (at the prompt's end) never counted.
    echo = _echo(CONTEXT + " Bc", ["Q?\nA. x\nB. y\nAnswer:", " B", "c", "\n"], [None, -0.5, -0.25, -9.0])
    assert read_continuation(echo, CONTEXT, " Bc").loglikelihood == pytest.approx(-0.75)


@pytest.mark.parametrize(("echo", "says"), [
    (None, "no token log-probabilities"),
    (EchoedTokens(text=" B", tokens=(" B",), logprobs=(-0.1,), offsets=(len(CONTEXT) + 2,)), "not echoed"),
    # A token that starts in the context and runs into the continuation: none starts inside it.
    (_echo(CONTEXT + " B", ["Q?\nA. x\nB. y\nAnswer", ": B", "\n"], [None, -1.0, -2.0]), "no echoed token starts inside"),
    (_echo(CONTEXT + " B", [CONTEXT, " B", "\n"], [None, None, -2.0]), "log-probability is null"),
])
def test_what_cannot_be_read_is_named(echo: EchoedTokens | None, says: str) -> None:
    read = read_continuation(echo, CONTEXT, " B")
    assert read.missing is not None and says in read.missing and read.logprobs == ()


def test_unequal_logprob_lists_are_a_malformed_answer() -> None:
    with pytest.raises(ValueError, match="unequal length"):
        echoed_tokens({"text": "x", "logprobs": {"tokens": ["a", "b"], "token_logprobs": [None], "text_offset": [0, 1]}})
    assert echoed_tokens({"text": "x", "logprobs": None}) is None


def _pipeline(**inference: object) -> object:
    return build_pipeline("lm_eval", "b", "t", {"prompt": {"format": {"mode": "completion"}},
                                                "inference": {"max_tokens": 1, **inference}})


def test_the_request_field_keeps_old_hashes_and_moves_the_upstream_hash() -> None:
    generate = build_pipeline("x", "b", "t", {"inference": {"max_tokens": 1}})
    assert "request" not in generate.hashed_stages()["inference"]  # left out at its default: old hashes hold
    loglik = build_pipeline("x", "b", "t", {"inference": {"max_tokens": 1, "request": "loglikelihood"}})
    assert loglik.upstream_hash != generate.upstream_hash and loglik.hash != generate.hash
    explicit = build_pipeline("x", "b", "t", {"inference": {"max_tokens": 1, "request": "generate"}})
    assert explicit.hash == generate.hash  # a no-op change moves nothing


def test_a_chat_loglikelihood_pipeline_is_refused_with_the_fields_named() -> None:
    with pytest.raises(PipelineError, match="inference.request = 'loglikelihood'.*prompt.format.mode"):
        build_pipeline("x", "b", "t", {"prompt": {"format": {"mode": "chat"}}, "inference": {"request": "loglikelihood"}})
    with pytest.raises(PipelineError, match="request"):
        build_pipeline("x", "b", "t", {"inference": {"request": "rolling"}})


def test_the_rendered_request_lists_the_continuations_and_echo() -> None:
    question = Question(benchmark="b", task="t", id="q", index=0, gold="A", choices={"A": "x", "B": "y"})
    plain = Request(mode="completion", prompt=CONTEXT, params={"max_tokens": 1, "logprobs": 1})
    asked = with_continuations(plain, _pipeline(request="loglikelihood"), question)  # type: ignore[arg-type]
    assert asked.continuations == (" A", " B") and asked.params == {"max_tokens": 1, "logprobs": 1, "echo": True}
    assert [s.prompt for s in sub_requests(asked)] == [CONTEXT + " A", CONTEXT + " B"]
    assert with_continuations(plain, _pipeline(), question) is plain  # generate: unchanged
    assert "continuations" not in plain.model_dump()  # an old request's stored form and cache key hold
    assert asked.identity != plain.identity


def test_the_backend_sends_one_echoed_completion_per_continuation() -> None:
    request = Request(mode="completion", prompt=CONTEXT, params={"max_tokens": 1, "top_logprobs": 1, "echo": True,
                                                                 "seed": 1234}, continuations=(" A", " B"))
    values = {CONTEXT + " A": -3.0, CONTEXT + " B": -0.5}
    with ScriptedServer(lambda call: Reply(content="\n", continuation_logprob=values[call.body["prompt"]],
                                           usage={"prompt_tokens": 7, "completion_tokens": 1})) as server:
        backend = OpenAICompatBackend(ModelSpec(label="m", kind="endpoint", base_url=server.url, model_id="m"),
                                      concurrency=4)

        async def ask() -> object:
            try:
                return await backend.generate(request)
            finally:
                await backend.aclose()

        answer = asyncio.run(ask())
        bodies = sorted((c.body for c in server.calls if c.path == "/v1/completions"), key=json.dumps)
    assert [b["prompt"] for b in bodies] == [CONTEXT + " A", CONTEXT + " B"]
    assert all(b["echo"] is True and b["logprobs"] == 1 and b["max_tokens"] == 1 for b in bodies)
    assert answer.error is None and answer.text == ""  # type: ignore[attr-defined]
    assert [c.logprobs for c in answer.continuations] == [(-3.0,), (-0.5,)]  # type: ignore[attr-defined]
    assert answer.usage == {"prompt_tokens": 14, "completion_tokens": 2} and answer.attempts == 2  # type: ignore[attr-defined]
