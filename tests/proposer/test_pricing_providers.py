"""The price table applied to the usage each provider family reports, for the reflection model.

Each provider's endpoint is faked at the HTTP layer and answers with usage in that provider's
own shape: prompt, completion and cached prompt tokens, each priced at its rate. A model no
table knows, and a model served on this machine, cost *unknown*, not 0, unless the user
prices them (``RunConfig.prices``).
"""

from __future__ import annotations

from typing import Any

import pytest
import respx

from proposer import ModelClient, ProposerConfig
from schemas import ModelPrice
from tests.proposer.fakes import Script, completion

MESSAGES = [{"role": "user", "content": "hi"}]


def _reply(usage: dict[str, Any]) -> dict[str, Any]:
    body = completion("ok")
    body["usage"] = usage
    return body


async def _cost(url: str, config: ProposerConfig, usage: dict[str, Any]) -> tuple[float, bool]:
    with respx.mock(assert_all_called=True) as router:
        router.post(url).mock(side_effect=Script(_reply(usage)))
        client = ModelClient(config)
        reply = await client.chat(MESSAGES)
        await client.aclose()
    return reply.usage.cost_usd, client.cost_known


async def test_openai_prices_prompt_completion_and_cached_tokens(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    usage = {
        "prompt_tokens": 2_000_000,
        "completion_tokens": 500_000,
        "prompt_tokens_details": {"cached_tokens": 1_000_000},
    }
    cost, known = await _cost(
        "https://api.openai.com/v1/chat/completions",
        ProposerConfig(model="gpt-4o-mini", max_retries=0),
        usage,
    )
    # gpt-4o-mini: $0.15 a million prompt tokens, $0.075 cached, $0.60 completion
    assert known and cost == pytest.approx(1 * 0.15 + 1 * 0.075 + 0.5 * 0.60)


async def test_anthropic_prices_both_of_its_usage_shapes(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    config = ProposerConfig(model="anthropic/claude-sonnet-4-20250514", max_retries=0)
    url = "https://api.anthropic.com/v1/chat/completions"
    # its OpenAI-compatible endpoint: prompt_tokens include the cached ones
    compat = {
        "prompt_tokens": 1_000_000,
        "completion_tokens": 100_000,
        "prompt_tokens_details": {"cached_tokens": 400_000},
    }
    cost, known = await _cost(url, config, compat)
    # claude-sonnet-4: $3 prompt, $0.30 cache reads, $15 completion
    assert known and cost == pytest.approx(0.6 * 3 + 0.4 * 0.30 + 0.1 * 15)
    # its own usage (as a proxy may pass it on): input_tokens leave the cache reads out
    native = {
        "input_tokens": 600_000,
        "cache_read_input_tokens": 400_000,
        "output_tokens": 100_000,
    }
    assert (await _cost(url, config, native))[0] == pytest.approx(cost)


async def test_google_prices_gemini_usage(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    usage = {
        "prompt_tokens": 4_000_000,
        "completion_tokens": 1_000_000,
        "prompt_tokens_details": {"cached_tokens": 2_000_000},
    }
    cost, known = await _cost(
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        ProposerConfig(model="gemini/gemini-2.5-flash", max_retries=0),
        usage,
    )
    # gemini-2.5-flash: $0.30 prompt, $0.075 cached, $2.50 completion
    assert known and cost == pytest.approx(2 * 0.30 + 2 * 0.075 + 1 * 2.50)


async def test_openrouter_prices_the_model_behind_its_prefixes(monkeypatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    usage = {
        "prompt_tokens": 1_000_000,
        "completion_tokens": 1_000_000,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    url = "https://openrouter.ai/api/v1/chat/completions"
    for model, price in (
        ("openrouter/openai/gpt-4.1-mini", 0.40 + 1.60),
        ("openrouter/google/gemini-2.5-pro", 1.25 + 10.00),
        ("openrouter/anthropic/claude-opus-4", 15.00 + 75.00),
    ):
        cost, known = await _cost(url, ProposerConfig(model=model, max_retries=0), usage)
        assert known and cost == pytest.approx(price), model


async def test_an_unknown_model_costs_unknown_not_zero(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cost, known = await _cost(
        "https://api.openai.com/v1/chat/completions",
        ProposerConfig(model="gpt-9-preview", max_retries=0),
        {"prompt_tokens": 1000, "completion_tokens": 100},
    )
    assert not known and cost == 0.0  # a lower bound the report calls unknown


async def test_a_local_url_is_unknown_until_the_user_prices_it(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = "http://127.0.0.1:8013/v1/chat/completions"
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
    local = ProposerConfig(model="gpt-4o-mini", base_url="http://127.0.0.1:8013/v1")
    cost, known = await _cost(url, local, usage)
    assert not known and cost == 0.0  # no list price for a model on this machine
    priced = ProposerConfig(
        model="gpt-4o-mini",
        base_url="http://127.0.0.1:8013/v1",
        prices={"gpt-4o-mini": ModelPrice(input=0.0, output=0.0)},
    )
    cost, known = await _cost(url, priced, usage)
    assert known and cost == 0.0  # the user said it is free: a known 0
    dear = ProposerConfig(
        model="gpt-4o-mini", prices={"gpt-4o-mini": ModelPrice(input=1, output=2)}
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cost, known = await _cost("https://api.openai.com/v1/chat/completions", dear, usage)
    assert known and cost == pytest.approx(3.0)  # the user's price over the table's
