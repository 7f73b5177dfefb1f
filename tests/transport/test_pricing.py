"""The price table: names by provider family, snapshots, the user's prices, unknown models."""

from __future__ import annotations

import pytest

from schemas import ModelPrice
from transport.pricing import Price, PriceTable, cost_usd, price_for


def test_names_are_found_through_prefixes_and_snapshots() -> None:
    assert price_for("gpt-4o-2024-08-06") == price_for("gpt-4o")
    assert price_for("openai/gpt-4.1-mini") == price_for("gpt-4.1-mini")
    assert price_for("anthropic/claude-sonnet-4-20250514") == price_for("claude-sonnet-4")
    assert price_for("claude-3-5-haiku-latest") == price_for("claude-3-5-haiku")
    assert price_for("openrouter/google/gemini-2.5-flash") == price_for("gemini-2.5-flash")
    assert price_for("gemini/gemini-2.5-pro") is not None
    assert price_for("gpt-4o-mini") != price_for("gpt-4o")


def test_an_unknown_model_has_no_price_and_an_unknown_cost() -> None:
    assert price_for("qwen2.5-coder-1.5b") is None
    assert price_for("gpt-4o-audio-preview") is None  # no guessing from a prefix
    assert PriceTable().cost("student", 1000, 10) is None
    assert PriceTable().cost(None, 1000, 10) is None


def test_cached_tokens_are_part_of_the_prompt_and_billed_at_their_rate() -> None:
    price = Price(2.0, 8.0, 0.5)
    assert cost_usd(price, 1_000_000, 0, 400_000) == pytest.approx(0.6 * 2 + 0.4 * 0.5)
    # without a cached rate they cost the prompt rate; more cached than prompt is the prompt
    assert cost_usd(Price(2.0, 8.0), 1_000_000, 0, 400_000) == pytest.approx(2.0)
    assert cost_usd(price, 1_000_000, 0, 5_000_000) == pytest.approx(0.5)
    assert cost_usd(None, 10, 10) is None


def test_the_users_prices_come_first_and_price_local_models() -> None:
    table = PriceTable({"gpt-4o-mini": ModelPrice(input=1.0, output=2.0), "student": Price(0, 0)})
    assert table.cost("openai/gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(3.0)
    assert table.price("student", local=True) == Price(0, 0)  # the user said: free
    assert table.price("gpt-4o", local=True) is None  # a local model has no list price
    assert table.price("gpt-4o") == price_for("gpt-4o")
    assert table.user_price("gpt-4o") is None
