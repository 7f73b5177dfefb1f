"""The acceptance pipeline: a child past its proposal is gated, and if it passes, scored on train.

One child at a time goes through these steps (each a module of its own):

1. *gather*: wait a moment for the proposals asked together with it, so their children are
   judged together (a hosted model answers calls sent together within a moment);
2. *drop an edit that adds nothing* when it was written with edits that do (it can only
   break seeds in their stack);
3. *stack* it with the children waiting on the same base (``optimizer.gepa.stacking``);
4. *rebase* it on the new best when its parent was the best and was replaced
   (``optimizer.gepa.rebase``);
5. *gate* it on its minibatch with the acceptance criterion (``optimizer.gepa.gate``);
6. *score it on train* (``optimizer.gepa.train_stage``).

With one proposal at a time a child goes through them at once; with several in flight, in the
background while its proposal's worker writes again (the proposal strategy chooses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.ledger import FailureLedger
from optimizer.gepa.rebase import CONFLICT, REDUNDANT, Rebaser
from optimizer.gepa.stacking import Stacking
from optimizer.gepa.train_stage import TrainStage
from optimizer.gepa.waiting import Waiting, WaitingRoom
from optimizer.runtime.rollouts.records import SeedResult
from schemas import BudgetExhausted, CandidateRecord

__all__ = ["TOGETHER_S", "AcceptancePipeline", "gather_deadline"]

# Proposals asked for within this many seconds of each other count as written together: a
# child waits for its siblings (at most GATHER_SHARE of its own writing time, GATHER_MAX_S)
# so that they are stacked and gated once.
TOGETHER_S = 0.5
GATHER_SHARE = 0.25
GATHER_MAX_S = 2.0


def gather_deadline(began: float, ended: float) -> float:
    """How long to wait for the proposals asked together with one asked at ``began`` and
    answered at ``ended`` (``time.monotonic``): a share of its writing time, at most
    ``GATHER_MAX_S``."""
    return ended + min(GATHER_MAX_S, GATHER_SHARE * (ended - began))


class AcceptancePipeline:
    """Takes children through the steps above; keeps those being accepted in the background."""

    def __init__(
        self,
        ctx: SearchContext,
        room: WaitingRoom,
        ledger: FailureLedger,
        candidates: Candidates,
        gate: MinibatchGate,
        stacking: Stacking,
        rebaser: Rebaser,
        train: TrainStage,
    ) -> None:
        self._ctx = ctx
        self._room = room
        self._ledger = ledger
        self._candidates = candidates
        self._gate = gate
        self._stacking = stacking
        self._rebaser = rebaser
        self._train = train
        self.pending: set[asyncio.Task[None]] = set()  # children accepted in the background
        # What ended a background acceptance other than the budget: the search stops and
        # raises it once its workers are back (``GepaSearch.run``), as it would in the loop.
        self.errors: list[Exception] = []

    def queue(self, entry: Waiting) -> None:
        """A child joins the waiting room (before its proposal stops counting as written)."""
        self._room.children.append(entry)

    async def accept(
        self,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None,
    ) -> None:
        """Take ``entry`` through the pipeline now."""
        await self._gate_and_accept(entry, parent_mb, span)

    def accept_in_background(
        self,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None,
    ) -> None:
        """Take ``entry`` through the pipeline in the background.

        Every failure it was shown stays taken meanwhile (its edit may fix any of them), so
        the next proposals are shown other failures. An edit that adds nothing is unlikely to
        fix them: they are shown to the next proposals.
        """
        shown = (*entry.minibatch, *entry.context) if entry.adds else ()
        targets = self._ledger.marks_for(entry.parent_id, shown)
        self._ledger.taken.update(targets)
        task = asyncio.create_task(
            self._settle(self._gate_and_accept(entry, parent_mb, span), targets)
        )
        self.pending.add(task)
        task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Task[None]) -> None:
        """A background acceptance ended: an error is kept (the search raises it) and stops
        the search, instead of being lost with its task."""
        self.pending.discard(task)
        error = None if task.cancelled() else task.exception()
        if isinstance(error, Exception):
            self.errors.append(error)
            self._ctx.halt(f"accepting a child failed: {error}")

    async def _settle(self, accept: Awaitable[None], shown: Sequence[str]) -> None:
        try:
            await accept
        except BudgetExhausted as exc:
            self._ctx.halt(str(exc))
        finally:
            self._ledger.taken.subtract(shown)

    async def _gate_and_accept(
        self,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None = None,
    ) -> None:
        """Gate a child once against what it would be stacked on; if it passes, score it on train.

        Those waiting for the same base are first tried together as one stacked candidate;
        otherwise the child is rebased when its best was replaced (``_accept_one``). A child
        whose edit adds nothing (``adds_words``) is dropped when siblings that add something
        were written with it: their stack is judged without it, and without the round of
        rollouts and the restack it would cost to find that it broke seeds. One alone is
        gated as any child is.
        """
        try:
            if span is not None:
                await self._gather(*span)
            if not entry.adds and self._room.has_adding_siblings(entry):
                await self._ctx.deps.events.emit(
                    "skipped",
                    {
                        "iteration": entry.iteration,
                        "candidate_id": entry.child.candidate_id,
                        "reason": "its edit adds nothing and was written with edits that do",
                    },
                )
                return
            async with self._ctx.accepting:
                if entry.done or await self._stacking.stack(entry):
                    return
                await self._accept_one(entry, parent_mb)
        finally:
            self._room.children.remove(entry)

    async def _gather(self, began: float, ended: float) -> None:
        """Wait a little for the proposals asked for together with the one asked at ``began``.

        The first child to arrive would otherwise be gated and scored alone, and its siblings
        stacked only after that (a gate and a train evaluation later).
        """
        writing = self._candidates.writing
        await self._ctx.while_written(
            lambda: any(abs(t - began) <= TOGETHER_S for t in writing.values()),
            gather_deadline(began, ended),
        )

    async def _accept_one(self, entry: Waiting, parent_mb: Mapping[str, SeedResult] | None) -> None:
        d = self._ctx.deps
        iteration, child, parent_id = entry.iteration, entry.child, entry.parent_id
        minibatch, context = entry.minibatch, entry.context
        candidate, against, seeds, extension = child, parent_id, minibatch, context
        if (onto := self._room.superseded(parent_id, entry.best_at_start)) is not None:
            rebased = await self._rebaser.rebase(iteration, 0, child, parent_id, onto)
            if rebased in (REDUNDANT, CONFLICT):
                return
            if isinstance(rebased, CandidateRecord):
                parent_scores = d.state.train.get(parent_id, {})
                targets = [s for s in (*minibatch, *context) if parent_scores.get(s, 1.0) < 1.0]
                candidate, against, parent_mb = rebased, onto, None
                seeds, extension = await self._rebaser.seeds_for(onto, targets, minibatch)
        if await self._gate.gate(
            iteration, candidate, against, seeds, parent_mb=parent_mb, extension=extension
        ):
            await self._train.full_train(candidate.candidate_id, against)
