"""What a search strategy is given: the run's shared parts, injected (``SearchDeps``).

GEPA (``optimizer.gepa.search``) and MIPRO (``optimizer.mipro``) are two strategies over the same
queue, budget, state, events and workspace; ``score_on_train`` is the step both share: a
candidate's full train evaluation, the frontier rebuilt, saved and announced.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.search.frontier import frontier_view
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.steering import RunSteering
from proposer import ComponentSpec, MergeRequest, Proposal, ProposalRequest
from schemas import BudgetExhausted, ModelUsage, RunConfig
from workspace import Workspace

__all__ = ["ProposerLike", "SearchDeps", "announce_frontier", "score_on_train"]


class ProposerLike(Protocol):
    """What a run needs of a proposer (``proposer.Proposer`` and ``ExternalProposer`` are two).

    The runtime never asks which one it has: it reads ``total_usage`` for the accounts and
    calls ``aclose`` on a proposer it made (one given to it is the caller's to close).
    """

    @property
    def total_usage(self) -> ModelUsage:
        """Usage of every proposal so far, accepted or refused."""
        ...

    async def propose(self, request: ProposalRequest) -> Proposal:
        """A new candidate from a parent and its minibatch results."""
        ...

    async def merge(self, request: MergeRequest) -> Proposal:
        """One candidate that keeps what two complementary candidates do well."""
        ...

    async def aclose(self) -> None:
        """Release what the proposer holds (a model client, a temporary folder)."""
        ...


async def _nothing(_: int) -> str | None:
    return None


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
    # Recomputes ``budget.reserve_final`` from the state (what the end of the run still needs).
    refresh_reserve: Callable[[], None] = lambda: None
    # Told, with nothing else in flight, that a new candidate could be scored on this many
    # train seeds at most: the run may then settle its winner, and says why (the search then
    # stops: ``BackgroundHoldouts.settle_if_final``).
    measure_if_settled: Callable[[int], Awaitable[str | None]] = _nothing
    # A person's actions on the run: a pause to wait out before a reflection call, the pin,
    # the notes and a stop the search's parts read (rejections are in ``state.rejected``).
    steering: RunSteering = field(default_factory=RunSteering)


async def score_on_train(deps: SearchDeps, lock: asyncio.Lock, candidate_id: str) -> None:
    """Evaluate a candidate on every train seed, rebuild the frontier, save and announce it.

    When the budget left to the search cannot pay for every seed, the candidate is scored on
    the seeds it can pay for (``state.partial``, compared with the best on those seeds at
    selection) and ``BudgetExhausted`` ends the search: the tail of a budget is spent, not lost.
    """
    d = deps
    record = d.state.candidates[candidate_id]
    seeds = list(d.state.train_seeds)
    while True:
        missing = await d.queue.misses(record.components, seeds)
        room = d.budget.search_room()
        if room is not None and len(missing) > room:
            await _score_partially(d, lock, record.candidate_id, seeds, missing, max(room, 0))
            return
        try:
            results = await d.queue.evaluate(candidate_id, record.components, seeds)
            break
        except BudgetExhausted:
            if d.budget.search_room() == room:
                raise
            # Another worker booked rollouts in between: look at what is left again.
    async with lock:
        previous = set(d.state.frontier.members())
        d.state.set_train(candidate_id, {s: r.reward for s, r in results.items()})
        mean = d.state.train_mean(candidate_id)
        d.refresh_reserve()
    top = d.state.train_best(candidate_id)
    await d.events.emit(
        "scored", {"candidate_id": candidate_id, "split": "train", "mean": mean, "best_seed": top}
    )
    await announce_frontier(d.workspace, d.events, d.run_id, d.state, previous)


async def announce_frontier(
    workspace: Workspace,
    events: EventSink,
    run_id: str,
    state: SearchState,
    previous: Collection[str] = (),
) -> None:
    """Save the state's frontier and emit it (``new``: members not in ``previous``)."""
    frontier, best = state.frontier, state.best()
    view = frontier_view(frontier)
    await workspace.save_frontier(run_id, view["winners"], dict(frontier.best))
    await events.emit(
        "frontier",
        {
            **view,
            "new": [c for c in frontier.members() if c not in previous],
            "best": {"candidate_id": best[0], "mean": best[1]} if best else None,
        },
    )


async def _score_partially(
    d: SearchDeps,
    lock: asyncio.Lock,
    candidate_id: str,
    seeds: list[str],
    missing: list[str],
    room: int,
) -> None:
    if room <= 0:
        raise BudgetExhausted(
            f"metric-call budget reached: no room left to score {candidate_id} on train"
        )
    chosen = set(missing[:room])
    subset = [s for s in seeds if s not in missing or s in chosen]
    record = d.state.candidates[candidate_id]
    results = await d.queue.evaluate(candidate_id, record.components, subset)
    async with lock:
        d.state.partial[candidate_id] = {
            s: r.reward for s, r in results.items() if r.reward is not None
        }
        d.refresh_reserve()
    await d.events.emit(
        "scored",
        {
            "candidate_id": candidate_id,
            "split": "train_partial",
            "seeds": len(subset),
            "of": len(seeds),
        },
    )
    raise BudgetExhausted(
        f"metric-call budget reached: the last candidate ({candidate_id}) was scored on "
        f"{len(subset)} of {len(seeds)} train seeds"
    )
