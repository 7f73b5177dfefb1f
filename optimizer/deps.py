"""What a search strategy is given: the run's shared parts, injected (``SearchDeps``).

GEPA (``optimizer.search``) and MIPRO (``optimizer.mipro``) are two strategies over the same
queue, budget, state, events and workspace; ``score_on_train`` is the step both share: a
candidate's full train evaluation, the frontier rebuilt, saved and announced.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from optimizer.budget import Budget
from optimizer.dispatch import RolloutQueue
from optimizer.events import EventSink
from optimizer.state import SearchState
from proposer import ComponentSpec, MergeRequest, Proposal, ProposalRequest
from schemas import RunConfig
from workspace import Workspace

__all__ = ["ProposerLike", "SearchDeps", "score_on_train"]


class ProposerLike(Protocol):
    """What the GEPA search needs of a proposer (``proposer.Proposer`` is one)."""

    async def propose(self, request: ProposalRequest) -> Proposal:
        """A new candidate from a parent and its minibatch results."""
        ...

    async def merge(self, request: MergeRequest) -> Proposal:
        """One candidate that keeps what two complementary candidates do well."""
        ...


@dataclass
class SearchDeps:
    """Everything a search uses, injected."""

    config: RunConfig
    run_id: str
    workspace: Workspace
    queue: RolloutQueue
    proposer: ProposerLike
    budget: Budget
    events: EventSink
    rng: random.Random
    state: SearchState
    components: tuple[ComponentSpec, ...]
    description: str
    checkpoint: Callable[[], Awaitable[None]]
    proposer_cost: Callable[[], float]


async def score_on_train(deps: SearchDeps, lock: asyncio.Lock, candidate_id: str) -> None:
    """Evaluate a candidate on every train seed, rebuild the frontier, save and announce it."""
    d = deps
    record = d.state.candidates[candidate_id]
    results = await d.queue.evaluate(candidate_id, record.components, d.state.train_seeds)
    async with lock:
        previous = set(d.state.frontier.members())
        frontier = d.state.set_train(candidate_id, {s: r.reward for s, r in results.items()})
        mean = d.state.train_mean(candidate_id)
        best = d.state.best()
    await d.workspace.save_frontier(
        d.run_id, {s: list(w) for s, w in frontier.winners.items()}, dict(frontier.best)
    )
    await d.events.emit("scored", {"candidate_id": candidate_id, "split": "train", "mean": mean})
    await d.events.emit(
        "frontier",
        {
            "winners": {s: list(w) for s, w in frontier.winners.items()},
            "coverage": frontier.coverage(),
            "new": [c for c in frontier.members() if c not in previous],
            "best": {"candidate_id": best[0], "mean": best[1]} if best else None,
        },
    )
