"""What a rollout measures besides its reward, with no work for the container author.

Every scored rollout gives, besides ``reward`` and whatever its container reports in
``objectives`` (each maximised or minimised as ``GET /program`` declares):

- ``cost_usd``: the student's dollars for the rollout. The user's price of the student model
  (``RunConfig.prices``) times its tokens when the user priced it; else the container's own
  ``usage.cost_usd`` when it reported one; else the built-in table's price
  (:mod:`transport.pricing`) times the tokens. The model is the one the container names in
  ``usage.model``, else the run's ``--task-model``. A model no table knows has an *unknown*
  cost (``None``), never 0.
- ``latency_ms``: the wall time of the rollout's answered request, measured by the queue.
- ``prompt_tokens``: the candidate's length, summed over its components, estimated at one token
  per 4 characters (OpenAI's rule of thumb for English text; no tokenizer, so every model's
  candidates are measured alike). A property of the candidate: the same on every seed.

All three are minimised. Their names are reserved: a container objective of the same name is
read as the measured one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from schemas import Direction, Program, RolloutRecord, Usage
from transport.pricing import PriceTable, cost_usd

__all__ = [
    "MEASURED",
    "ObjectiveInfo",
    "StudentPricing",
    "directions_of",
    "estimate_tokens",
    "prompt_tokens",
    "rollout_values",
]

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class ObjectiveInfo:
    """How an objective reads: its direction, unit and a short label for charts."""

    direction: Direction
    label: str
    unit: str = ""


MEASURED: dict[str, ObjectiveInfo] = {
    "cost_usd": ObjectiveInfo("minimize", "cost per rollout", "USD"),
    "latency_ms": ObjectiveInfo("minimize", "latency per rollout", "ms"),
    "prompt_tokens": ObjectiveInfo("minimize", "prompt length", "tokens"),
}


def estimate_tokens(text: str) -> int:
    """Tokens of ``text``, estimated at one per ``CHARS_PER_TOKEN`` characters (rounded up)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_tokens(components: Mapping[str, str]) -> int:
    """The estimated length of a candidate: its components' tokens, summed."""
    return sum(estimate_tokens(text) for text in components.values())


def directions_of(program: Program) -> dict[str, Direction]:
    """Every objective of a run and its direction: ``reward``, the container's, the measured."""
    return {**program.directions(), **{n: i.direction for n, i in MEASURED.items()}}


@dataclass(frozen=True)
class StudentPricing:
    """Prices the student's usage of one rollout (rules in the module docstring)."""

    table: PriceTable = field(default_factory=PriceTable)
    task_model: str | None = None

    def cost(self, usage: Usage) -> float | None:
        """The rollout's student dollars, or ``None`` when they are unknown."""
        model = usage.model or self.task_model
        tokens = (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        user = self.table.user_price(model)
        if user is not None:
            return cost_usd(user, *tokens)
        if usage.cost_usd > 0:
            return usage.cost_usd
        return self.table.cost(model, *tokens)


def rollout_values(record: RolloutRecord, pricing: StudentPricing) -> dict[str, float | None]:
    """The objectives of one scored rollout but ``prompt_tokens`` (a candidate's, not a
    rollout's): its reward, the container's objectives, its cost and its latency."""
    reported = {k: v for k, v in record.objectives.items() if k not in MEASURED}
    return {
        **reported,
        "reward": record.reward,
        "cost_usd": pricing.cost(record.usage),
        "latency_ms": record.latency_ms,
    }
