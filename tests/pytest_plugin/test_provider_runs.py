"""Real pytest runs against loopback provider fakes: request shape, quirks applied (or not), errors, secrets.

Base URLs come from each provider's environment variables, pointed at 127.0.0.1; every other
provider variable is cleared, so no test can reach a real provider.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import SUITES
from pytest_benchaudit.inference.providers import load_providers
from pytest_benchaudit.testing.data import real_data_dir
from pytest_benchaudit.testing.provider_fakes import FakeReply, ProviderFake
from pytest_benchaudit.testing.runs import only_run_dir, read_run

CANARY = "sk-CANARY-7f3a9e1c44b2"
PROVIDER_VARS = sorted(
    {v for p in load_providers().values() for v in (*p.api_key_env, p.base_url_env, p.api_version_env) if v}
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


def start(monkeypatch: pytest.MonkeyPatch, kind: str, **kwargs) -> ProviderFake:
    fake = ProviderFake(kind, key=CANARY, **kwargs).start()  # type: ignore[arg-type]
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    return fake


def run(pytester: pytest.Pytester, model: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        model,
        "--report-dir",
        "out",
        "--max-retries",
        "1",
        "-k",
        "mcq",
        "--limit",
        "3",
        "-p",
        "no:randomly",
        "--junitxml",
        "out/junit.xml",
        *extra,
    )


def assert_no_canary(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    texts = [result.stdout.str(), result.stderr.str()]
    texts += [p.read_text(errors="replace") for p in (pytester.path / "out").rglob("*") if p.is_file()]
    assert not any(CANARY in t for t in texts)


def test_openai_chat_model_sent_as_the_layer_says(pytester, toy, monkeypatch) -> None:
    fake = start(monkeypatch, "openai")
    try:
        result = run(pytester, "openai/gpt-4o")
    finally:
        fake.stop()
    result.assert_outcomes(passed=1, failed=2)  # the fake answers A: right for t03 only
    call = fake.calls[0]
    assert call.path == "/v1/chat/completions" and call.headers["authorization"] == "Bearer <key>"
    assert call.body["model"] == "gpt-4o" and call.body["max_tokens"] == 64 and call.body["temperature"] == 0.0
    out = read_run(only_run_dir(pytester.path / "out"))
    assert all(r["valid"] and r["request"]["adjustments"] == [] for r in out["records"])
    assert out["run"]["pipeline_cards"]["toy.mcq"]["providers"]["openai/gpt-4o"]["adjustments"] == []
    assert_no_canary(pytester, result)


def test_bare_reasoning_name_gets_its_quirks_recorded(pytester, toy, monkeypatch) -> None:
    fake = start(monkeypatch, "openai")
    try:
        result = run(pytester, "o3-mini")
    finally:
        fake.stop()
    result.stdout.fnmatch_lines(["benchaudit: --model o3-mini → openai/o3-mini (OpenAI, a well-known name)"])
    body = fake.calls[0].body
    assert body["max_completion_tokens"] == 64 and not {"max_tokens", "temperature"} & set(body)
    out = read_run(only_run_dir(pytester.path / "out"))
    rec = out["records"][0]
    assert rec["valid"] and rec["request"]["params"] == {"max_completion_tokens": 64}
    card = out["run"]["pipeline_cards"]["toy.mcq"]["providers"]["o3-mini"]
    assert card["resolved"].startswith("--model o3-mini → openai/o3-mini")
    assert (
        card["adjustments"]
        == rec["request"]["adjustments"]
        == [
            "inference.decoding.temperature 0.0 → not sent: unsupported by OpenAI reasoning models [openai]",
            "inference.max_tokens sent as max_completion_tokens: unsupported by OpenAI reasoning models [openai]",
        ]
    )
    assert_no_canary(pytester, result)


def test_strict_provider_makes_the_refusal_the_record(pytester, toy, monkeypatch) -> None:
    fake = start(monkeypatch, "openai")
    try:
        result = run(pytester, "openai/o3", "--strict-provider")
    finally:
        fake.stop()
    assert {c.status for c in fake.calls} == {400} and len(fake.calls) == 3  # a 400 is not retried
    out = read_run(only_run_dir(pytester.path / "out"))
    rec = out["records"][0]
    assert rec["invalid_reason"] == "inference_error"
    assert "Unsupported parameter: 'max_tokens' is not supported with this model" in rec["error"]
    assert rec["request"]["params"]["max_tokens"] == 64 and rec["request"]["adjustments"] == []
    assert out["run"]["models"][0]["strict_provider"] is True
    assert_no_canary(pytester, result)


def test_azure_minimum_raised_and_recorded(pytester, toy, monkeypatch) -> None:
    fake = start(monkeypatch, "azure", deployment="gpt4o-prod")
    try:
        result = run(pytester, "azure/gpt4o-prod", "--set", "inference.max_tokens=5")
        strict = run(
            pytester,
            "azure/gpt4o-prod",
            "--set",
            "inference.max_tokens=5",
            "--strict-provider",
            "--report-dir",
            "strict",
        )
    finally:
        fake.stop()
    call = fake.calls[0]
    assert call.path == "/openai/deployments/gpt4o-prod/chat/completions"
    assert call.query == {"api-version": "2024-10-21"}
    assert call.headers["api-key"] == "<key>" and "authorization" not in call.headers
    assert call.body["max_tokens"] == 16
    out = read_run(only_run_dir(pytester.path / "out"))
    assert all(r["valid"] for r in out["records"])
    assert out["records"][0]["request"]["adjustments"] == ["inference.max_tokens 5 → 16: provider minimum [azure]"]
    assert out["run"]["pipeline_cards"]["toy.mcq"]["providers"]["azure/gpt4o-prod"]["adjustments"] == [
        "inference.max_tokens 5 → 16: provider minimum [azure]"
    ]
    # As the released code saw it: the provider's 400 is the record, every item invalid.
    refused = read_run(only_run_dir(pytester.path / "strict"))
    assert all(r["invalid_reason"] == "inference_error" for r in refused["records"])
    assert "integer below minimum value. Expected a value >= 16, but got 5" in refused["records"][0]["error"]
    assert refused["summary"]["results"][0]["invalid_rate"] == 1.0
    assert_no_canary(pytester, result)
    assert_no_canary(pytester, strict)


def test_anthropic_native_headers_body_and_overloaded_retry(pytester, toy, monkeypatch) -> None:
    seen: set[str] = set()

    def overloaded_once(call) -> FakeReply | None:
        text = call.body["messages"][-1]["content"]
        if text not in seen:
            seen.add(text)
            return FakeReply(
                status=529, error={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            )
        return FakeReply(content="Answer: B", reasoning="weighing the options")

    fake = start(monkeypatch, "anthropic", script=overloaded_once)
    try:
        result = run(pytester, "claude-sonnet-4-5")
    finally:
        fake.stop()
    ok = [c for c in fake.calls if c.status == 200]
    assert len(ok) == 3 and sum(c.status == 529 for c in fake.calls) == 3
    call = ok[0]
    assert call.path == "/v1/messages" and call.headers["x-api-key"] == "<key>"
    assert call.headers["anthropic-version"] == "2023-06-01" and "authorization" not in call.headers
    assert call.body["max_tokens"] == 64 and call.body["temperature"] == 0.0
    assert call.body["messages"][0]["role"] == "user" and "stop_sequences" not in call.body
    rec = read_run(only_run_dir(pytester.path / "out"))["records"][0]
    assert rec["attempts"] == 2 and rec["raw_output"] == "Answer: B" and rec["reasoning"] == "weighing the options"
    assert rec["usage"]["prompt_tokens"] == rec["usage"]["input_tokens"] and rec["finish_reason"] == "stop"
    assert_no_canary(pytester, result)


def test_anthropic_strict_without_max_tokens_is_refused(pytester, toy, monkeypatch) -> None:
    fake = start(monkeypatch, "anthropic")
    try:
        run(pytester, "anthropic/claude-haiku-4-5", "--set", "inference.max_tokens=unspecified", "--strict-provider")
        run(
            pytester,
            "anthropic/claude-haiku-4-5",
            "--set",
            "inference.max_tokens=unspecified",
            "--report-dir",
            "adjusted",
        )
    finally:
        fake.stop()
    strict = read_run(only_run_dir(pytester.path / "out"))["records"][0]
    assert strict["invalid_reason"] == "inference_error" and "max_tokens: Field required" in strict["error"]
    adjusted = read_run(only_run_dir(pytester.path / "adjusted"))["records"][0]
    assert adjusted["valid"] and adjusted["request"]["params"]["max_tokens"] == 4096


def test_gemini_path_auth_and_reasoning_effort(pytester, toy, monkeypatch) -> None:
    fake = start(monkeypatch, "gemini")
    try:
        result = run(pytester, "gemini-2.5-flash")
    finally:
        fake.stop()
    call = fake.calls[0]
    assert call.path == "/v1beta/openai/chat/completions" and call.headers["authorization"] == "Bearer <key>"
    assert call.body["reasoning_effort"] == "low" and call.body["model"] == "gemini-2.5-flash"
    assert_no_canary(pytester, result)


def test_429_with_rate_limit_headers_is_waited_out(pytester, toy, monkeypatch) -> None:
    limited: set[str] = set()

    def rate_limited_once(call) -> FakeReply | None:
        text = call.body["messages"][-1]["content"]
        if text not in limited:
            limited.add(text)
            return FakeReply(
                status=429,
                headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "50ms"},
                error={"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            )
        return None

    fake = start(monkeypatch, "openai", script=rate_limited_once)
    try:
        run(pytester, "gpt-4o", "--max-retries", "0")  # a hinted 429 does not use up retries
    finally:
        fake.stop()
    records = read_run(only_run_dir(pytester.path / "out"))["records"]
    assert len(records) == 3 and all(r["valid"] and r["attempts"] == 2 for r in records)


def test_missing_key_is_one_usage_error(pytester, toy) -> None:
    result = run(pytester, "gpt-5.4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --model gpt-5.4: $OPENAI_API_KEY is not set; OpenAI needs an API key in it"])
    assert "Traceback" not in result.stderr.str()


def test_the_cards_usage_line_works_as_written(pytester, monkeypatch) -> None:
    """`pytest suites/secEval --model gpt-5.4 --pipeline standardized`, given OPENAI_API_KEY (and a fake)."""
    data = real_data_dir()
    if not (data / "seceval").is_dir():
        pytest.skip("real SecEval data not available in BENCHAUDIT_DATA")
    (pytester.path / "suites").symlink_to(SUITES, target_is_directory=True)
    fake = start(monkeypatch, "openai", answer=lambda call: "Answer: A")
    try:
        result = pytester.runpytest("suites/secEval", "--model", "gpt-5.4", "--pipeline", "standardized")
    finally:
        fake.stop()
    result.stdout.fnmatch_lines(
        [
            "benchaudit: suites/secEval → suites/seceval (case-insensitive match)",
            "benchaudit: --model gpt-5.4 → openai/gpt-5.4 (OpenAI, a well-known name)",
        ]
    )
    out = read_run(only_run_dir(pytester.path / "reports"))
    assert len(out["records"]) == len(fake.calls) > 2000
    assert all(r["valid"] for r in out["records"])
    assert not {"max_tokens", "temperature"} & set(fake.calls[0].body)
    usage = out["summary"]["usage"]["rows"][0]
    assert usage["model"] == "gpt-5.4" and usage["prompt_tokens"] > 0 and usage["cost_usd"] is None
    assert_no_canary_in(pytester.path / "reports", result)


def assert_no_canary_in(folder: Path, result: pytest.RunResult) -> None:
    assert CANARY not in result.stdout.str() + result.stderr.str()
    assert not any(CANARY in p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "model, env_key, env_url, url_suffix, sent_model",
    [
        (
            "openrouter/meta-llama/llama-3.1-8b-instruct",
            "OPENROUTER_API_KEY",
            "OPENROUTER_BASE_URL",
            "/v1",
            "meta-llama/llama-3.1-8b-instruct",
        ),
        ("together/Qwen/Qwen3-8B", "TOGETHER_API_KEY", "TOGETHER_BASE_URL", "/v1", "Qwen/Qwen3-8B"),
        ("groq/llama-3.3-70b-versatile", "GROQ_API_KEY", "GROQ_BASE_URL", "/v1", "llama-3.3-70b-versatile"),
        ("deepseek/deepseek-reasoner", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "/v1", "deepseek-reasoner"),
        ("mistral/mistral-small-latest", "MISTRAL_API_KEY", "MISTRAL_BASE_URL", "/v1", "mistral-small-latest"),
        ("ollama/qwen3:0.6b", None, "OLLAMA_HOST", "", "qwen3:0.6b"),
    ],
)
def test_openai_compatible_providers_request_shape(
    monkeypatch, model, env_key, env_url, url_suffix, sent_model
) -> None:
    """Each OpenAI-compatible provider: base URL from its variable, bearer key (none for Ollama), model id
    as the provider names it, quirks applied to the body."""
    import asyncio

    from pytest_benchaudit.inference.backend import parse_model_spec
    from pytest_benchaudit.inference.openai_compat import OpenAICompatBackend
    from pytest_benchaudit.inference.providers import adjust_request
    from pytest_benchaudit.pipeline.types import Message, Request

    with ProviderFake("openai", key=CANARY if env_key else "") as fake:
        if env_key:
            monkeypatch.setenv(env_key, CANARY)
        monkeypatch.setenv(env_url, (fake.root + url_suffix) if url_suffix else fake.root.removeprefix("http://"))
        spec = parse_model_spec(model)
        request = adjust_request(
            Request(
                mode="chat",
                messages=(Message(role="user", content="q"),),
                params={"temperature": 0.0, "seed": 7, "max_tokens": 8},
            ),
            spec,
        )

        async def ask():
            backend = OpenAICompatBackend(spec, concurrency=2)
            try:
                return await backend.generate(request)
            finally:
                await backend.aclose()

        gen = asyncio.run(ask())
    assert gen.error is None and gen.text == "Answer: A"
    (call,) = fake.calls
    assert call.path == "/v1/chat/completions" and call.body["model"] == sent_model
    assert call.headers.get("authorization") == ("Bearer <key>" if env_key else None)
    expected = {"temperature": 0.0, "seed": 7, "max_tokens": 8}
    if model.startswith("mistral/"):
        expected = {"temperature": 0.0, "random_seed": 7, "max_tokens": 8}
    if model.startswith("deepseek/"):
        expected = {"seed": 7, "max_tokens": 8}
    assert {k: v for k, v in call.body.items() if k not in ("model", "messages")} == expected
    assert CANARY not in repr(gen)


# --------------------------------------------------------------------------- context warnings


def _toy_run(pytester: pytest.Pytester, url: str, *extra: str, model: str = "llama3") -> pytest.RunResult:
    return pytester.runpytest(
        "suites/toy",
        "--data-dir",
        "data",
        "--model",
        f"{model}@{url}",
        "--report-dir",
        "out",
        "-k",
        "mcq",
        "--limit",
        "3",
        "-p",
        "no:randomly",
        *extra,
    )


def test_an_endpoint_serving_another_model_is_said_once(pytester, toy) -> None:
    """`/models` lists gpt-4o, the answers say gpt-4o-2024-08-06, the run names llama3: one warning,
    in the terminal and in run.json's warnings list."""
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    with ScriptedServer(lambda call: Reply(content="Answer: B", model="gpt-4o-2024-08-06"), model_id="gpt-4o") as srv:
        result = _toy_run(pytester, srv.url)
    text = result.stdout.str()
    assert text.count("benchaudit: warning: model llama3: the run asked for 'llama3'") == 1
    assert "'gpt-4o-2024-08-06' (3 of 3 answers) and GET /models lists 'gpt-4o'" in text
    run = read_run(only_run_dir(pytester.path / "out"))["run"]
    kinds = [w["kind"] for w in run["warnings"]]
    assert kinds.count("served_model_mismatch") == 1


def test_a_dated_snapshot_of_the_model_named_is_a_note(pytester, toy) -> None:
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    with ScriptedServer(lambda call: Reply(content="Answer: B", model="gpt-4o-2024-08-06"), model_id="gpt-4o") as srv:
        _toy_run(pytester, srv.url, "--no-cache", model="gpt-4o")
    run = read_run(only_run_dir(pytester.path / "out"))["run"]
    assert [w["kind"] for w in run["warnings"]] == ["served_model_snapshot"]
    assert "answered by the dated snapshot 'gpt-4o-2024-08-06' (3 of 3 answers)" in run["warnings"][0]["message"]


def test_the_model_named_and_served_says_nothing(pytester, toy) -> None:
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    with ScriptedServer(lambda call: Reply(content="Answer: B"), model_id="llama3") as srv:
        result = _toy_run(pytester, srv.url)
    assert "benchaudit: warning" not in result.stdout.str()
    assert read_run(only_run_dir(pytester.path / "out"))["run"].get("warnings", []) == []


def test_a_cache_that_cannot_hit_says_why(pytester, toy) -> None:
    """`/models` says llama3, the answers name an HF id: nothing the cache stores can answer a later
    run (0 hits), and both runs say why."""
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    name = "meta-llama/Meta-Llama-3-8B-Instruct"
    with ScriptedServer(lambda call: Reply(content="Answer: B", model=name), model_id="llama3") as srv:
        first = _toy_run(pytester, srv.url)
        second = _toy_run(pytester, srv.url, "--report-dir", "out2")
    second.stdout.fnmatch_lines(["generation cache: 0 hits, 3 misses"])
    for result, counts in (
        (first, "(3 stored unusable, 0 lookups missed for it)"),
        (second, "(3 stored unusable, 3 lookups missed for it)"),
    ):
        result.stdout.fnmatch_lines(
            [
                f"benchaudit: warning: generation cache, model llama3: the answers name '{name}', "
                "which GET /models does not list ('llama3')*" + counts.replace("(", "?")
            ]
        )
    (run_dir,) = (pytester.path / "out2").iterdir()
    assert "cache_unusable" in [w["kind"] for w in read_run(run_dir)["run"]["warnings"]]


def test_mmlu_released_without_logprobs_warns_and_counts_the_fallback(
    pytester, real_data: Path, request: pytest.FixtureRequest
) -> None:
    """MMLU's released layer on an endpoint that returns no log-probabilities: every question reads
    'A' (evaluate.py's bare except), and the run says so, with the count, instead of a silent 0% invalid."""
    from pytest_benchaudit.scoring.extract import MMLU_FALLBACK
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    data = request.config.invocation_params.dir / real_data  # (a relative $BENCHAUDIT_DATA: pytester moved the cwd)
    if not (data / "mmlu-computer-security" / "computer_security_test.csv").is_file():
        pytest.skip("real MMLU computer_security data missing under $BENCHAUDIT_DATA")
    with ScriptedServer(lambda call: Reply(content=" B", top_logprobs=None), model_id="m") as srv:
        result = pytester.runpytest(
            str(SUITES / "mmlu_cs"),
            "--data-dir",
            str(data),
            "--model",
            f"m@{srv.url}",
            "--pipeline",
            "released",
            "--limit",
            "12",
            "--report-dir",
            "out",
            "--no-cache",
        )
    out = read_run(only_run_dir(pytester.path / "out"))
    hand = sum(1 for r in out["records"] if r["extraction_detail"].startswith(MMLU_FALLBACK))
    assert hand == len(out["records"]) == 12 and all(r["valid"] for r in out["records"])
    warnings = {w["kind"]: w["message"] for w in out["run"]["warnings"]}
    assert warnings["logprobs_missing"].startswith("model m: 12 of 12 answers came back without the log-probabilities")
    assert warnings["released_fallback"].startswith(
        f"mmlu_cs.mcq (released), model m: {hand} of 12 items were scored by the {MMLU_FALLBACK}"
    )
    text = result.stdout.str()
    assert text.count("benchaudit: warning: mmlu_cs.mcq (released), model m: 12 of 12 items") == 1


def test_context_warnings_under_xdist_are_said_once(pytester, toy) -> None:
    """Two workers answer; the controller reads every record once: one warning, with the whole run's counts."""
    from pytest_benchaudit.testing.scripted_server import Reply, ScriptedServer

    with ScriptedServer(lambda call: Reply(content="Answer: B", model="gpt-4o-2024-08-06"), model_id="gpt-4o") as srv:
        result = pytester.runpytest(
            "suites/toy",
            "--data-dir",
            "data",
            "--model",
            f"llama3@{srv.url}",
            "--report-dir",
            "out",
            "-k",
            "mcq",
            "--limit",
            "6",
            "-p",
            "no:randomly",
            "-n",
            "2",
        )
    text = result.stdout.str()
    assert text.count("benchaudit: warning: model llama3: the run asked for 'llama3'") == 1, text
    assert "'gpt-4o-2024-08-06' (6 of 6 answers) and GET /models lists 'gpt-4o'" in text
    run = read_run(only_run_dir(pytester.path / "out"))["run"]
    assert [w["kind"] for w in run["warnings"]].count("served_model_mismatch") == 1
