"""The baseline's train evaluation, all at once or its first round first.

The search needs the baseline's failures to write its first proposals. With several
proposals in flight, the first round of train rollouts (one per concurrency slot) is scored
first, and a method that finds enough there to show its proposals
(``SearchMethod.starts_on_first_round``) starts on it at once; the rest of train is scored
behind it (``BaselineScores.rest``), and the search judges no child before it is in. The first
proposals are then written while the baseline's other rounds are scored, instead of after
them.

The state's train row of the baseline holds the first round until the rest is in; the
``scored`` event is emitted once, for the full evaluation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.state import SearchState
from schemas import CandidateRecord

__all__ = ["BaselineScores", "score_baseline"]


@dataclass
class BaselineScores:
    """The baseline's train rollouts scored so far, and the rest while it is scored."""

    candidate_id: str
    train: Mapping[str, SeedResult]
    rest: asyncio.Task[dict[str, SeedResult]] | None = None  # ``None``: ``train`` is all
    unscored: frozenset[str] = frozenset()  # the train seeds ``rest`` scores

    async def finish(self) -> None:
        """Until the whole split is scored (at once when it is)."""
        if self.rest is not None:
            await asyncio.shield(self.rest)

    async def cancel(self) -> None:
        """Stop the rest (the run ends another way, and its error is the one reported)."""
        if self.rest is not None:
            self.rest.cancel()
            await asyncio.gather(self.rest, return_exceptions=True)


async def score_baseline(
    queue: RolloutQueue,
    state: SearchState,
    budget: Budget,
    events: EventSink,
    base: CandidateRecord,
    *,
    first_round: int | None,
    starts: Callable[[Mapping[str, SeedResult]], bool],
) -> BaselineScores:
    """Score ``base`` on the train seeds; with ``first_round`` (a round's size), return once
    that many are in if ``starts`` finds them enough to start on, the rest scored behind."""
    cid, seeds = base.candidate_id, state.train_seeds
    if first_round is None or len(seeds) <= first_round:
        train = await queue.evaluate(cid, base.components, seeds, final=True)
        await _record(state, events, cid, train)
        return BaselineScores(cid, train)
    head = await queue.evaluate(cid, base.components, seeds[:first_round], final=True)
    rest_seeds = seeds[first_round:]
    booked = len(await queue.misses(base.components, rest_seeds))
    budget.reserve(booked, final=True)  # held before the search first looks at its budget

    async def rest() -> dict[str, SeedResult]:
        tail = await queue.evaluate(cid, base.components, rest_seeds, final=True, prebooked=booked)
        train = {**head, **tail}
        await _record(state, events, cid, train)
        return train

    if not starts(head):
        return BaselineScores(cid, await rest())
    state.set_train(cid, {s: r.reward for s, r in head.items()})
    task = asyncio.create_task(rest(), name=f"baseline-rest:{cid}")
    return BaselineScores(cid, head, task, frozenset(rest_seeds))


async def _record(
    state: SearchState, events: EventSink, cid: str, train: Mapping[str, SeedResult]
) -> None:
    state.set_train(cid, {s: r.reward for s, r in train.items()})
    await events.emit(
        "scored",
        {"candidate_id": cid, "split": "train", "mean": state.train_mean(cid),
         "best_seed": state.train_best(cid)},
    )  # fmt: skip
