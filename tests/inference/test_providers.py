"""The provider registry: names as users write them, keys and URLs from the environment, quirks as data."""

from __future__ import annotations

import pytest

from pytest_benchaudit.inference.backend import ModelSpecError, parse_model_spec
from pytest_benchaudit.inference.providers import ProviderError, adjust_params, adjust_request, load_providers
from pytest_benchaudit.pipeline.types import Message, Request

PROVIDER_VARS = sorted(
    {v for p in load_providers().values() for v in (*p.api_key_env, p.base_url_env, p.api_version_env) if v}
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider variable of the machine leaks into a test (nor a test's request out of 127.0.0.1)."""
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


def spec(text: str, **env: str):
    mp = pytest.MonkeyPatch()
    try:
        for k, v in env.items():
            mp.setenv(k, v)
        return parse_model_spec(text)
    finally:
        mp.undo()


def test_every_shipped_provider_parses_and_names_its_variables() -> None:
    providers = load_providers()
    assert {
        "openai",
        "azure",
        "anthropic",
        "gemini",
        "openrouter",
        "together",
        "groq",
        "deepseek",
        "mistral",
        "ollama",
        "vllm",
    } <= set(providers)
    for p in providers.values():
        assert p.api_key_env, p.name
        assert p.base_url or p.base_url_env, p.name


@pytest.mark.parametrize(
    "text, env, provider, model, base, key_env",
    [
        ("openai/gpt-4o", {"OPENAI_API_KEY": "k"}, "openai", "gpt-4o", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        (
            "openrouter/meta-llama/llama-3.1-8b-instruct",
            {"OPENROUTER_API_KEY": "k"},
            "openrouter",
            "meta-llama/llama-3.1-8b-instruct",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
        ),
        (
            "together/Qwen/Qwen3-235B",
            {"TOGETHER_API_KEY": "k"},
            "together",
            "Qwen/Qwen3-235B",
            "https://api.together.xyz/v1",
            "TOGETHER_API_KEY",
        ),
        (
            "groq/llama-3.3-70b",
            {"GROQ_API_KEY": "k"},
            "groq",
            "llama-3.3-70b",
            "https://api.groq.com/openai/v1",
            "GROQ_API_KEY",
        ),
        (
            "deepseek/deepseek-chat",
            {"DEEPSEEK_API_KEY": "k"},
            "deepseek",
            "deepseek-chat",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_API_KEY",
        ),
        (
            "mistral/mistral-large-latest",
            {"MISTRAL_API_KEY": "k"},
            "mistral",
            "mistral-large-latest",
            "https://api.mistral.ai/v1",
            "MISTRAL_API_KEY",
        ),
        (
            "gemini/gemini-2.5-pro",
            {"GOOGLE_API_KEY": "k"},
            "gemini",
            "gemini-2.5-pro",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "GOOGLE_API_KEY",
        ),
        (
            "anthropic/claude-sonnet-4-5",
            {"ANTHROPIC_API_KEY": "k"},
            "anthropic",
            "claude-sonnet-4-5",
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
        ),
        ("ollama/qwen3:8b", {}, "ollama", "qwen3:8b", "http://127.0.0.1:11434/v1", "OLLAMA_API_KEY"),
        (
            "ollama/qwen3",
            {"OLLAMA_HOST": "127.0.0.1:9999"},
            "ollama",
            "qwen3",
            "http://127.0.0.1:9999/v1",
            "OLLAMA_API_KEY",
        ),
        (
            "vllm/Qwen/Qwen3-0.6B@http://127.0.0.1:8000/v1",
            {},
            "vllm",
            "Qwen/Qwen3-0.6B",
            "http://127.0.0.1:8000/v1",
            "VLLM_API_KEY",
        ),
        (
            "azure/my-gpt4o",
            {"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com/"},
            "azure",
            "my-gpt4o",
            "https://r.openai.azure.com/openai/deployments/my-gpt4o",
            "AZURE_OPENAI_API_KEY",
        ),
    ],
)
def test_provider_forms(text, env, provider, model, base, key_env) -> None:
    m = spec(text, **env)
    assert (m.provider, m.model_id, m.base_url, m.api_key_env) == (provider, model, base, key_env)
    assert m.label == text and m.kind == "endpoint" and m.resolved_note is None


def test_base_url_from_the_conventional_variable() -> None:
    m = spec("openai/gpt-4o", OPENAI_API_KEY="k", OPENAI_BASE_URL="http://127.0.0.1:5/v1/")
    assert m.base_url == "http://127.0.0.1:5/v1"
    a = spec("anthropic/claude-opus-4-1", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL="http://127.0.0.1:6")
    assert a.base_url == "http://127.0.0.1:6" and a.api == "anthropic" and a.auth == "x-api-key"
    assert dict(a.headers) == {"anthropic-version": "2023-06-01"}


def test_azure_auth_and_api_version() -> None:
    env = {"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"}
    m = spec("azure/dep", **env)
    assert m.auth == "api-key" and dict(m.query) == {"api-version": "2024-10-21"}
    assert dict(spec("azure/dep", **env, OPENAI_API_VERSION="2025-04-01-preview").query) == {
        "api-version": "2025-04-01-preview"
    }


@pytest.mark.parametrize(
    "bare, provider",
    [
        ("gpt-5.4", "openai"),
        ("gpt-4o-mini", "openai"),
        ("o3", "openai"),
        ("o3-mini", "openai"),
        ("o4-mini", "openai"),
        ("o1", "openai"),
        ("claude-sonnet-4-5", "anthropic"),
        ("gemini-2.5-flash", "gemini"),
    ],
)
def test_bare_well_known_names(bare, provider) -> None:
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k"}
    m = spec(bare, **env)
    assert m.provider == provider and m.model_id == bare and m.label == bare
    assert (
        m.resolved_note == f"--model {bare} → {provider}/{bare} ({load_providers()[provider].title}, a well-known name)"
    )


def test_named_models_win_over_bare_names() -> None:
    m = parse_model_spec("gpt-5-4", {"gpt-5-4": {"endpoint": "http://127.0.0.1:1/v1", "model": "gpt-5.4"}})
    assert m.provider is None and m.base_url == "http://127.0.0.1:1/v1"


def test_slash_ids_at_a_url_stay_plain_endpoints() -> None:
    # vLLM serving openai/gpt-oss-20b: an HF id with a provider's name in it, not the OpenAI API.
    m = parse_model_spec("openai/gpt-oss-20b@http://127.0.0.1:8000/v1")
    assert m.provider is None and m.model_id == "openai/gpt-oss-20b" and m.base_url == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    "text, variable",
    [
        ("gpt-5.4", "$OPENAI_API_KEY"),
        ("openai/o3", "$OPENAI_API_KEY"),
        ("anthropic/claude-x", "$ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.5-pro", "$GEMINI_API_KEY (or $GOOGLE_API_KEY)"),
        ("openrouter/a/b", "$OPENROUTER_API_KEY"),
        ("azure/dep", "$AZURE_OPENAI_ENDPOINT"),
    ],
)
def test_missing_key_or_url_is_one_usage_error_naming_the_variable(text, variable) -> None:
    with pytest.raises(ModelSpecError) as info:
        parse_model_spec(text)
    message = str(info.value)
    assert message.startswith(f"--model {text}: {variable} is not set") and "\n" not in message


def test_vllm_needs_a_url_and_no_key() -> None:
    with pytest.raises(ModelSpecError, match=r"\$VLLM_BASE_URL is not set.*vllm/MODEL@URL"):
        parse_model_spec("vllm/Qwen/Qwen3-0.6B")
    with pytest.raises(ModelSpecError, match="expected vllm/MODEL@http"):
        parse_model_spec("vllm/m@ftp://x")


def test_unknown_spec_lists_the_providers() -> None:
    with pytest.raises(ModelSpecError) as info:
        parse_model_spec("mystery")
    assert "PROVIDER/MODEL (openai/, azure/, anthropic/" in str(info.value)


def test_pyproject_providers_extend_and_override() -> None:
    extra = {
        "myco": {
            "title": "MyCo gateway",
            "base_url": "http://127.0.0.1:7/v1",
            "api_key_env": "MYCO_KEY",
            "bare": ["myco-*"],
            "quirks": [{"min": {"max_tokens": 32}, "why": "gateway minimum"}],
        },
        "openai": {"quirks": [{"models": ["gpt-4o*"], "drop": ["seed"], "why": "our proxy strips seeds"}]},
    }
    providers = load_providers(extra)
    assert list(providers)[:2] == ["myco", "openai"]
    mp = pytest.MonkeyPatch()
    mp.setenv("MYCO_KEY", "k")
    mp.setenv("OPENAI_API_KEY", "k")
    try:
        m = parse_model_spec("myco-7b", providers=providers)
        assert m.provider == "myco" and m.base_url == "http://127.0.0.1:7/v1"
        assert adjust_params({"max_tokens": 5}, m.quirks)[1] == ["inference.max_tokens 5 → 32: gateway minimum [myco]"]
        o = parse_model_spec("openai/gpt-4o", providers=providers)
        assert [q.why for q in o.quirks] == ["our proxy strips seeds"]
        assert [q.why for q in parse_model_spec("openai/o3", providers=providers).quirks] == [
            "unsupported by OpenAI reasoning models"
        ]
    finally:
        mp.undo()
    with pytest.raises(ProviderError, match=r"\[tool.benchaudit.providers.bad\]: auth"):
        load_providers({"bad": {"auth": "cookie"}})


def _request(**params) -> Request:
    return Request(mode="chat", messages=(Message(role="user", content="q"),), params=params)


def test_quirks_azure_minimum_and_reasoning() -> None:
    env = {"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:1"}
    plain = spec("azure/gpt-4o", **env)
    out = adjust_request(_request(max_tokens=5, temperature=0.0), plain)
    assert out.params == {"max_tokens": 16, "temperature": 0.0}
    assert out.adjustments == ("inference.max_tokens 5 → 16: provider minimum [azure]",)
    reasoning = spec("azure/gpt-5.4", **env)
    out = adjust_request(_request(max_tokens=5, temperature=0.0, stop=["\n"]), reasoning)
    assert out.params == {"max_completion_tokens": 16}
    assert out.adjustments == (
        "inference.max_tokens 5 → 16: provider minimum [azure]",
        "inference.decoding.temperature 0.0 → not sent: unsupported by OpenAI reasoning models [azure]",
        'inference.stop ["\\n"] → not sent: unsupported by OpenAI reasoning models [azure]',
        "inference.max_tokens sent as max_completion_tokens: unsupported by OpenAI reasoning models [azure]",
    )


def test_quirks_openai_anthropic_gemini_mistral() -> None:
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k", "MISTRAL_API_KEY": "k"}
    assert adjust_request(_request(max_tokens=5, temperature=0.0), spec("gpt-4o", **env)).adjustments == ()
    assert adjust_request(_request(top_p=0.9), spec("o3-mini", **env)).params == {}
    assert adjust_request(_request(), spec("gpt-5-chat-latest", **env)).adjustments == ()
    claude = adjust_request(_request(seed=1), spec("claude-sonnet-4-5", **env))
    assert claude.params == {"max_tokens": 4096}
    assert claude.adjustments[0] == "inference.max_tokens unspecified → 4096: required by the Messages API [anthropic]"
    gem = adjust_request(_request(max_tokens=64), spec("gemini-2.5-pro", **env))
    assert gem.params == {"max_tokens": 64, "reasoning_effort": "low"}
    assert gem.adjustments == (
        ('reasoning_effort not sent → "low": fixed reasoning effort for Gemini thinking models [gemini]'),
    )
    assert adjust_request(_request(), spec("gemini-2.0-flash", **env)).adjustments == ()
    assert adjust_request(_request(seed=3), spec("mistral/mistral-small", **env)).params == {"random_seed": 3}


def test_strict_provider_sends_the_layer_as_written() -> None:
    m = spec("azure/gpt-5.4", AZURE_OPENAI_API_KEY="k", AZURE_OPENAI_ENDPOINT="http://127.0.0.1:1")
    strict = m.model_copy(update={"strict_provider": True})
    request = _request(max_tokens=5, temperature=0.0)
    assert adjust_request(request, strict) is request
    assert strict.provider_card({"max_tokens": 5})["adjustments"] == []
    assert (
        m.provider_card({"max_tokens": 5})["adjustments"][0] == "inference.max_tokens 5 → 16: provider minimum [azure]"
    )


def test_spec_is_hashable_and_public_has_no_key() -> None:
    m = spec("gpt-5.4", OPENAI_API_KEY="sk-CANARY-zz")
    assert hash(m) == hash(m.model_copy())
    assert "sk-CANARY-zz" not in repr(m.public()) and "sk-CANARY-zz" not in repr(m)


def test_anthropic_payload_translation_and_completion_refusal() -> None:
    from pytest_benchaudit.inference.openai_compat import _anthropic_payload, _parse_anthropic

    request = Request(
        mode="chat",
        messages=(Message(role="system", content="Be brief."), Message(role="user", content="q")),
        params={"max_tokens": 8, "stop": ["\n"], "temperature": 0.0},
    )
    path, body = _anthropic_payload("claude-x", request)
    assert path == "v1/messages"
    assert body == {
        "model": "claude-x",
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "q"}],
        "stop_sequences": ["\n"],
        "max_tokens": 8,
        "temperature": 0.0,
    }
    with pytest.raises(ValueError, match="not a completion prompt"):
        _anthropic_payload("claude-x", Request(mode="completion", prompt="p"))
    gen = _parse_anthropic(
        {
            "model": "claude-x",
            "stop_reason": "max_tokens",
            "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Answer: B"}],
            "usage": {"input_tokens": 7, "output_tokens": 3},
        }
    )
    assert (gen["text"], gen["reasoning"], gen["finish_reason"]) == ("Answer: B", "hmm", "length")
    assert gen["usage"]["prompt_tokens"] == 7 and gen["usage"]["completion_tokens"] == 3


def test_named_models_cannot_half_set_a_provider() -> None:
    with pytest.raises(ModelSpecError, match=r"auth, provider cannot be set here; use --model PROVIDER/MODEL"):
        parse_model_spec(
            "corp", {"corp": {"endpoint": "http://127.0.0.1:1/v1", "provider": "azure", "auth": "api-key"}}
        )
