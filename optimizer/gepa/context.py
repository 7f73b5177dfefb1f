"""What every part of one GEPA search shares: the run's injected parts, one lock, the stop.

The parts of the search each keep their own bookkeeping; this object holds only what they
all read or signal. Every read-modify-write of the run's state happens under ``lock``, so with
one proposal in flight the search is strictly sequential.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from optimizer.gepa.state import GepaState
from optimizer.runtime.search.deps import SearchDeps
from proposer import CandidateView

__all__ = ["STOP_POLL_S", "SearchContext"]

# How soon a wait for reflections to end (``SearchContext.while_written``) sees the search stop.
STOP_POLL_S = 0.05


@dataclass
class SearchContext:
    """The shared parts of one GEPA search."""

    deps: SearchDeps
    in_flight: int = 1  # proposals written at once (the proposal strategy's)
    gepa: GepaState = field(default_factory=GepaState)  # the iteration log, checkpointed
    lock: asyncio.Lock = field(
        default_factory=asyncio.Lock
    )  # held by whoever changes the run state
    accepting: asyncio.Lock = field(default_factory=asyncio.Lock)  # one child accepted at a time
    written: asyncio.Condition = field(default_factory=asyncio.Condition)  # a reflection ended
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # set with ``stop``
    stop: str | None = None  # why the search ended; the first reason wins
    solved: bool = False  # a candidate scored full marks on every train seed
    # The baseline's train seeds still being scored: the search started on its first round.
    unscored: frozenset[str] = frozenset()

    def halt(self, reason: str) -> None:
        """Stop the search (the first reason wins); reflections still pending are dropped."""
        if self.stop is None:
            self.stop = reason
        self.stopped.set()

    async def checkpoint(self) -> None:
        """Store the run state, GEPA's iteration log with it."""
        await self.deps.checkpoint()

    async def notify_written(self) -> None:
        """Wake whoever waits for a reflection call to end (``written``)."""
        async with self.written:
            self.written.notify_all()

    async def while_written(self, waiting: Callable[[], bool], deadline: float) -> None:
        """Wait while ``waiting()`` holds, looked at again each time a reflection call ends,
        until ``deadline`` (``time.monotonic``) or, within ``STOP_POLL_S``, the search stops."""
        async with self.written:
            while waiting() and self.stop is None and (left := deadline - time.monotonic()) > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.written.wait(), min(left, STOP_POLL_S))

    def best_id(self) -> str | None:
        """The candidate with the best train mean, if any was scored."""
        best = self.deps.state.best()
        return best[0] if best else None

    def lineage(self) -> dict[str, Sequence[str]]:
        """Candidate id -> its parents' ids."""
        return {cid: r.parents for cid, r in self.deps.state.candidates.items()}

    def view(self, candidate_id: str) -> CandidateView:
        """A candidate as the proposer reads it: components, scores, seeds won, last diff."""
        state = self.deps.state
        record = state.candidates[candidate_id]
        wins = state.frontier.wins().get(candidate_id, ())
        diff = next(iter(record.diffs.values()), "")
        return CandidateView(
            candidate_id=candidate_id,
            components=dict(record.components),
            parents=tuple(record.parents),
            scores=dict(state.train.get(candidate_id, {})),
            wins=wins,
            diff_from_parent=diff,
        )
