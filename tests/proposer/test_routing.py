"""Provider prefixes as LiteLLM users write them, for the reflection model and the service's policy."""

from __future__ import annotations

import pytest
import respx

from optimizer.service.policy import PolicyRefusal, RunPolicy
from proposer import ModelClient, ProposerConfig, resolve_endpoint
from schemas import RunConfig, UserError
from tests.proposer.fakes import Script, completion

MESSAGES = [{"role": "user", "content": "hi"}]


async def test_openai_prefix_goes_to_openai_without_the_prefix(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
    script = Script(completion("ok", prompt_tokens=1_000_000, completion_tokens=0))
    with respx.mock(assert_all_called=True) as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(side_effect=script)
        client = ModelClient(ProposerConfig(model="openai/gpt-4.1-mini", max_retries=0))
        reply = await client.chat(MESSAGES)
        await client.aclose()
    assert script.requests[0]["model"] == "gpt-4.1-mini"
    assert script.raw[0].headers["authorization"] == "Bearer sk-openai-test"
    assert client.cost_known and reply.usage.cost_usd == pytest.approx(0.40)  # priced as itself


async def test_openai_prefix_with_a_local_base_url_needs_no_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = Script(completion("ok"))
    with respx.mock(assert_all_called=True) as router:
        router.post("http://127.0.0.1:8013/v1/chat/completions").mock(side_effect=script)
        config = ProposerConfig(model="openai/reflection", base_url="http://127.0.0.1:8013/v1")
        client = ModelClient(config)
        await client.chat(MESSAGES)
        await client.aclose()
    assert script.requests[0]["model"] == "reflection"
    assert resolve_endpoint(config).local


def test_ollama_prefix_defaults_to_the_local_ollama_endpoint() -> None:
    endpoint = resolve_endpoint(ProposerConfig(model="ollama/qwen2.5-coder:1.5b"))
    assert endpoint.base_url == "http://localhost:11434/v1" and endpoint.local
    assert endpoint.model == "qwen2.5-coder:1.5b"


def test_a_provider_without_a_row_is_refused_with_the_fix() -> None:
    with pytest.raises(UserError, match=r"use openrouter/cohere/command-r"):
        resolve_endpoint(ProposerConfig(model="cohere/command-r"))
    # behind an OpenAI-compatible proxy the name is the proxy's business
    proxied = ProposerConfig(model="cohere/command-r", base_url="https://proxy.example/v1")
    assert resolve_endpoint(proxied).model == "cohere/command-r"


def test_the_service_allow_lists_the_variable_the_route_reads() -> None:
    policy = RunPolicy(key_envs=frozenset({"OPENAI_API_KEY"}))
    policy.check(RunConfig(reflection_model="openai/gpt-4.1-mini", containers=["http://c"]))
    with pytest.raises(PolicyRefusal, match=r"\$OPENROUTER_API_KEY"):
        policy.check(
            RunConfig(reflection_model="openrouter/openai/gpt-4.1-mini", containers=["http://c"])
        )
    RunPolicy().check(
        RunConfig(reflection_model="openrouter/openai/gpt-4.1-mini", containers=["http://c"])
    )
