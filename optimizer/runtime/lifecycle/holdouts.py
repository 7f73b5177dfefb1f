"""Holdout evaluations that run in the background while the search goes on.

Holdout scores are needed only at promotion. The baseline's are paid for while the first
proposals are written, behind the search's own rollouts (a gate does not wait for them).
The winner's usually wait for the end of the search; but once the budget left could not score
a new candidate on enough train seeds to be chosen (``could_still_win``), the winner is
settled: its holdout rollouts start at once, and the search stops (a new proposal could not
change the winner; the rest of the budget is not spent).
"""

from __future__ import annotations

import asyncio

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.accounts.plan import RunPlan
from optimizer.runtime.results.promotion import choose_on_train, could_still_win, selection_need
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.search.state import SearchState

__all__ = ["BackgroundHoldouts"]


class BackgroundHoldouts:
    """The run's holdout evaluations in the background, and the winner settled early."""

    def __init__(
        self,
        queue: RolloutQueue,
        state: SearchState,
        plan: RunPlan,
        budget: Budget,
        baseline_id: str,
        events: EventSink,
    ) -> None:
        self._queue = queue
        self._state = state
        self._plan = plan
        self._budget = budget
        self._baseline_id = baseline_id
        self._events = events
        self._tasks: list[asyncio.Task[None]] = []
        self.settled: str | None = None  # the winner measured before the search ended

    def refresh_reserve(self) -> None:
        """What the end of the run still needs, held back from the search
        (``selection_need``; nothing more for a settled winner, whose rollouts are booked)."""
        self._budget.reserve_final = selection_need(
            self._state, self._plan, self._baseline_id, self.settled
        )

    async def start(self, cid: str, *, settled: bool = False) -> None:
        """Book ``cid``'s holdout rollouts now and run them behind the search's own
        (``settled``: the winner's, whose reserve becomes its booking)."""
        state, record, seeds = self._state, self._state.candidates[cid], self._plan.holdout
        booked = len(await self._queue.misses(record.components, seeds))
        if settled:
            self.settled = cid
            self.refresh_reserve()
        self._budget.reserve(booked, final=True)

        async def holdout() -> None:
            results = await self._queue.evaluate(
                cid, record.components, seeds, final=True, prebooked=booked, background=True
            )
            state.holdout[cid] = {s: r.reward for s, r in results.items() if r.reward is not None}

        self._tasks.append(asyncio.create_task(holdout(), name=f"holdout:{cid}"))

    async def settle_if_final(self, seeds: int) -> str | None:
        """Start the winner's holdout evaluation now if no new candidate can replace it; why,
        or ``None`` when nothing was settled.

        The search calls this when nothing else is in flight and the budget left lets it
        score a new candidate on ``seeds`` train seeds at most. Only for a winner chosen on
        train by ``--select best``: on val, the frontier's top candidates are compared at the
        end, and another rule may still prefer a new candidate that does not beat the best.
        """
        state, plan = self._state, self._plan
        if self.settled is not None or plan.selection_split != "train" or not plan.holdout:
            return None
        if not state.rule.is_best:  # a cheaper candidate may still win without a better mean
            return None
        if could_still_win(state, plan, seeds):
            return None
        best = choose_on_train(state, self._baseline_id)
        if best == self._baseline_id or best in state.holdout:
            return None
        await self.start(best, settled=True)
        reason = (
            f"the budget left could score a new candidate on {seeds} of "
            f"{len(state.train_seeds)} train seeds at most, too few to beat "
            f"{best}'s train mean of {state.train_mean(best):.3f}"
        )
        await self._events.emit(
            "settled",
            {"candidate_id": best, "reason": f"{reason}; its holdout evaluation starts now"},
        )
        return reason

    async def wait(self) -> None:
        """Until every holdout evaluation started has ended."""
        await asyncio.gather(*self._tasks)

    async def cancel(self) -> None:
        """Stop the holdout evaluations still running (the run ends another way, and its
        error is the one reported: one these failed with too is taken, not logged)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
