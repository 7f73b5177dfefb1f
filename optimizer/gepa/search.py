"""The GEPA search loop: select a parent, sample a batch, reflect, accept, until a stop condition.

One iteration, in the paper's words, each step a named part (:mod:`optimizer.gepa.strategies`):

    parent   = a merge the merge strategy says is due, or a lateral child to build on next
               (``LateralFollowUps``), or the candidate selector's choice
    batch    = the batch sampler's minibatch and context for the parent
    child    = the reflective mutation: the proposer edits the components the component
               selector names, shown the parent's failures and feedback (``Candidates``)
    accepted = the acceptance pipeline: gated with the acceptance criterion on the minibatch,
               then scored on every train seed (``AcceptancePipeline``); the frontier is rebuilt

The proposal strategy runs ``in_flight`` workers of this loop over one queue, one budget and
one frontier; every read-modify-write of the shared state happens under one lock, so with one
worker the loop is strictly sequential and deterministic for a given seed. Each iteration's
outcome is logged (:mod:`optimizer.gepa.state`), so a resumed run replays earlier iterations
from the workspace (cached rollouts, stored candidates) and pays for nothing twice. The stop
conditions (:mod:`optimizer.gepa.strategies.stop_condition`) end it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.edits import adds_words
from optimizer.gepa.followups import LateralFollowUps
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.ledger import FailureLedger, Shown, evaluations_of
from optimizer.gepa.merging import Merging
from optimizer.gepa.notes import PersonNotes, as_request_notes
from optimizer.gepa.pipeline import TOGETHER_S, AcceptancePipeline, gather_deadline
from optimizer.gepa.rebase import Rebaser
from optimizer.gepa.stacking import Stacking
from optimizer.gepa.state import GepaState
from optimizer.gepa.stopping import Stopping
from optimizer.gepa.strategies import GepaStrategies
from optimizer.gepa.strategies.batch_sampler import request_for
from optimizer.gepa.strategies.candidate_selector import SelectionView, select_parent
from optimizer.gepa.strategies.stop_condition import SignalStopper
from optimizer.gepa.train_stage import TrainStage
from optimizer.gepa.waiting import Waiting, WaitingRoom
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.baseline import BaselineScores
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.steering import Note
from proposer import ProposalRequest
from schemas import BudgetExhausted

__all__ = ["GepaSearch"]


class GepaSearch:
    """Runs iterations until a stop condition ends the search."""

    def __init__(
        self, deps: SearchDeps, strategies: GepaStrategies, scoring: BaselineScores | None = None
    ) -> None:
        self._d = deps
        self._s = strategies
        self._ctx = ctx = SearchContext(
            deps, in_flight=strategies.proposal.in_flight, gepa=GepaState.within(deps.state.extra)
        )
        self._scoring = scoring  # the baseline's train rest, while it is scored
        self._scored: asyncio.Task[None] | None = None  # its end, as this search takes it in
        if scoring is not None:
            ctx.unscored = scoring.unscored
        self._stopping = Stopping(ctx, strategies.stop)
        self._ledger = FailureLedger(ctx)
        gate = MinibatchGate(
            ctx, strategies.acceptance, judges_ahead=strategies.proposal.judges_on_seeds_ahead
        )
        self._candidates = Candidates(ctx, gate, self._ledger, self._stopping)
        self._followups = LateralFollowUps(ctx)
        train = TrainStage(ctx, self._stopping, self._followups)
        room = WaitingRoom(ctx)
        stacking = Stacking(ctx, room, gate, self._candidates, train, self._followups)
        rebaser = Rebaser(ctx, self._candidates, self._ledger, strategies.batch_sampler)
        self._pipeline = AcceptancePipeline(
            ctx, room, self._ledger, self._candidates, gate, stacking, rebaser, train
        )
        self._notes = PersonNotes(ctx)
        self.merging = Merging(ctx, strategies.merge, gate, self._candidates, train, self._notes)
        self._train = train
        self._iteration = 0
        self._open: dict[int, float] = {}  # iteration -> when shown, until its answer is in

    @property
    def stop_reason(self) -> str | None:
        """Why the search ended."""
        return self._ctx.stop

    async def run(self) -> str:
        """Search until stopped; returns the reason."""
        signals = [c for c in _conditions(self._s.stop) if isinstance(c, SignalStopper)]
        for stopper in signals:
            stopper.install()
        await self._d.events.emit("strategies", self._s.names())
        if self._scoring is not None:
            self._scored = asyncio.create_task(self._take_in_baseline(self._scoring))
        self._stopping.start()
        self._stopping.baseline_in()
        # A person's stop ends the search the moment the run reads it, not at the next poll.
        forget = self._d.steering.on_change(lambda _: self._stopping.check())
        polling = asyncio.create_task(self._stopping.poll())
        workers = [asyncio.create_task(self._worker()) for _ in range(self._ctx.in_flight)]
        pending = self._pipeline.pending
        try:
            await self._unless_baseline_fails(asyncio.gather(*workers))
            # children still being accepted in the background, unless nothing can beat the best
            while pending and not self._ctx.solved:
                await asyncio.gather(*list(pending))
            if self._pipeline.errors:
                raise self._pipeline.errors[0]
        finally:
            for task in [polling, *workers, *pending, *([self._scored] if self._scored else [])]:
                task.cancel()
            for stopper in signals:
                stopper.uninstall()
            forget()
        return self._ctx.stop or "stopped"

    async def _unless_baseline_fails(self, work: asyncio.Future[list[None]]) -> None:
        """Until ``work`` is done; a failure of the baseline's rest (its error rate passed
        the limit, say) ends the search at once with that error, though no worker is back
        yet to wait for it."""
        scored = self._scored
        if scored is not None:
            if not scored.done():
                await asyncio.wait((work, scored), return_when=asyncio.FIRST_COMPLETED)
            error = scored.exception() if scored.done() and not scored.cancelled() else None
            if error is not None:
                work.cancel()
                work.add_done_callback(lambda f: f.cancelled() or f.exception())
                raise error
        await work

    async def _take_in_baseline(self, scoring: BaselineScores) -> None:
        """Once the baseline's whole train split is scored: its failures are grouped again
        (the first proposals saw its first round's), every train seed may be a passing seed
        of a minibatch, and the counts toward the stop conditions start from its full mean."""
        await scoring.finish()
        async with self._ctx.lock:
            self._ctx.unscored = frozenset()
            await self._ledger.relearn_kinds(scoring.candidate_id)
            self._stopping.baseline_in()

    async def _baseline_in(self) -> None:
        """Until the baseline's whole train split is scored and taken in: a child is judged
        against its parent's full train scores."""
        if self._scored is not None:
            await asyncio.shield(self._scored)

    async def _worker(self) -> None:
        ctx, stopping = self._ctx, self._stopping
        while ctx.stop is None:
            try:
                made = await self._step()
                if made is None:  # it only waited
                    continue
                stopping.proposal_written()
                if not made and self._pipeline.pending:
                    continue  # repeated a fix still being accepted: the search is not stuck
                stopping.iteration_ended(made)
            except BudgetExhausted as exc:
                ctx.halt(str(exc))

    async def _step(self) -> bool | None:
        """One iteration; True when it produced a new candidate, None when it only waited.

        A step that only waits takes no iteration number and no minibatch: how often a
        worker woke while others wrote (a matter of timing) does not move the rotation.
        """
        if self._budget_spent():
            return None
        await self._settle_if_final()
        ctx, d = self._ctx, self._d
        parent_id: str | None = None
        async with ctx.lock:
            pinned = self._pinned()
            pair = self.merging.due(d.rng) if pinned is None else None
            follow = None
            if pair is None:
                follow = self._followups.next() if pinned is None else None
                parent_id, broken = follow if follow else (self._parent(pinned), [])
            if pair is not None or parent_id is not None:
                self._iteration += 1
                iteration = self._iteration
                rotation = self._s.batch_sampler.next_rotation()
                best_at_start = ctx.best_id()
        if pair is not None:
            return await self.merging.merge(iteration, pair, rotation)
        if parent_id is None:  # nothing new to show yet: wait for news (at once if halted)
            await self._news()
            return None
        made = await self._mutate(iteration, parent_id, rotation, best_at_start, broken)
        if made is None and follow:  # it only waited: the turn is the next worker's
            self._followups.give_back(parent_id, broken)
        return made

    def _budget_spent(self) -> bool:
        """Whether the budget allows no new iteration (the stop conditions are told why).

        No reflection is asked when the budget left could not score a new child past its
        gate: its minibatch would take every call left, so the reflection would buy nothing
        but a gate.
        """
        d = self._d
        try:
            d.budget.check_search()
        except BudgetExhausted as exc:
            self._stopping.budget_spent(str(exc))
            return True
        room = d.budget.search_room()
        gate = self._s.batch_sampler.size
        if room is not None and room <= gate:
            self._stopping.budget_spent(
                f"metric-call budget reached: {room} left for search, no more than a new "
                f"child's gate of {gate} rollouts ({d.budget.paid} paid of {d.budget.max_calls})"
            )
            return True
        return False

    async def _settle_if_final(self) -> None:
        """With one proposal at a time, tell the run how many train seeds a new child could
        still be scored on when the budget left is less than the train split: if too few for
        it to be chosen, the winner is settled, its holdout evaluation starts, and the search
        stops (``SearchDeps.measure_if_settled``): a last proposal could not change the winner,
        only take a reflection's time and the budget's tail. With several in flight, children
        already gated may still take the best's place, so nothing is settled.
        """
        d = self._d
        room = d.budget.search_room()
        if (
            self._s.proposal.settles_final_winner
            and room is not None
            and room < len(d.state.train_seeds)
        ):
            settled = await d.measure_if_settled(room)
            if settled is not None:
                raise BudgetExhausted(f"metric-call budget: {settled}")

    def _pinned(self) -> str | None:
        """The candidate a person pinned, while it is one of the run's and not rejected: the
        next proposals start from it (no merge, no follow-up in its place)."""
        pinned, state = self._d.steering.state.pinned, self._d.state
        if pinned is None or pinned not in state.candidates or pinned in state.rejected:
            return None
        return pinned

    def _parent(self, pinned: str | None = None) -> str | None:
        """The candidate selector's choice among the fully evaluated candidates (the
        ``pinned`` one when a person pinned one: ``select_parent``); ``None`` when every
        frontier member's failures were all shown, or nothing is left to fix in the best
        (``_is_nothing_to_fix``), unless a candidate is pinned.

        Then what is being written or accepted may bring new failures (the caller waits for
        it); with nothing in flight the search stops when every member is retired
        (``FailureLedger.retired``), else a new round starts on the others (their failures
        may be shown once more).
        """
        ledger, state = self._ledger, self._d.state
        frontier = state.frontier
        members, exhausted = set(frontier.wins()), ledger.exhausted()
        if pinned is None and self._is_nothing_to_fix(members):
            return None
        if pinned is None and members <= exhausted:
            if ledger.open_proposals or self._pipeline.pending:
                return None
            retired = ledger.retired(members)
            if members <= retired:
                self._stopping.converged()
                return None
            ledger.new_round(members - retired)
            exhausted = ledger.exhausted()
        view = SelectionView(
            frontier=frontier,
            ranked=tuple(state.ranked()),
            exhausted=frozenset(exhausted),
            unasked=frozenset(m for m in members if ledger.is_unasked(m)),
            repeats=ledger.repeats,
            pinned=pinned,
            rejected=frozenset(state.rejected),
        )
        return select_parent(self._s.candidate_selector, view, self._d.rng)

    def _is_nothing_to_fix(self, members: set[str]) -> bool:
        """Whether the reflection model found nothing to fix in the best and in the members
        that tie it (``FailureLedger.nothing_to_fix_in``), and every other frontier member
        scores below them on train: no proposal starts, and the search stops once nothing is
        being written or accepted (what comes may still change the best).

        Those members win their seeds from a weaker text: by noise (a student that is right
        only most of the time), or by an edit that broke more than it fixed. Proposals on
        them would chase those seeds while the best stays where it is; a worker freed while
        another still writes waits for it rather than start one. A member that ties the best
        keeps the search going (two look-alike rules trading seeds) until nothing was found
        to fix in it either, or it was built on and its child that ties found nothing.
        """
        state, ranked = self._d.state, self._d.state.best()
        if ranked is None:
            return False
        best, top = ranked
        if not members - {best}:  # alone: the converged rule says it
            return False
        tops = {best} | {m for m in members if (state.train_mean(m) or 0.0) >= top}
        if not self._ledger.nothing_to_fix_in(tops):
            return False
        if not (self._ledger.open_proposals or self._pipeline.pending):
            self._stopping.nothing_to_fix(best)
        return True

    async def _news(self) -> None:
        """Wait until a proposal being written ends, a child is settled or the search stops."""
        ctx = self._ctx

        async def written() -> None:
            async with ctx.written:
                await ctx.written.wait()

        waiters = [asyncio.create_task(written()), asyncio.create_task(ctx.stopped.wait())]
        try:
            await asyncio.wait(
                [*waiters, *self._pipeline.pending], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in waiters:
                task.cancel()

    async def _mutate(
        self,
        iteration: int,
        parent_id: str,
        rotation: list[str],
        best_at_start: str | None,
        broken: Sequence[str] = (),
    ) -> bool | None:
        ctx, ledger = self._ctx, self._ledger
        await ledger.learn_kinds(parent_id)
        pending = self._pipeline.pending
        async with ctx.lock:
            request = request_for(ctx, parent_id, rotation, broken)
            batch = self._s.batch_sampler.sample(request, ledger, self._d.rng)
            shown = ledger.take(parent_id, batch.minibatch, batch.context, accepting=bool(pending))
        if shown is None:  # what it would be shown is being fixed: wait for the new best
            await asyncio.wait(set(pending), return_when=asyncio.FIRST_COMPLETED)
            return None
        began = self._open[iteration] = time.monotonic()
        try:
            made = await self._reflect(iteration, shown, best_at_start)
        finally:
            del self._open[iteration]
            ledger.release(iteration, shown)
            await ctx.notify_written()
        if not made:
            await self._with_siblings(began)
        return made

    async def _with_siblings(self, began: float) -> None:
        """After an answer that made no candidate, wait a little for the answers to the
        proposals asked with it (a hosted model answers calls sent together within a moment
        of each other), so the next parent is chosen knowing what they found."""
        await self._ctx.while_written(
            lambda: any(abs(t - began) <= TOGETHER_S for t in self._open.values()),
            gather_deadline(began, time.monotonic()),
        )

    async def _reflect(self, iteration: int, shown: Shown, best_at_start: str | None) -> bool:
        """Ask the proposer for a child of the parent, shown ``shown``; hand it to acceptance."""
        d, parent_id = self._d, shown.parent_id
        await d.events.emit(
            "iteration",
            {
                "iteration": iteration,
                "parent": parent_id,
                "minibatch": shown.minibatch,
                "context": shown.context,  # other failures it is shown briefly
            },
        )
        parent = d.state.candidates[parent_id]
        parent_mb = await d.queue.evaluate(parent_id, parent.components, shown.minibatch)
        if all(r.reward is not None and r.reward >= 1.0 for r in parent_mb.values()):
            await d.events.emit(
                "skipped", {"iteration": iteration, "reason": "parent is perfect on the minibatch"}
            )
            return False
        notes = self._notes.for_parents((parent_id,))
        request = await self._request(iteration, shown, parent_mb, notes)
        try:
            child = await self._candidates.proposal(
                iteration, "mutation", (parent_id,), lambda: d.proposer.propose(request)
            )
            if child is None:
                return False
            self._notes.written(notes, child.candidate_id)
            entry = Waiting(
                iteration,
                child,
                parent_id,
                best_at_start,
                shown.minibatch,
                shown.context,
                adds=adds_words(parent, child),
            )
            self._pipeline.queue(entry)  # queued before it stops counting as written
            await self._baseline_in()
        finally:
            span = await self._candidates.written_out(iteration)
        await self._s.proposal.hand_over(self._pipeline, entry, parent_mb, span)
        return True

    async def _request(
        self,
        iteration: int,
        shown: Shown,
        parent_mb: Mapping[str, SeedResult],
        notes: Sequence[Note] = (),
    ) -> ProposalRequest:
        """What the proposer is asked: the parent, its minibatch, the frontier, other failures,
        and the notes of the person running the optimization."""
        d, ctx, parent_id = self._d, self._ctx, shown.parent_id
        names = [c.name for c in d.components]
        target = self._s.component_selector.select(iteration, parent_id, names)
        return ProposalRequest(
            program_description=d.description,
            components=d.components,
            parent=ctx.view(parent_id),
            evaluations=evaluations_of(parent_mb),
            frontier=tuple(ctx.view(c) for c in d.state.frontier.members() if c != parent_id),
            target_components=target,
            existing_hashes=self._candidates.settled_hashes(),
            train_evaluations=await self._ledger.brief(parent_id, shown.context),
            notes=as_request_notes(notes),
        )


def _conditions(condition: object) -> list[object]:
    """``condition`` and, inside a composite, every condition it holds."""
    inner = getattr(condition, "conditions", None)
    if inner is None:
        return [condition]
    return [c for part in inner for c in _conditions(part)]
