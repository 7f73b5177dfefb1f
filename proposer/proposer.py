"""The ``Proposer``: picks the mode, runs it, applies the guards, accounts the usage.

Mode ``"auto"`` tries agent mode first; when the endpoint answers the first step without
tool calls, or rejects ``tools`` with a 4xx, this proposal is redone in text mode and the
instance remembers text mode for every later one (and agent mode once it worked).
Every failure is a ``ProposerError`` (``ProposalRejected`` for a guard) carrying the usage
spent on it as ``.usage``; ``total_usage`` counts rejected proposals too (both from
:class:`proposer.base.BaseProposer`, which ``ExternalProposer`` shares).
"""

from __future__ import annotations

import random

from proposer.agent import NoToolCalls, run_agent
from proposer.base import BaseProposer, Written
from proposer.brief import Brief
from proposer.client import ModelClient, ToolsUnsupported, UsageMeter
from proposer.instructions import InstructionRequest, InstructionSet, propose_instructions
from proposer.rulemode import merge_rules, run_rules
from proposer.textmode import run_text
from proposer.types import ProposerConfig
from schemas.usage import ModelUsage

__all__ = ["Proposer"]


class Proposer(BaseProposer[UsageMeter]):
    """Turns a parent (or two) plus its rollouts into a new candidate.

    ``client`` defaults to a ``ModelClient`` built from ``config`` (``UserError`` when the
    API key variable is missing for a remote endpoint); ``rng`` drives the evidence
    sampling and defaults to ``random.Random(0)``.
    """

    def __init__(
        self,
        config: ProposerConfig,
        *,
        client: ModelClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(max_prompt_chars=config.max_prompt_chars)
        self.config = config
        self._client = client if client is not None else ModelClient(config)
        self._rng = rng if rng is not None else random.Random(0)
        self._mode: str | None = None if config.mode == "auto" else config.mode

    @property
    def mode(self) -> str | None:
        """``"agent"`` or ``"text"`` once decided; ``None`` while auto mode has not tried yet."""
        return self._mode

    @property
    def cost_known(self) -> bool:
        """Whether ``cost_usd`` figures are real (the price table knows the model)."""
        return self._client.cost_known

    async def instructions(self, request: InstructionRequest) -> InstructionSet:
        """Instruction candidates for MIPRO, grounded in a summary of the data."""
        result = await propose_instructions(self._client, request, self.config, self._rng)
        self._total = self._total + result.usage
        return result

    def _meter(self) -> UsageMeter:
        return UsageMeter(self._client)

    def _cost_known(self, usage: ModelUsage) -> bool:
        return self.cost_known

    async def _write(self, meter: UsageMeter, brief: Brief) -> Written:
        if self._mode == "rule":
            if brief.kind == "merge":
                components, rationale = merge_rules(brief)
            else:
                components, rationale = await run_rules(meter, brief, self.config, self._rng)
            return Written(components, rationale, "rule")
        if self._mode != "text":
            auto = self._mode is None
            try:
                components, rationale = await run_agent(
                    meter, brief, self.config, self._rng, auto=auto
                )
            except (NoToolCalls, ToolsUnsupported):
                if not auto:
                    raise
                self._mode = "text"
            else:
                self._mode = "agent"
                return Written(components, rationale, "agent")
        components, rationale = await run_text(meter, brief, self.config, self._rng)
        return Written(components, rationale, "text")

    async def aclose(self) -> None:
        """Close the model client."""
        await self._client.aclose()
