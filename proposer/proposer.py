"""The ``Proposer``: picks the mode, runs it, applies the guards, accounts the usage.

Mode ``"auto"`` tries agent mode first; when the endpoint answers the first step without
tool calls, or rejects ``tools`` with a 4xx, this proposal is redone in text mode and the
instance remembers text mode for every later one (and agent mode once it worked).
Every failure is a ``ProposerError`` (``ProposalRejected`` for a guard) carrying the usage
spent on it as ``.usage``; ``total_usage`` counts rejected proposals too.
"""

from __future__ import annotations

import random

from proposer.agent import NoToolCalls, run_agent
from proposer.brief import Brief, brief_for_merge, brief_for_proposal
from proposer.client import ModelClient, ToolsUnsupported, UsageMeter
from proposer.guards import check_candidate, unified_diff
from proposer.instructions import InstructionRequest, InstructionSet, propose_instructions
from proposer.textmode import run_text
from proposer.types import MergeRequest, Proposal, ProposalRequest, ProposerConfig
from schemas.exceptions import ProposerError
from schemas.records import ModelUsage

__all__ = ["Proposer"]


class Proposer:
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
        self.config = config
        self._client = client if client is not None else ModelClient(config)
        self._rng = rng if rng is not None else random.Random(0)
        self._total = ModelUsage()
        self._mode: str | None = None if config.mode == "auto" else config.mode

    @property
    def total_usage(self) -> ModelUsage:
        """Usage of every proposal so far, accepted or rejected."""
        return self._total

    @property
    def mode(self) -> str | None:
        """``"agent"`` or ``"text"`` once decided; ``None`` while auto mode has not tried yet."""
        return self._mode

    @property
    def cost_known(self) -> bool:
        """Whether ``cost_usd`` figures are real (the price table knows the model)."""
        return self._client.cost_known

    async def propose(self, request: ProposalRequest) -> Proposal:
        """One mutation of ``request.parent``; ``ProposerError`` when none could be made."""
        return await self._run(brief_for_proposal(request))

    async def merge(self, request: MergeRequest) -> Proposal:
        """One candidate combining ``request.a`` and ``request.b``."""
        try:
            brief = brief_for_merge(request)
        except ProposerError as exc:
            exc.usage = ModelUsage()  # type: ignore[attr-defined]
            raise
        return await self._run(brief)

    async def instructions(self, request: InstructionRequest) -> InstructionSet:
        """Instruction candidates for MIPRO, grounded in a summary of the data."""
        result = await propose_instructions(self._client, request, self.config, self._rng)
        self._total = self._total + result.usage
        return result

    async def _run(self, brief: Brief) -> Proposal:
        meter = UsageMeter(self._client)
        try:
            components, rationale, mode = await self._write(meter, brief)
            check_candidate(
                components,
                bases=[p.components for p in brief.parents],
                targets=brief.targets,
                cap=self.config.max_prompt_chars,
                existing_hashes=brief.existing_hashes,
            )
        except ProposerError as exc:
            exc.usage = meter.usage  # type: ignore[attr-defined]
            raise
        finally:
            self._total = self._total + meter.usage
        diffs = {
            p.candidate_id: unified_diff(p.components, components, p.candidate_id)
            for p in brief.parents
        }
        return Proposal(
            components=components,
            rationale=rationale,
            usage=meter.usage,
            diff="".join(diffs.values()),
            mode=mode,
            parents=brief.parent_ids,
            diffs=diffs,
            cost_known=self.cost_known,
        )

    async def _write(self, meter: UsageMeter, brief: Brief) -> tuple[dict[str, str], str, str]:
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
                return components, rationale, "agent"
        components, rationale = await run_text(meter, brief, self.config, self._rng)
        return components, rationale, "text"

    async def aclose(self) -> None:
        """Close the model client."""
        await self._client.aclose()
