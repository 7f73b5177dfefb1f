"""Stopping: the search's observations (``SearchProgress``) and its stop conditions, asked.

The parts of the search tell this object what they observe (a proposal written, a candidate
made, an iteration that made nothing, a candidate scored on train, what the budget or the
failure ledger says) and it asks the conditions right after; the first reason stops the search
(``SearchContext.halt``). Conditions that read the clock or the outside world (a timeout, a
stop file, a signal, a person's stop) are also asked every ``POLL_S`` seconds while the search
runs. Before each asking, the progress takes in what the run's steering says: a person's stop,
and how long the run was paused since the search started (not counted by ``--timeout``).
"""

from __future__ import annotations

import asyncio
import time

from optimizer.gepa.context import SearchContext
from optimizer.gepa.strategies.stop_condition import Perfect, SearchProgress, StopCondition

__all__ = ["POLL_S", "Stopping"]

POLL_S = 0.25


class Stopping:
    """Keeps the search's progress and stops it when a condition says so."""

    def __init__(self, ctx: SearchContext, condition: StopCondition) -> None:
        self._ctx = ctx
        self.condition = condition
        self.progress = SearchProgress()
        self._paused_before = 0.0  # the run's paused time when the search started

    def start(self) -> None:
        """The search starts now: its clock, and the pauses it counts, start here."""
        self.progress.started = time.monotonic()
        self._paused_before = self._ctx.deps.steering.paused_s

    def check(self) -> bool:
        """Ask the conditions; True (and the search halted) when one gave a reason."""
        if self._ctx.stop is not None:
            return True
        steering = self._ctx.deps.steering
        self.progress.paused_s = steering.paused_s - self._paused_before
        self.progress.stop_request = steering.state.stop_reason
        reason = self.condition.reason_to_stop(self.progress)
        if reason:
            self._ctx.halt(reason)
        return self._ctx.stop is not None

    async def poll(self) -> None:
        """Ask the conditions every ``POLL_S`` seconds until the search stops."""
        while not self.check():
            await asyncio.sleep(POLL_S)

    def _best_mean(self) -> float | None:
        best = self._ctx.deps.state.best()
        return best[1] if best else None

    def baseline_in(self) -> None:
        """The baseline is scored (on the train seeds it has so far): the counts start here."""
        self.progress.proposals_best_mean = self.progress.best_mean = self._best_mean()

    def proposal_written(self) -> None:
        """One more proposal was answered; counts toward ``--patience`` unless the best rose."""
        progress, mean = self.progress, self._best_mean()
        progress.proposals += 1
        if mean is not None and (
            progress.proposals_best_mean is None or mean > progress.proposals_best_mean
        ):
            progress.proposals_best_mean, progress.proposals_since_improvement = mean, 0
        else:
            progress.proposals_since_improvement += 1
        self.check()

    def candidate_made(self) -> None:
        """One more candidate was stored (counts toward ``--stop-after-no-improvement``)."""
        self.progress.candidates += 1
        self.progress.candidates_since_improvement += 1
        self.check()

    def iteration_ended(self, made: bool) -> None:
        """An iteration made a candidate (the idle count restarts) or made nothing."""
        self.progress.idle_iterations = 0 if made else self.progress.idle_iterations + 1
        self.check()

    def scored(self, perfect: Perfect | None = None) -> None:
        """A candidate was scored on every train seed; ``perfect`` when with full marks."""
        progress, mean = self.progress, self._best_mean()
        if perfect is not None:
            self._ctx.solved = True  # children still waiting cannot beat it
            progress.perfect = perfect
        if mean is not None and (progress.best_mean is None or mean > progress.best_mean):
            progress.best_mean, progress.candidates_since_improvement = mean, 0
        self.check()

    def budget_spent(self, reason: str) -> None:
        """The budget allows no new iteration."""
        self.progress.budget = reason
        self.check()

    def converged(self) -> None:
        """Every frontier member is retired and nothing is being written or accepted."""
        self.progress.converged = True
        self.check()

    def nothing_to_fix(self, best: str) -> None:
        """Nothing is left to fix in ``best``, and nothing is being written or accepted."""
        self.progress.nothing_to_fix_in = best
        self.check()
