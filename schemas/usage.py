"""What a model call costs: tokens and dollars, summed over calls.

Apart from :mod:`schemas.records` because the exception tree carries it too (a refused
proposal still spent what it spent: ``ProposerError.usage``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ModelUsage"]


class ModelUsage(BaseModel):
    """Tokens and dollars spent on a model (the proposer's, or the student's summed).

    ``usage_unknown`` / ``cost_unknown`` count the calls whose tokens / cost were not
    reported (an external proposer command that prints no usage): the figures above are
    then a lower bound, not a measured zero.
    """

    model_config = ConfigDict(extra="ignore")  # stored: fields added by newer code are skipped

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # of input_tokens, those the provider's prompt cache served
    cost_usd: float = 0.0
    usage_unknown: int = 0
    cost_unknown: int = 0

    def __add__(self, other: ModelUsage) -> ModelUsage:
        return ModelUsage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            usage_unknown=self.usage_unknown + other.usage_unknown,
            cost_unknown=self.cost_unknown + other.cost_unknown,
        )
