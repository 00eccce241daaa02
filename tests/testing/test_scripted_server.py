"""Contract tests for the scripted OpenAI-compatible test server.

They pin what the end-to-end, fault-injection and benchmark tests rely on:
response shapes (chat, legacy completions, both log-probability formats), the
fault knobs (status + headers, raw bodies, dropped connections, the Azure-style
``max_tokens`` refusal), attempt counting, real concurrency, and the command-line
mode's READY line and clean SIGTERM exit.  The whole file runs in a few seconds.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pytest_benchaudit.testing.scripted_server import Call, Reply, ScriptedServer, by_marker, sequence

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60.0) as c:  # a bound against a hang only (a loaded machine is slow)
        yield c


def chat_body(text: str = "What is 2+2?", **extra: object) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def test_models_endpoint(client: httpx.Client) -> None:
    with ScriptedServer(model_id="my-model") as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
        r = client.get(f"{server.url}/models")
    assert r.status_code == 200
    data = r.json()
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == ["my-model"]
    assert data["data"][0]["object"] == "model"


def test_chat_reply_with_reasoning(client: httpx.Client) -> None:
    def script(call: Call) -> Reply:
        return Reply(content="Answer: B", reasoning_content="thinking...", finish_reason="length")

    with ScriptedServer(script, model_id="served") as server:
        r = client.post(f"{server.url}/chat/completions", json=chat_body(), headers={"X-Trace": "t1"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    data = r.json()
    assert data["object"] == "chat.completion"
    assert data["model"] == "served"
    assert isinstance(data["id"], str) and isinstance(data["created"], int)
    choice = data["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Answer: B", "reasoning_content": "thinking..."}
    assert choice["finish_reason"] == "length"
    assert choice["logprobs"] is None  # not requested
    assert set(data["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    (call,) = server.calls
    assert call.path == "/v1/chat/completions"
    assert call.last_user_text == "What is 2+2?"
    assert call.headers["x-trace"] == "t1"
    assert call.attempt == 1


def test_default_reply_and_no_reasoning_field(client: httpx.Client) -> None:
    with ScriptedServer() as server:
        data = client.post(f"{server.url}/chat/completions", json=chat_body()).json()
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "Answer: A"}
    assert data["choices"][0]["finish_reason"] == "stop"


def test_completions_with_legacy_logprobs(client: httpx.Client) -> None:
    top = {" B": -0.5, " A": -0.1, " C": -2.0, " D": -3.0}
    with ScriptedServer(lambda call: Reply(content=" A", top_logprobs=top, usage={"prompt_tokens": 7})) as server:
        body = {"model": "m", "prompt": "Question? Answer:", "max_tokens": 1, "logprobs": 3}
        data = client.post(f"{server.url}/completions", json=body).json()
        plain = client.post(f"{server.url}/completions", json={"model": "m", "prompt": "x"}).json()
    assert data["object"] == "text_completion"
    choice = data["choices"][0]
    assert choice["text"] == " A"
    assert choice["finish_reason"] == "stop"
    lp = choice["logprobs"]
    assert lp["tokens"] == [" A"]
    assert lp["token_logprobs"] == [-0.1]
    assert lp["top_logprobs"] == [{" A": -0.1, " B": -0.5, " C": -2.0}]  # 3 best, best first
    assert data["usage"] == {"prompt_tokens": 7}
    assert plain["choices"][0]["logprobs"] is None  # logprobs not requested
    assert server.calls[0].last_user_text == "Question? Answer:"


def test_chat_logprobs_format(client: httpx.Client) -> None:
    top = {"A": -0.05, "B": -3.2}
    with ScriptedServer(lambda call: Reply(content="A", top_logprobs=top)) as server:
        data = client.post(
            f"{server.url}/chat/completions", json=chat_body(logprobs=True, top_logprobs=5, max_tokens=1)
        ).json()
        plain = client.post(f"{server.url}/chat/completions", json=chat_body("other")).json()
    (entry,) = data["choices"][0]["logprobs"]["content"]
    assert entry["token"] == "A" and entry["logprob"] == -0.05
    assert [(t["token"], t["logprob"]) for t in entry["top_logprobs"]] == [("A", -0.05), ("B", -3.2)]
    assert plain["choices"][0]["logprobs"] is None


def test_error_status_with_retry_after(client: httpx.Client) -> None:
    reply = Reply(status=429, error_message="slow down", headers={"Retry-After": "1"})
    with ScriptedServer(lambda call: reply) as server:
        r = client.post(f"{server.url}/chat/completions", json=chat_body())
    assert r.status_code == 429
    assert r.headers["retry-after"] == "1"
    error = r.json()["error"]
    assert error["message"] == "slow down"
    assert error["type"] == "rate_limit_error"
    assert "code" in error


def test_raw_malformed_body(client: httpx.Client) -> None:
    with ScriptedServer(lambda call: Reply(raw_body=b'{"choices": [', content_type="text/plain")) as server:
        r = client.post(f"{server.url}/chat/completions", json=chat_body())
    assert r.status_code == 200
    assert r.content == b'{"choices": ['
    assert r.headers["content-type"] == "text/plain"
    with pytest.raises(json.JSONDecodeError):
        r.json()


def test_drop_connection_then_server_still_serves(client: httpx.Client) -> None:
    script = by_marker({"DROP": Reply(drop_connection=True)}, default=Reply(content="fine"))
    with ScriptedServer(script) as server:
        with pytest.raises(httpx.TransportError):
            client.post(f"{server.url}/chat/completions", json=chat_body("please DROP me"))
        r = client.post(f"{server.url}/chat/completions", json=chat_body("normal"))
    assert r.json()["choices"][0]["message"]["content"] == "fine"


def test_min_max_tokens_refusal(client: httpx.Client) -> None:
    with ScriptedServer(min_max_tokens=16) as server:
        r = client.post(f"{server.url}/chat/completions", json=chat_body(max_tokens=1))
        ok = client.post(f"{server.url}/chat/completions", json=chat_body(max_tokens=16))
        r2 = client.post(f"{server.url}/completions", json={"prompt": "p", "max_completion_tokens": 4})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "message": "max_tokens is too small. Minimum value is 16.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "integer_below_min_value",
        }
    }
    assert ok.status_code == 200
    assert r2.status_code == 400 and r2.json()["error"]["param"] == "max_completion_tokens"
    assert len(server.calls) == 3  # refusals are recorded too


def test_invalid_json_request_and_unknown_path(client: httpx.Client) -> None:
    with ScriptedServer() as server:
        bad = client.post(
            f"{server.url}/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        missing = client.post(f"{server.url}/embeddings", json={"input": "x"})
    assert bad.status_code == 400 and "error" in bad.json()
    assert missing.status_code == 404 and "error" in missing.json()


def test_attempt_counting_with_sequence(client: httpx.Client) -> None:
    with ScriptedServer(sequence(Reply(status=503), Reply(content="second"))) as server:
        url = f"{server.url}/chat/completions"
        first = client.post(url, json=chat_body("q1", temperature=0))
        # Same body with a different key order is the same request: attempt 2.
        second = client.post(
            url, json={"temperature": 0, "messages": [{"content": "q1", "role": "user"}], "model": "m"}
        )
        third = client.post(url, json=chat_body("q1", temperature=0))
        other = client.post(url, json=chat_body("q2", temperature=0))
    assert first.status_code == 503 and first.json()["error"]["type"] == "server_error"
    assert second.status_code == 200 and second.json()["choices"][0]["message"]["content"] == "second"
    assert third.status_code == 200  # last reply repeats
    assert other.status_code == 503  # a different body starts at attempt 1
    assert [c.attempt for c in server.calls] == [1, 2, 3, 1]


def test_by_marker_first_match_wins() -> None:
    a, b, d = Reply(content="a"), Reply(content="b"), Reply(content="d")
    script = by_marker({"X1": a, "X": b}, default=d)

    def make(text: str) -> Call:
        return Call(path="/v1/completions", body={"prompt": text}, headers={}, attempt=1)

    assert script(make("has X1")) is a
    assert script(make("has X")) is b
    assert script(make("none")) is d


def test_script_exception_answers_500(client: httpx.Client) -> None:
    def broken(call: Call) -> Reply:
        raise RuntimeError("boom")

    with ScriptedServer(broken) as server:
        r = client.post(f"{server.url}/chat/completions", json=chat_body())
    assert r.status_code == 500 and "boom" in r.json()["error"]["message"]
    assert len(server.script_errors) == 1


def test_concurrency_32_requests_at_50ms() -> None:
    # Each request is answered only once all 32 are being handled at once (a barrier, not a
    # wall-clock bound): a server that handled them one at a time would answer none of them.
    together = threading.Barrier(32)

    def script(call: Call) -> Reply:
        together.wait(timeout=120)  # a broken barrier (a hang guard, not a timing) answers 500
        return Reply(content="Answer: A")

    with ScriptedServer(script, latency=0.05) as server:
        url = f"{server.url}/chat/completions"
        limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
        with (
            httpx.Client(timeout=300.0, limits=limits) as c,
            concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool,
        ):
            results = list(pool.map(lambda i: c.post(url, json=chat_body(f"q{i}")).status_code, range(32)))
    assert results == [200] * 32
    assert len(server.calls) == 32


def test_stop_closes_keepalive_connections(client: httpx.Client) -> None:
    server = ScriptedServer().start()
    url = f"{server.url}/models"
    assert client.get(url).status_code == 200  # leaves a keep-alive connection open
    server.stop()
    with pytest.raises(httpx.TransportError):
        client.get(url)


def test_cli_ready_answers_and_exits_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest_benchaudit.testing.scripted_server",
            "--port",
            "0",
            "--latency",
            "0.01",
            "--answer",
            "Answer: C",
            "--model-id",
            "cli-model",
            "--min-max-tokens",
            "8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:") and line.endswith("/v1"), line
        url = line.split(" ", 1)[1]
        with httpx.Client(timeout=60.0) as c:  # a bound against a hang only
            models = c.get(f"{url}/models").json()
            reply = c.post(f"{url}/chat/completions", json=chat_body(max_tokens=8)).json()
            refused = c.post(f"{url}/chat/completions", json=chat_body(max_tokens=2))
        assert models["data"][0]["id"] == "cli-model"
        assert reply["choices"][0]["message"]["content"] == "Answer: C"
        assert refused.status_code == 400
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)  # a bound against a hang only: SIGTERM ends it
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "Warning" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
