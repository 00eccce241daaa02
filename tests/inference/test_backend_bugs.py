"""The client catches what the wire raises, nothing more (inference/openai_compat.py): a server that
returns garbage is still the request's error (inference_error, after retries), and a bug in benchaudit's
own code is a BackendBug naming the exception and its line -- never recorded as the model's answer.
End to end: a broken reader stops a real pytest run with one message (exit 3, no traceback), the records
of the items answered before it kept and none of them an inference_error made of the bug."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.inference import openai_compat
from pytest_benchaudit.inference.backend import BackendBug, ModelSpec
from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
from pytest_benchaudit.inference.response_body import MalformedResponse, parse_anthropic
from pytest_benchaudit.pipeline.types import Generation, Message, Request
from pytest_benchaudit.testing.runs import only_run_dir
from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer
from pytest_benchaudit.testing.toy import write_mcq_suite

CANARY = "sk-canary-bug-0123456789"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(model_id="served") as srv:
        yield srv


def _generate(server: ScriptedServer, request: Request | None = None, **spec: Any) -> Generation:
    async def go() -> Generation:
        backend = OpenAICompatBackend(
            ModelSpec(
                **{
                    "label": "m",
                    "kind": "endpoint",
                    "base_url": server.url,
                    "model_id": "x",
                    "retry_base": 0.01,
                    "max_retries": 1,
                    "timeout": 5.0,
                    **spec,
                }
            ),
            concurrency=2,
        )
        try:
            asked = request or Request(mode="chat", messages=(Message(role="user", content="Q"),))
            return await backend.generate(asked)
        finally:
            await backend.aclose()

    return asyncio.run(go())


GARBAGE = {
    "not json": b"{not json",
    "a list": b"[1, 2]",
    "choices an object": b'{"choices": {"message": {"content": "A"}}}',
    "choice a number": b'{"choices": [42]}',
    "message a list": b'{"choices": [{"message": ["A"]}]}',
    "content a number": b'{"choices": [{"message": {"content": 42}}]}',
    "neither message nor text": b'{"choices": [{"index": 0}]}',
    "usage a list": b'{"choices": [{"message": {"content": "A"}}], "usage": [1, 2]}',
    "finish_reason a number": b'{"choices": [{"message": {"content": "A"}, "finish_reason": 7}]}',
    "logprobs a string": b'{"choices": [{"message": {"content": "A"}, "logprobs": "high"}]}',
    "a logprob not a number": (
        b'{"choices": [{"message": {"content": "A"}, "logprobs": {"content": '
        b'[{"top_logprobs": [{"token": "A", "logprob": "high"}]}]}}]}'
    ),
    "an alternative without token": (
        b'{"choices": [{"message": {"content": "A"}, "logprobs": {"content": '
        b'[{"top_logprobs": [{"logprob": -1.0}]}]}}]}'
    ),
}


@pytest.mark.parametrize("body", list(GARBAGE.values()), ids=list(GARBAGE))
def test_a_server_returning_garbage_is_the_requests_error(server: ScriptedServer, body: bytes) -> None:
    server.script = lambda call: Reply(raw_body=body)
    gen = _generate(server)
    assert gen.error is not None and gen.error.startswith("malformed response ("), gen.error
    assert "(gave up after 2 attempts)" in gen.error and gen.attempts == 2 and gen.text == ""


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"content": "A"},
        {"content": [5]},
        {"content": [{"type": "text", "text": 5}]},
        {"content": [{"type": "thinking", "thinking": ["x"]}]},
        {"content": [], "usage": [1]},
    ],
)
def test_anthropic_garbage_is_a_malformed_response(body: Any) -> None:
    """Anthropic's reader (the scripted server speaks OpenAI's API only): every shape it does not take is
    the one error the client turns into the request's error; a good body is read."""
    with pytest.raises(MalformedResponse):
        parse_anthropic(body)
    assert parse_anthropic({"content": [{"type": "text", "text": "A"}], "stop_reason": "end_turn"})["text"] == "A"


def test_a_bug_in_the_reader_is_a_backend_bug_naming_it(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script = lambda call: Reply(content="Answer: A")

    def broken(data: Any, echo: bool = False) -> dict[str, Any]:
        return {"text": data["choices"][0]["message"]["content"] / 0}  # a TypeError: a bug, not the answer

    monkeypatch.setattr(openai_compat, "_parse", broken)
    with pytest.raises(BackendBug) as raised:
        _generate(server)
    message = str(raised.value)
    assert message.startswith("the client of model 'm' failed: TypeError: unsupported operand")
    assert f"at {Path(__file__).name}:" in message and "in broken()" in message
    assert "not the model's answer" in message
    assert len(server.calls) == 1  # not retried: asking again cannot mend our own code


def test_a_backend_bug_is_never_a_generation_error_and_its_text_is_redacted(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_benchaudit.common import secrets

    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    secrets.register_secret(CANARY)
    server.script = lambda call: Reply(content="Answer: A")

    def broken(data: Any, echo: bool = False) -> dict[str, Any]:
        raise KeyError(f"no field for {CANARY}")

    monkeypatch.setattr(openai_compat, "_parse", broken)
    with pytest.raises(BackendBug) as raised:
        _generate(server)
    assert CANARY not in str(raised.value) and "***" in str(raised.value)
    assert "KeyError" in str(raised.value)


@pytest.mark.parametrize("process", ["0", "1"], ids=["thread", "inference process"])
def test_a_broken_reader_stops_the_run_cleanly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, process: str
) -> None:
    """Questions q01..q06, asked one at a time: the reader breaks at the fourth answer.  The run ends
    with exit 3 and one message naming the bug; the three items answered before are recorded (valid),
    and no record is an inference_error made of it."""
    write_mcq_suite(
        pytester.path,
        "bugged",
        [
            {"id": f"q{n:02d}", "question": f"Question {n}?", "options": ["one", "two", "three", "four"], "gold": "A"}
            for n in range(1, 7)
        ],
    )
    monkeypatch.setenv("BENCHAUDIT_INFERENCE_PROCESS", process)
    # Installed in this process and in the inference process (its interpreter starts with this environment).
    site = pytester.path / "child-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "from pytest_benchaudit.inference import openai_compat\n"
        "real, seen = openai_compat._parse, []\n"
        "def broken(data, echo=False):\n"
        "    seen.append(1)\n"
        "    if len(seen) >= 4:\n"
        "        raise ZeroDivisionError('the reader divided by zero')\n"
        "    return real(data, echo)\n"
        "openai_compat._parse = broken\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    with ScriptedServer(lambda call: Reply(content="Answer: A")) as server:
        result = pytester.runpytest_subprocess(
            "suites/bugged",
            "--model",
            f"m@{server.url}",
            "--data-dir",
            "data",
            "--report-dir",
            "out",
            "--no-cache",
            "--concurrency",
            "1",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            timeout=120,
        )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, out[-3000:]
    assert "the client of model 'm' failed: ZeroDivisionError: the reader divided by zero" in out, out[-3000:]
    assert "in broken()" in out and "the run stops" in out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    lines = (only_run_dir(pytester.path / "out") / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert records and all(r["valid"] and r["invalid_reason"] is None for r in records), records
    assert len(records) <= 3
    assert [r["question_id"] for r in records] == [f"q{n:02d}" for n in range(1, len(records) + 1)]
