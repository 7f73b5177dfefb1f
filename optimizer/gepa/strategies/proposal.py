"""Proposal strategy: one reflective mutation at a time, or several in flight.

Reflection is slow, so the search can keep several proposals in flight
(``--proposals-in-flight K``): while one is written, the children of others are gated and
scored. They share one queue, one budget and one frontier.

- :class:`SequentialProposals` (K = 1): GEPA's loop as the paper writes it, strictly in
  turn and deterministic for a given ``--seed``. A child is accepted before the next parent
  is chosen; its gate also judges on the train seeds that fill its round of rollouts (a noisy
  student then needs more than one lucky seed to pass a child); near the end of the budget the
  winner is settled as soon as no new child could be scored on enough seeds to beat it.
- :class:`ProposalsInFlight` (K > 1): children are accepted in the background, one at a
  time, while their workers write again. Proposals written at the same time are shown
  different kinds of failure; their children are stacked on one base and judged once on
  train, and a stack that broke seeds is stacked again without the children to blame
  (``optimizer.gepa.stacking``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from optimizer.runtime.rollouts.records import SeedResult

if TYPE_CHECKING:
    from optimizer.gepa.pipeline import AcceptancePipeline
    from optimizer.gepa.waiting import Waiting

__all__ = ["ProposalStrategy", "ProposalsInFlight", "SequentialProposals", "proposal_strategy"]


@runtime_checkable
class ProposalStrategy(Protocol):
    """How many proposals are written at once, and how their children are accepted."""

    @property
    def in_flight(self) -> int:
        """Proposals written at once."""
        ...

    @property
    def judges_on_seeds_ahead(self) -> bool:
        """Whether a gate judges on the seeds that fill its round, beyond its minibatch."""
        ...

    @property
    def settles_final_winner(self) -> bool:
        """Whether the search stops once no new child could beat the winner on the seeds the
        budget has left (only sound when no other child is on its way)."""
        ...

    async def hand_over(
        self,
        pipeline: AcceptancePipeline,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None,
    ) -> None:
        """Give a written child to the acceptance pipeline."""
        ...


class SequentialProposals:
    """One proposal at a time; its child is accepted before the next is written."""

    in_flight = 1
    judges_on_seeds_ahead = True
    settles_final_winner = True

    async def hand_over(
        self,
        pipeline: AcceptancePipeline,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None,
    ) -> None:
        """Accept the child now."""
        await pipeline.accept(entry, parent_mb, span)


class ProposalsInFlight:
    """``k`` proposals at a time; children are accepted in the background."""

    judges_on_seeds_ahead = False
    settles_final_winner = False

    def __init__(self, k: int) -> None:
        if k < 2:
            raise ValueError(f"proposals in flight must be 2 or more, got {k}")
        self.in_flight = k

    async def hand_over(
        self,
        pipeline: AcceptancePipeline,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None,
    ) -> None:
        """Accept the child in the background."""
        pipeline.accept_in_background(entry, parent_mb, span)


def proposal_strategy(in_flight: int) -> ProposalStrategy:
    """The strategy for ``--proposals-in-flight`` (1: sequential)."""
    return SequentialProposals() if in_flight <= 1 else ProposalsInFlight(in_flight)
