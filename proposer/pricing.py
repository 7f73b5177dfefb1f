"""What a reflection call costs: a small price table in USD per million tokens.

Names are matched after dropping a provider prefix (``openai/gpt-4o`` on OpenRouter is
``gpt-4o``) and allowing a dated snapshot suffix (``gpt-4o-2024-08-06``). A model the table
does not know, or any model behind a local URL, costs 0 with ``cost_known=False``: the
report then says the proposer's spend is unknown rather than free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PRICES", "Price", "cost_usd", "price_for"]


@dataclass(frozen=True)
class Price:
    """List price of a model in USD per million input and output tokens."""

    input_per_m: float
    output_per_m: float


# Public list prices (USD / 1M tokens) as of mid-2025; update when providers change them.
PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5-nano": Price(0.05, 0.40),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-opus-4": Price(15.00, 75.00),
    "gemini-2.5-pro": Price(1.25, 10.00),
    "gemini-2.5-flash": Price(0.30, 2.50),
}

_SNAPSHOT = re.compile(r"-\d{4}-?\d{2}-?\d{2}$")


def price_for(model: str) -> Price | None:
    """The table price of ``model`` (provider prefix and date suffix ignored), or ``None``."""
    name = model.rsplit("/", 1)[-1].lower()
    if name in PRICES:
        return PRICES[name]
    return PRICES.get(_SNAPSHOT.sub("", name))


def cost_usd(price: Price | None, input_tokens: int, output_tokens: int) -> float:
    """Dollars for one call; 0 when the price is unknown."""
    if price is None:
        return 0.0
    return (input_tokens * price.input_per_m + output_tokens * price.output_per_m) / 1_000_000
