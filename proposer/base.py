"""What every proposer shares: propose and merge through one ``Brief``, the guards, the usage.

``BaseProposer`` is the common part of the built-in ``Proposer`` (agent and text mode) and
the ``ExternalProposer`` (a command), as httpx's base transport is its transports':
``propose``/``merge`` turn the request into a ``Brief``; the subclass's ``_write`` writes the
new components while a meter sums what they cost; the guards check them; and the usage is
booked on the ``Proposal``, or on the ``ProposerError`` that refused it (its declared
``usage``), and in ``total_usage`` either way. ``aclose`` releases nothing unless a subclass
holds something (a model client, a temporary folder).

    class MyProposer(BaseProposer[Spent]):
        def _meter(self) -> Spent: ...
        async def _write(self, meter: Spent, brief: Brief) -> Written: ...
        def _cost_known(self, usage: ModelUsage) -> bool: ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from proposer.brief import Brief, brief_for_merge, brief_for_proposal
from proposer.guards import check_candidate, unified_diff
from proposer.types import MergeRequest, Proposal, ProposalRequest
from schemas.exceptions import ProposerError
from schemas.usage import ModelUsage

__all__ = ["BaseProposer", "Metered", "Spent", "Written"]


class Metered(Protocol):
    """What sums the usage of one proposal while it is written (``client.UsageMeter`` is one)."""

    usage: ModelUsage


@dataclass
class Spent:
    """A meter whose usage the writer sets itself (a command reports its own)."""

    usage: ModelUsage = field(default_factory=ModelUsage)


@dataclass(frozen=True)
class Written:
    """The new components as the writer left them, before the guards, and how they came."""

    components: dict[str, str]
    rationale: str
    mode: str  # "agent", "text", "rule" or "command"


MeterT = TypeVar("MeterT", bound=Metered)


class BaseProposer(ABC, Generic[MeterT]):
    """``propose``/``merge`` -> ``_write`` -> guards -> ``Proposal``, with the usage booked.

    ``max_prompt_chars`` is the guards' length cap of a component.
    """

    def __init__(self, *, max_prompt_chars: int) -> None:
        self._cap = max_prompt_chars
        self._total = ModelUsage()

    @property
    def total_usage(self) -> ModelUsage:
        """Usage of every proposal so far, accepted or refused."""
        return self._total

    async def propose(self, request: ProposalRequest) -> Proposal:
        """One mutation of ``request.parent``; ``ProposerError`` when none could be made."""
        return await self._run(brief_for_proposal(request))

    async def merge(self, request: MergeRequest) -> Proposal:
        """One candidate combining ``request.a`` and ``request.b``."""
        return await self._run(brief_for_merge(request))

    async def aclose(self) -> None:
        """Release what the proposer holds: nothing, unless a subclass says otherwise."""

    @abstractmethod
    def _meter(self) -> MeterT:
        """A fresh meter for one proposal."""

    @abstractmethod
    async def _write(self, meter: MeterT, brief: Brief) -> Written:
        """The new components; what they cost is on ``meter`` (also when this raises)."""

    @abstractmethod
    def _cost_known(self, usage: ModelUsage) -> bool:
        """Whether the ``cost_usd`` of ``usage`` is a real figure."""

    async def _run(self, brief: Brief) -> Proposal:
        meter = self._meter()
        try:
            written = await self._write(meter, brief)
            check_candidate(
                written.components,
                bases=[p.components for p in brief.parents],
                targets=brief.targets,
                cap=self._cap,
                existing_hashes=brief.existing_hashes,
            )
        except ProposerError as exc:
            exc.usage = meter.usage
            raise
        finally:
            self._total = self._total + meter.usage
        diffs = {
            p.candidate_id: unified_diff(p.components, written.components, p.candidate_id)
            for p in brief.parents
        }
        return Proposal(
            components=written.components,
            rationale=written.rationale,
            usage=meter.usage,
            diff="".join(diffs.values()),
            mode=written.mode,
            parents=brief.parent_ids,
            diffs=diffs,
            cost_known=self._cost_known(meter.usage),
        )
