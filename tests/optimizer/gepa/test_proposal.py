"""The proposal strategies: one proposal at a time, or several in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from optimizer.gepa.strategies.proposal import (
    ProposalsInFlight,
    ProposalStrategy,
    SequentialProposals,
    proposal_strategy,
)


class _Pipeline:
    """Records how a child was handed over; accepting takes a moment."""

    def __init__(self) -> None:
        self.now: list[Any] = []
        self.background: list[Any] = []
        self.accepted = asyncio.Event()

    async def accept(self, entry: Any, parent_mb: Any, span: Any) -> None:
        await asyncio.sleep(0.01)
        self.now.append(entry)
        self.accepted.set()

    def accept_in_background(self, entry: Any, parent_mb: Any, span: Any) -> None:
        self.background.append(entry)


async def test_one_at_a_time_accepts_the_child_before_the_next_proposal() -> None:
    pipeline = _Pipeline()
    strategy = SequentialProposals()
    await strategy.hand_over(pipeline, "child", None, None)  # type: ignore[arg-type]
    assert pipeline.now == ["child"] and pipeline.background == []
    assert strategy.in_flight == 1 and strategy.judges_on_seeds_ahead
    assert strategy.settles_final_winner


async def test_in_flight_accepts_children_in_the_background() -> None:
    pipeline = _Pipeline()
    strategy = ProposalsInFlight(4)
    await strategy.hand_over(pipeline, "child", None, None)  # type: ignore[arg-type]
    assert pipeline.background == ["child"] and pipeline.now == []
    assert strategy.in_flight == 4 and not strategy.judges_on_seeds_ahead
    assert not strategy.settles_final_winner


def test_the_flag_picks_the_strategy() -> None:
    assert isinstance(proposal_strategy(1), SequentialProposals)
    several = proposal_strategy(3)
    assert isinstance(several, ProposalsInFlight) and several.in_flight == 3
    assert isinstance(several, ProposalStrategy)
    with pytest.raises(ValueError, match="2 or more"):
        ProposalsInFlight(1)
