"""The log-likelihood request path: what is sent per continuation and how the echo is read."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.inference.loglikelihood import (
    MAX_LENGTH,
    Planned,
    TokenizerError,
    echoed_tokens,
    plan,
    read_continuation,
    sub_requests,
)
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.pipeline.stages import PipelineError, build_pipeline
from pytest_benchaudit.pipeline.types import EchoedTokens, Question, Request
from pytest_benchaudit.prompt.loglikelihood_request import with_continuations
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.scripted_tokenizer import SPLIT_PUNCTUATION, ScriptedTokenizer

CONTEXT = "Q?\nA. x\nB. y\nAnswer:"


def _echo(prompt: str, tokens: list[str], values: list[float | None]) -> EchoedTokens:
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return EchoedTokens(text=prompt + "\n", tokens=tuple(tokens), logprobs=tuple(values), offsets=tuple(offsets))


def test_the_continuation_is_the_tokens_between_the_context_and_the_generated_one() -> None:
    prompt = CONTEXT + " B"
    echo = _echo(
        prompt, ["Q?", "\nA.", " x", "\nB.", " y", "\nAnswer:", " B", "\n"], [None, -1, -1, -1, -1, -1, -0.7, -9]
    )
    read = read_continuation(echo, CONTEXT, " B")
    assert read.missing is None and read.tokens == (" B",) and read.logprobs == (-0.7,) and read.loglikelihood == -0.7
    # Two continuation tokens are summed, the generated token (at the prompt's end) never counted.
    echo = _echo(CONTEXT + " Bc", ["Q?\nA. x\nB. y\nAnswer:", " B", "c", "\n"], [None, -0.5, -0.25, -9.0])
    assert read_continuation(echo, CONTEXT, " Bc").loglikelihood == pytest.approx(-0.75)


@pytest.mark.parametrize(
    ("echo", "says"),
    [
        (None, "no token log-probabilities"),
        (EchoedTokens(text=" B", tokens=(" B",), logprobs=(-0.1,), offsets=(len(CONTEXT) + 2,)), "not echoed"),
        # A token that starts in the context and runs into the continuation: the tokenizer merges them, and
        # where lm-eval's own tokenizer would cut cannot be known without it.
        (
            _echo(CONTEXT + " B", ["Q?\nA. x\nB. y\nAnswer", ": B", "\n"], [None, -1.0, -2.0]),
            "merges the context's end with the continuation (token ': B'",
        ),
        (_echo(CONTEXT + " B", [CONTEXT, " B", "\n"], [None, None, -2.0]), "log-probability is null"),
    ],
)
def test_what_cannot_be_read_is_named(echo: EchoedTokens | None, says: str) -> None:
    read = read_continuation(echo, CONTEXT, " B")
    assert read.missing is not None and says in read.missing and read.logprobs == ()


def test_unequal_logprob_lists_are_a_malformed_answer() -> None:
    with pytest.raises(ValueError, match="unequal length"):
        echoed_tokens(
            {"text": "x", "logprobs": {"tokens": ["a", "b"], "token_logprobs": [None], "text_offset": [0, 1]}}
        )
    assert echoed_tokens({"text": "x", "logprobs": None}) is None


def _pipeline(**inference: object) -> object:
    return build_pipeline(
        "lm_eval", "b", "t", {"prompt": {"format": {"mode": "completion"}}, "inference": {"max_tokens": 1, **inference}}
    )


def test_the_request_field_keeps_old_hashes_and_moves_the_upstream_hash() -> None:
    generate = build_pipeline("x", "b", "t", {"inference": {"max_tokens": 1}})
    assert "request" not in generate.hashed_stages()["inference"]  # left out at its default: old hashes hold
    loglik = build_pipeline("x", "b", "t", {"inference": {"max_tokens": 1, "request": "loglikelihood"}})
    assert loglik.upstream_hash != generate.upstream_hash and loglik.hash != generate.hash
    explicit = build_pipeline("x", "b", "t", {"inference": {"max_tokens": 1, "request": "generate"}})
    assert explicit.hash == generate.hash  # a no-op change moves nothing


def test_a_chat_loglikelihood_pipeline_is_refused_with_the_fields_named() -> None:
    with pytest.raises(PipelineError, match="inference.request = 'loglikelihood'.*prompt.format.mode"):
        build_pipeline(
            "x", "b", "t", {"prompt": {"format": {"mode": "chat"}}, "inference": {"request": "loglikelihood"}}
        )
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
    request = Request(
        mode="completion",
        prompt=CONTEXT,
        params={"max_tokens": 1, "top_logprobs": 1, "echo": True, "seed": 1234},
        continuations=(" A", " B"),
    )
    values = {CONTEXT + " A": -3.0, CONTEXT + " B": -0.5}
    with ScriptedServer(
        lambda call: Reply(
            content="\n",
            continuation_logprob=values[call.body["prompt"]],
            usage={"prompt_tokens": 7, "completion_tokens": 1},
        )
    ) as server:
        backend = OpenAICompatBackend(
            ModelSpec(label="m", kind="endpoint", base_url=server.url, model_id="m"), concurrency=4
        )

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


def test_an_echo_without_a_generated_token_loses_the_continuations_last_token_as_in_lm_eval() -> None:
    # lm-eval reads token_logprobs[ctxlen:-1]: with nothing generated, the last token is the continuation's own.
    echo = EchoedTokens(
        text=CONTEXT + " Bc",
        tokens=(CONTEXT, " B", "c"),
        logprobs=(None, -0.5, -0.25),
        offsets=(0, len(CONTEXT), len(CONTEXT) + 2),
    )
    read = read_continuation(echo, CONTEXT, " Bc")
    assert read.missing is None and read.tokens == (" B",) and read.loglikelihood == -0.5
    assert "echoed no generated token" in (read.note or "") and "'c'" in (read.note or "")
    one = EchoedTokens(text=CONTEXT + " B", tokens=(CONTEXT, " B"), logprobs=(None, -0.5), offsets=(0, len(CONTEXT)))
    read = read_continuation(one, CONTEXT, " B")
    assert read.tokens == () and read.loglikelihood == 0.0 and "log-likelihood 0" in (read.note or "")


def test_a_token_holding_no_text_is_not_counted_in_the_context() -> None:
    # A BOS the server prepends: lm-eval's tokenizer (no special tokens) does not count it, so its slice
    # [ctxlen:-1] of the echoed list starts one token early, at the context's last token.
    echo = EchoedTokens(
        text=CONTEXT + " B\n",
        tokens=("<s>", "Q?\nA. x\nB. y\n", "Answer:", " B", "\n"),
        logprobs=(None, -1.0, -2.0, -0.5, -9.0),
        offsets=(0, 0, 14, len(CONTEXT), len(CONTEXT) + 2),
    )
    read = read_continuation(echo, CONTEXT, " B")
    assert read.tokens == ("Answer:", " B") and read.loglikelihood == -2.5


def test_a_counted_context_overrides_the_echo_and_the_prompt_sent_is_kept() -> None:
    echo = EchoedTokens(
        text=CONTEXT + "\n",
        tokens=(CONTEXT[:-1], ":", "\n"),
        logprobs=(None, -1.0, -0.5),
        offsets=(0, len(CONTEXT) - 1, len(CONTEXT)),
    )
    read = read_continuation(echo, CONTEXT, " B", Planned(CONTEXT, context_tokens=2))
    assert read.missing is None and read.tokens == () and read.loglikelihood == 0.0
    assert read.prompt == CONTEXT and read.context_tokens == 2 and "not context + continuation" in (read.note or "")
    assert "prompt" not in read.model_copy(update={"prompt": None}).model_dump()  # unset: left out of the record


class _Vocabulary:
    """An async tokenizer over a ScriptedTokenizer (what the endpoint's /tokenize and /detokenize answer)."""

    def __init__(self, tokenizer: ScriptedTokenizer, fail: bool = False) -> None:
        self.tokenizer, self.fail, self.asked = tokenizer, fail, []

    async def encode(self, text: str) -> list[int]:
        if self.fail:
            raise TokenizerError("POST /tokenize: HTTP 500 (3 tries)")
        self.asked.append(text)
        return self.tokenizer.encode(text)

    async def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)


def test_planning_with_the_endpoints_tokenizer_is_lm_evals_encode_pair() -> None:
    merging = _Vocabulary(ScriptedTokenizer(pattern=SPLIT_PUNCTUATION, merges=(": A", ": B")))
    # ": B" is one token: the continuation has no token of its own, the context alone is sent.
    assert asyncio.run(plan(CONTEXT, " B", merging)) == Planned(CONTEXT, len(merging.tokenizer.pieces(CONTEXT)))
    assert merging.asked == [CONTEXT + " B", CONTEXT]  # the whole, then the context (lm-eval's order)
    plain = _Vocabulary(ScriptedTokenizer())
    assert asyncio.run(plan(CONTEXT, " B", plain)) == Planned(CONTEXT + " B", len(plain.tokenizer.pieces(CONTEXT)))
    # Trailing spaces of the context move to the continuation before anything is cut.
    assert asyncio.run(plan(CONTEXT + " ", "B", plain)).prompt == CONTEXT + " B"
    assert asyncio.run(plan(CONTEXT, " B", None)) == Planned(CONTEXT + " B")


def test_planning_left_truncates_to_lm_evals_max_length() -> None:
    words = ScriptedTokenizer()
    context = "w" + " w" * (MAX_LENGTH + 9)  # MAX_LENGTH + 10 tokens
    planned = asyncio.run(plan(context, " B", _Vocabulary(words)))
    # (context + continuation)[-2047:], ctxlen = len(context) - (len(context) + 1 - 2047), by hand:
    assert len(words.pieces(planned.prompt)) == MAX_LENGTH and planned.prompt.endswith(" w B")
    assert planned.context_tokens == MAX_LENGTH + 10 - (MAX_LENGTH + 10 + 1 - MAX_LENGTH)


def _ask_backend(server: ScriptedServer, request: Request) -> object:
    backend = OpenAICompatBackend(
        ModelSpec(label="m", kind="endpoint", base_url=server.url, model_id="m"), concurrency=4
    )

    async def ask() -> object:
        try:
            return await backend.generate(request)
        finally:
            await backend.aclose()

    return asyncio.run(ask())


def test_an_endpoint_serving_a_merging_tokenizer_is_sent_the_context_alone() -> None:
    request = Request(
        mode="completion",
        prompt=CONTEXT,
        params={"max_tokens": 1, "top_logprobs": 1, "echo": True},
        continuations=(" A", " B"),
    )
    tokenizer = ScriptedTokenizer(pattern=SPLIT_PUNCTUATION, merges=(": A", ": B"))
    with ScriptedServer(lambda call: Reply(content="\n", continuation_logprob=-2.0), tokenizer=tokenizer) as server:
        answer = _ask_backend(server, request)
        paths = [c.path for c in server.calls]
        bodies = [c.body for c in server.calls if c.path == "/v1/completions"]
    assert paths[:2] == ["/tokenizer_info", "/tokenize"]  # lm-eval's check, then its cuts
    assert [b["prompt"] for b in bodies] == [CONTEXT, CONTEXT] and paths.count("/detokenize") == 2
    read = answer.continuations  # type: ignore[attr-defined]
    assert [c.loglikelihood for c in read] == [0.0, 0.0] and all(c.prompt == CONTEXT for c in read)


def test_a_failing_tokenizer_asks_nothing_and_names_it() -> None:
    request = Request(
        mode="completion", prompt=CONTEXT, params={"echo": True, "top_logprobs": 1}, continuations=(" A",)
    )

    async def generate(sub: Request) -> object:
        raise AssertionError("nothing may be sent")

    from pytest_benchaudit.inference.loglikelihood import ask_loglikelihood

    failing = _Vocabulary(ScriptedTokenizer(), fail=True)
    answer = asyncio.run(ask_loglikelihood(request, generate, failing))  # type: ignore[arg-type]
    assert answer.error is not None and "tokenizer failed: POST /tokenize: HTTP 500" in answer.error
