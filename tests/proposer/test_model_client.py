"""The model client: routing, keys, retries, usage and cost."""

from __future__ import annotations

import httpx
import pytest
import respx

from proposer import ModelClient, ProposerConfig, price_for, resolve_endpoint
from proposer.client import ToolsUnsupported, reflection_api_key
from proposer.tools import TOOL_SPECS
from schemas import ProposerError, UserError
from tests.proposer.fakes import Script, completion, config, scripted

MESSAGES = [{"role": "user", "content": "hi"}]


async def test_openrouter_prefix_routes_to_openrouter_with_its_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = Script(completion("ok", prompt_tokens=1000, completion_tokens=100))
    with respx.mock(assert_all_called=True) as router:
        router.post("https://openrouter.ai/api/v1/chat/completions").mock(side_effect=script)
        client = ModelClient(
            ProposerConfig(model="openrouter/anthropic/claude-sonnet-4", max_retries=0)
        )
        reply = await client.chat(MESSAGES)
        await client.aclose()
    request = script.raw[0]
    assert request.url.host == "openrouter.ai"
    assert request.headers["authorization"] == "Bearer sk-or-test"
    assert script.requests[0]["model"] == "anthropic/claude-sonnet-4"
    # claude-sonnet-4 at $3 / $15 per million tokens.
    assert client.cost_known
    assert reply.usage.cost_usd == pytest.approx(1000 * 3e-6 + 100 * 15e-6)


def test_missing_key_for_a_remote_endpoint_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("MY_REFLECTION_KEY", raising=False)
    with pytest.raises(UserError, match="MY_REFLECTION_KEY"):
        ModelClient(ProposerConfig(model="gpt-4.1", api_key_env="MY_REFLECTION_KEY"))
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        ModelClient(ProposerConfig(model="openrouter/openai/gpt-4o"))


async def test_local_endpoint_runs_with_a_dummy_key(api, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = scripted(api, completion("hello", prompt_tokens=12, completion_tokens=3))
    client = ModelClient(config(seed=3))
    reply = await client.chat(MESSAGES)
    await client.aclose()
    assert script.requests[0]["seed"] == 3  # sampling seed passed through for reproducibility
    assert reply.content == "hello" and reply.finish_reason == "stop"
    assert reply.usage.input_tokens == 12 and reply.usage.output_tokens == 3
    assert reply.usage.cost_usd == 0.0 and not client.cost_known  # local: price unknown
    assert script.raw[0].headers["authorization"].startswith("Bearer ")


async def test_priced_openai_model_costs_what_the_table_says(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    script = Script(completion("ok", prompt_tokens=2_000_000, completion_tokens=1_000_000))
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(side_effect=script)
        client = ModelClient(ProposerConfig(model="gpt-4o-mini", max_retries=0))
        reply = await client.chat(MESSAGES)
    assert reply.usage.cost_usd == pytest.approx(2 * 0.15 + 1 * 0.60)
    assert script.raw[0].headers["authorization"] == "Bearer sk-test"


def test_price_table_lookup() -> None:
    assert price_for("gpt-4o-2024-08-06") == price_for("gpt-4o")
    assert price_for("openai/gpt-4.1-mini") is not None
    assert price_for("gpt-4o-mini") != price_for("gpt-4o")
    assert price_for("qwen2.5-coder-1.5b") is None
    assert price_for("gpt-4o-audio-preview") is None  # no guessing from a prefix


def test_routing_rules() -> None:
    assert resolve_endpoint(ProposerConfig(model="gpt-4o")).local is False
    local = resolve_endpoint(ProposerConfig(model="student", base_url="http://localhost:8012/v1"))
    assert local.local and local.model == "student"
    custom_key = resolve_endpoint(ProposerConfig(model="openrouter/x/y", api_key_env="ROUTER_KEY"))
    assert custom_key.api_key_env == "ROUTER_KEY" and custom_key.model == "x/y"


async def test_retries_on_429_and_5xx_then_succeeds(api) -> None:
    script = scripted(
        api,
        httpx.Response(
            429, json={"error": {"message": "slow down"}}, headers={"retry-after-ms": "1"}
        ),
        httpx.Response(503, json={"error": {"message": "busy"}}, headers={"retry-after-ms": "1"}),
        completion("finally"),
    )
    client = ModelClient(config(max_retries=2))
    reply = await client.chat(MESSAGES)
    assert reply.content == "finally" and len(script.requests) == 3


async def test_gives_up_after_max_retries(api) -> None:
    busy = httpx.Response(500, json={"error": {"message": "boom"}}, headers={"retry-after-ms": "1"})
    script = scripted(api, busy, busy, busy)
    client = ModelClient(config(max_retries=1))
    with pytest.raises(ProposerError, match="HTTP 500"):
        await client.chat(MESSAGES)
    assert len(script.requests) == 2


async def test_timeout_is_a_proposer_error(api) -> None:
    api.post("/chat/completions").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(ProposerError, match="timed out"):
        await ModelClient(config(max_retries=0, timeout_s=0.5)).chat(MESSAGES)


async def test_rejected_key_is_a_user_error(api) -> None:
    scripted(api, httpx.Response(401, json={"error": {"message": "bad key"}}))
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        await ModelClient(config()).chat(MESSAGES)


async def test_a_4xx_about_tools_is_tools_unsupported(api) -> None:
    error = {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice'}}
    scripted(api, httpx.Response(400, json=error), httpx.Response(400, json=error))
    client = ModelClient(config())
    with pytest.raises(ToolsUnsupported):
        await client.chat(MESSAGES, tools=TOOL_SPECS)
    with pytest.raises(ProposerError) as info:  # without tools it is an ordinary failure
        await client.chat(MESSAGES)
    assert not isinstance(info.value, ToolsUnsupported)


async def test_reasoning_models_get_max_completion_tokens_and_no_temperature(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    script = Script(completion("ok"), completion("ok"))
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(side_effect=script)
        await ModelClient(ProposerConfig(model="gpt-5-mini", max_tokens=1000)).chat(MESSAGES)
        await ModelClient(ProposerConfig(model="gpt-4.1", max_tokens=1000)).chat(MESSAGES)
    reasoning, classic = script.requests
    assert "max_tokens" not in reasoning and "temperature" not in reasoning
    assert reasoning["max_completion_tokens"] >= 1000
    assert classic["max_tokens"] == 1000 and classic["temperature"] == 0.7


@pytest.mark.parametrize("usage", [None, {}, {"prompt_tokens": None, "completion_tokens": 7}])
async def test_missing_usage_is_estimated(api, usage) -> None:
    body = completion("x" * 400)
    del body["usage"]
    if usage is not None:  # a server that sends the object without (all of) its counts
        body["usage"] = usage
    scripted(api, body)
    reply = await ModelClient(config()).chat([{"role": "user", "content": "y" * 800}])
    expected_out = 7 if usage and usage.get("completion_tokens") else 100
    assert reply.usage.input_tokens == 200 and reply.usage.output_tokens == expected_out


def test_config_from_run_config() -> None:
    from schemas import RunConfig

    cfg = RunConfig(
        reflection_model="openrouter/openai/gpt-4.1",
        reflection_api_key_env="OR_KEY",
        proposer_mode="text",
        max_prompt_chars=3000,
        seed=11,
        reflection_endpoint="local",
    )
    pc = ProposerConfig.from_run_config(cfg)
    assert (pc.seed, pc.endpoint) == (11, "local")
    assert (pc.model, pc.api_key_env, pc.mode, pc.max_prompt_chars) == (
        "openrouter/openai/gpt-4.1",
        "OR_KEY",
        "text",
        3000,
    )
    with pytest.raises(UserError, match="--reflection-model"):
        ProposerConfig.from_run_config(RunConfig())
    with pytest.raises(UserError, match="mode"):
        ProposerConfig(model="m", mode="fancy")
    with pytest.raises(UserError, match="'remote' is not one of auto, local, hosted"):
        ProposerConfig(model="m", endpoint="remote")


@pytest.mark.parametrize("status", [401, 400, 500])
async def test_a_key_echoed_by_the_endpoint_is_masked_and_not_chained(
    monkeypatch, status: int
) -> None:
    key = "plain words 42 no prefix"
    monkeypatch.setenv("ECHO_KEY", key)
    body = {"error": {"message": f"Incorrect API key provided: {key}.", "type": "bad"}}
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(status, json=body)
        )
        client = ModelClient(ProposerConfig(model="gpt-4.1", api_key_env="ECHO_KEY", max_retries=0))
        with pytest.raises((UserError, ProposerError)) as info:
            await client.chat(MESSAGES)
        await client.aclose()
    assert "Incorrect API key provided: ***." in str(info.value)
    assert key not in str(info.value)
    # The openai exception still holds the key: it is not kept as the cause to print.
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_reflection_api_key_follows_the_routing() -> None:
    env = {"OPENAI_API_KEY": "openai-key-1", "OPENROUTER_API_KEY": "router-key-2", "MINE": "k3"}
    assert reflection_api_key("gpt-4.1", None, "OPENAI_API_KEY", env) == "openai-key-1"
    assert reflection_api_key("openrouter/x/y", None, "OPENAI_API_KEY", env) == "router-key-2"
    assert reflection_api_key("gpt-4.1", None, "MINE", env) == "k3"
    assert reflection_api_key(None, None, "UNSET", env) is None
