"""What a model call costs: one price table for the student and the reflection model.

Prices are USD per million tokens for prompt (input) tokens, completion (output) tokens and
cached prompt tokens (the part of the prompt a provider served from its prompt cache, billed
at a discount). Token counts follow OpenAI's usage: ``prompt_tokens`` includes the cached
ones, so a call costs::

    (prompt - cached) * input + cached * cached_input + completion * output    (/ 1e6)

A name is looked up as written, then without its provider prefix (``openrouter/anthropic/
claude-sonnet-4`` is ``claude-sonnet-4``, ``gemini/gemini-2.5-flash`` is ``gemini-2.5-flash``),
then without a dated snapshot suffix (``gpt-4o-2024-08-06``, ``claude-sonnet-4-20250514``).
The user's prices (``RunConfig.prices``) are looked up first, the same way.

A model neither table knows has an *unknown* price (``None``), never 0: the report then says
the figure is unknown rather than free. A model served on this machine (a local base URL) has
no list price either, so it is unknown too unless the user prices it (``{"input": 0,
"output": 0}`` says it is free).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from schemas.config import ModelPrice

__all__ = ["PRICES", "Price", "PriceTable", "cost_usd", "price_for"]


@dataclass(frozen=True)
class Price:
    """List price of a model in USD per million prompt, completion and cached prompt tokens;
    ``cached_input_per_m=None`` bills cached prompt tokens at the prompt price."""

    input_per_m: float
    output_per_m: float
    cached_input_per_m: float | None = None


# Public list prices (USD / 1M tokens) as of mid-2025, by provider family; update when
# providers change them (or override them per run: RunConfig.prices).
PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "o3": Price(2.00, 8.00, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic (cache reads at a tenth of the prompt price)
    "claude-sonnet-4": Price(3.00, 15.00, 0.30),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30),
    "claude-opus-4": Price(15.00, 75.00, 1.50),
    "claude-opus-4-1": Price(15.00, 75.00, 1.50),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10),
    # Google
    "gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
}

_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def _names(model: str) -> list[str]:
    """The names ``model`` is looked up under, most specific first."""
    full = model.strip().lower()
    bare = full.rsplit("/", 1)[-1]
    names = [full, bare, _SNAPSHOT.sub("", bare)]
    return list(dict.fromkeys(n for n in names if n))


def price_for(model: str) -> Price | None:
    """The built-in price of ``model`` (provider prefix and snapshot suffix ignored), or ``None``."""
    return PriceTable().price(model)


def cost_usd(
    price: Price | None, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> float | None:
    """Dollars for one call's usage, or ``None`` when the price is unknown.

    ``prompt_tokens`` includes ``cached_tokens`` (OpenAI's convention); a count of cached
    tokens larger than the prompt is taken as the whole prompt.
    """
    if price is None:
        return None
    cached = min(max(cached_tokens, 0), prompt_tokens)
    cached_rate = (
        price.input_per_m if price.cached_input_per_m is None else price.cached_input_per_m
    )
    dollars = (
        (prompt_tokens - cached) * price.input_per_m
        + cached * cached_rate
        + completion_tokens * price.output_per_m
    )
    return dollars / 1_000_000


def _price(value: Price | ModelPrice) -> Price:
    if isinstance(value, Price):
        return value
    return Price(value.input, value.output, value.cached_input)


class PriceTable:
    """The built-in prices with the user's on top (``overrides``: model name -> price, e.g.
    ``RunConfig.prices``).

    ``price(model, local=True)`` is the price of a model served on this machine: only the
    user's table knows it.
    """

    def __init__(self, overrides: Mapping[str, Price | ModelPrice] | None = None) -> None:
        self._overrides = {k.strip().lower(): _price(v) for k, v in (overrides or {}).items()}

    def user_price(self, model: str | None) -> Price | None:
        """The user's price of ``model`` alone (``None`` when the user did not price it)."""
        names = _names(model) if model else []
        return next((self._overrides[n] for n in names if n in self._overrides), None)

    def price(self, model: str | None, *, local: bool = False) -> Price | None:
        """The price of ``model``: the user's first, then the built-in table (not for a local
        model); ``None`` when neither knows it."""
        if not model:
            return None
        user = self.user_price(model)
        if user is not None or local:
            return user
        return next((PRICES[n] for n in _names(model) if n in PRICES), None)

    def cost(
        self,
        model: str | None,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        *,
        local: bool = False,
    ) -> float | None:
        """Dollars for one call of ``model`` (``None``: its price is unknown)."""
        price = self.price(model, local=local)
        return cost_usd(price, prompt_tokens, completion_tokens, cached_tokens)
