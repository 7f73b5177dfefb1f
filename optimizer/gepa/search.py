"""The GEPA search loop: sample a parent, show it failures, reflect, gate, keep the frontier.

One iteration, as in DESIGN.md's loop:

    parent   = a frontier member, weighted by the train seeds it wins, one with failures
               nobody was shown first (``_parent``), or a sideways child to build on
               (``Acceptance.next_follow_up``), or, after an accepted child, a merge (``Merges``)
    shown    = a minibatch (half the parent's failures) and other failures (``Showing``)
    child    = the proposer's edit of the parent, stored (``Candidates``)
    accepted = the child beats its parent strictly on the minibatch (``Gate``), stacked with
               its siblings or rebased on a new best first (``Acceptance``), then scored on
               every train seed; the frontier is rebuilt (``score_on_train``)

``proposals_in_flight`` workers run this loop and share one queue, one budget and one
frontier; every read-modify-write of the shared state happens under one lock, so with one
worker the loop is strictly sequential and deterministic for a given seed. Each
iteration's proposal is logged in the run state, so a resumed run replays earlier iterations
from the workspace (cached rollouts, stored candidates) and pays for nothing twice.

The search stops on its budget, on full marks, after ``patience`` proposals found nothing
better, after ``max_idle_iterations`` made no candidate, when every failure of every
frontier member was shown and nothing new came of it (``CONVERGED``), or when every failure
of the best (and of the members that tie it) was shown and the model found nothing more to
change while the other members score below it (``NOTHING_TO_FIX``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from optimizer.gepa.acceptance import TOGETHER_S, Acceptance, Waiting, gather_deadline
from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.edits import adds_words
from optimizer.gepa.gate import Gate
from optimizer.gepa.merges import Merges
from optimizer.gepa.parents import sample_parent
from optimizer.gepa.showing import Showing, Shown, evaluations_of
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.baseline import BaselineScores
from optimizer.runtime.search.deps import SearchDeps
from proposer import ProposalRequest
from schemas import BudgetExhausted

__all__ = ["CONVERGED", "NOTHING_TO_FIX", "GepaSearch", "evaluations_of"]

CONVERGED = (
    "nothing left to show: every failure of every frontier candidate was shown to the "
    "reflection model, which proposed nothing new for the candidates not built on since"
)


NOTHING_TO_FIX = (
    "nothing to fix in the best: every failure of {best} (and of the candidates that tie it) "
    "was shown to the reflection model, which found nothing more to change, and every other "
    "frontier candidate scores below it on train"
)


class GepaSearch:
    """Runs iterations until a budget is reached or the search goes idle."""

    def __init__(self, deps: SearchDeps, scoring: BaselineScores | None = None) -> None:
        self._ctx = ctx = SearchContext.of(deps)
        self._d = deps
        self._scoring = scoring  # the baseline's train rest, while it is scored
        self._scored: asyncio.Task[None] | None = None  # its end, as this search takes it in
        if scoring is not None:
            ctx.unscored = scoring.unscored
        self._showing = Showing(ctx)
        self._gate = Gate(ctx)
        self._candidates = Candidates(ctx, self._gate, self._showing)
        self._acceptance = Acceptance(ctx, self._gate, self._candidates, self._showing)
        self.merges = Merges(ctx, self._gate, self._candidates, self._acceptance)
        self._iteration = 0
        self._idle = 0  # iterations in a row that made no candidate
        self._best_mean: float | None = None  # the best train mean when last improved
        self._since_better = 0  # proposals written since then (``_count_toward_patience``)
        self._open: dict[int, float] = {}  # iteration -> when shown, until its answer is in

    @property
    def stop_reason(self) -> str | None:
        """Why the search ended (budget, idle)."""
        return self._ctx.stop

    async def run(self) -> str:
        """Search until stopped; returns the reason."""
        if self._scoring is not None:
            self._scored = asyncio.create_task(self._take_in_baseline(self._scoring))
        workers = [asyncio.create_task(self._worker()) for _ in range(self._ctx.in_flight)]
        best = self._d.state.best()
        self._best_mean = best[1] if best else None
        pending = self._acceptance.pending
        try:
            await self._unless_baseline_fails(asyncio.gather(*workers))
            # children still being accepted in the background, unless nothing can beat the best
            while pending and not self._ctx.solved:
                await asyncio.gather(*list(pending))
        finally:
            for task in [*workers, *pending, *([self._scored] if self._scored else [])]:
                task.cancel()
        return self._ctx.stop or "stopped"

    async def _unless_baseline_fails(self, work: asyncio.Future[list[None]]) -> None:
        """Until ``work`` is done; a failure of the baseline's rest (its error rate passed
        the limit, say) ends the search at once with that error, though no writer is back
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
        (the first writers saw its first round's), every train seed may be a passing seed of
        a minibatch, and patience counts from its full mean."""
        await scoring.finish()
        async with self._ctx.lock:
            self._ctx.unscored = frozenset()
            await self._showing.relearn_kinds(scoring.candidate_id)
            best = self._d.state.best()
            self._best_mean = best[1] if best else None

    async def _baseline_in(self) -> None:
        """Until the baseline's whole train split is scored and taken in: a child is judged
        against its parent's full train scores."""
        if self._scored is not None:
            await asyncio.shield(self._scored)

    async def _worker(self) -> None:
        while self._ctx.stop is None:
            try:
                made = await self._step()
                if made is None:  # it only waited
                    continue
                self._count_toward_patience()
                if not made and self._acceptance.pending:
                    continue  # repeated a fix still being accepted: the search is not stuck
                self._idle = 0 if made else self._idle + 1
                if self._idle >= self._d.config.max_idle_iterations:
                    self._ctx.halt(
                        f"no new candidate in {self._idle} iterations in a row "
                        "(proposals rejected, duplicates, or parents already perfect)"
                    )
            except BudgetExhausted as exc:
                self._ctx.halt(str(exc))

    def _count_toward_patience(self) -> None:
        """One more proposal written; stop after ``patience`` in a row found nothing better.

        Counted when a proposal is written, reset when the best train mean rises (a child
        accepted in the background counts for the proposals written meanwhile). A search
        whose best has stopped moving would otherwise spend the rest of its budget on
        reflections and gates that change nothing.
        """
        best = self._d.state.best()
        mean = best[1] if best else None
        if mean is not None and (self._best_mean is None or mean > self._best_mean):
            self._best_mean, self._since_better = mean, 0
            return
        self._since_better += 1
        patience = self._d.config.patience
        if patience and self._since_better >= patience:
            self._ctx.halt(
                f"no better candidate in the last {self._since_better} proposals "
                f"(--patience {patience}; the best train mean stayed {self._best_mean:.3f})"
            )

    async def _step(self) -> bool | None:
        """One iteration; True when it produced a new candidate, None when it only waited.

        A step that only waits takes no iteration number and no minibatch: how often a
        writer woke while others wrote (a matter of timing) does not move the rotation.
        """
        self._check_room()
        await self._settle_if_final()
        parent_id: str | None = None
        async with self._ctx.lock:
            pair = self.merges.due()
            follow = None
            if pair is None:
                follow = self._acceptance.next_follow_up()
                parent_id, broken = follow if follow else (self._parent(), [])
            if pair is not None or parent_id is not None:
                self._iteration += 1
                iteration = self._iteration
                minibatch = self._ctx.sampler.next()
                best_at_start = self._ctx.best_id()
        if pair is not None:
            return await self.merges.merge(iteration, pair)
        if parent_id is None:  # nothing new to show yet: wait for news (at once if halted)
            await self._news()
            return None
        made = await self._mutate(iteration, parent_id, minibatch, best_at_start, broken)
        if made is None and follow:  # it only waited: the turn is the next writer's
            self._acceptance.give_back(parent_id, broken)
        return made

    def _check_room(self) -> None:
        """Raise ``BudgetExhausted`` when the budget left could not score a new child past its
        gate: its minibatch would take every call left, so the reflection would buy nothing
        but a gate (the last reflection of a run; 4.3 s of a 66 s race run with one in
        flight)."""
        d = self._d
        d.budget.check_search()
        room = d.budget.search_room()
        gate = self._ctx.sampler.size
        if room is not None and room <= gate:
            raise BudgetExhausted(
                f"metric-call budget reached: {room} left for search, no more than a new "
                f"child's gate of {gate} rollouts ({d.budget.paid} paid of {d.budget.max_calls})"
            )

    async def _settle_if_final(self) -> None:
        """With one proposal in flight, tell the run how many train seeds a new child could
        still be scored on when the budget left is less than the train split: if too few for
        it to be chosen, the winner is settled, its holdout evaluation starts, and the search
        stops (``SearchDeps.measure_if_settled``): a last proposal could not change the winner,
        only take a reflection's time and the budget's tail (4.6 s of a 60 s race run). With
        several in flight, children already gated may still take the best's place, so nothing
        is settled.
        """
        d = self._d
        room = d.budget.search_room()
        if self._ctx.in_flight == 1 and room is not None and room < len(d.state.train_seeds):
            settled = await d.measure_if_settled(room)
            if settled is not None:
                raise BudgetExhausted(f"metric-call budget: {settled}")

    def _parent(self) -> str | None:
        """A frontier member to propose on (``sample_parent``), one with failures nobody was
        shown first; ``None`` when every member's failures were all shown, or nothing is
        left to fix in the best (``_nothing_to_fix``).

        Then what is being written or accepted may bring new failures (the caller waits for
        it); with nothing in flight the search halts when every member is spent
        (``Showing.spent``), else a new round starts on the others (their failures may be
        shown once more).

        A best nobody was shown yet in this round goes before the drawn member; the draw is
        made all the same, so that the rng, and every later choice, are those of a run where
        the best was drawn.
        """
        showing, frontier = self._showing, self._d.state.frontier
        members, exhausted = set(frontier.wins()), showing.exhausted()
        if self._nothing_to_fix(members):
            return None
        if members <= exhausted:
            if showing.writers or self._acceptance.pending:
                return None
            spent = showing.spent(members)
            if members <= spent:
                self._ctx.halt(CONVERGED)
                return None
            showing.new_round(members - spent)
            exhausted = showing.exhausted()
        drawn = sample_parent(frontier, self._d.rng, showing.repeats, exhausted=exhausted)
        best = self._ctx.best_id()
        if best in members and best not in exhausted and showing.unasked(best):
            return best
        return drawn

    def _nothing_to_fix(self, members: set[str]) -> bool:
        """True when the reflection model found nothing to fix in the best and in the
        members that tie it (``Showing.found_nothing``), and every other frontier member
        scores below them on train: no proposal starts, and the search halts once nothing
        is being written or accepted (what comes may still change the best).

        Those members win their seeds from a weaker text: by noise (a student that is right
        only most of the time), or by an edit that broke more than it fixed. Proposals on
        them would chase those seeds while the best stays where it is; a writer freed while
        another still writes waits for it rather than start one. A member that ties the best
        keeps the search going (two look-alike rules trading seeds) until nothing was found
        to fix in it either, or it was built on and its child that ties found nothing (the
        fix the best's failures asked for, which tied it by noise).
        """
        state, ranked = self._d.state, self._d.state.best()
        if ranked is None:
            return False
        best, top = ranked
        if not members - {best}:  # alone: ``CONVERGED`` says it
            return False
        tops = {best} | {m for m in members if (state.train_mean(m) or 0.0) >= top}
        if not self._showing.found_nothing(tops):
            return False
        if not (self._showing.writers or self._acceptance.pending):
            self._ctx.halt(NOTHING_TO_FIX.format(best=best))
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
                [*waiters, *self._acceptance.pending], return_when=asyncio.FIRST_COMPLETED
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
        await self._showing.learn_kinds(parent_id)
        pending = self._acceptance.pending
        async with self._ctx.lock:
            shown = self._showing.choose(parent_id, rotation, broken, accepting=bool(pending))
        if shown is None:  # what it would be shown is being fixed: wait for the new best
            await asyncio.wait(set(pending), return_when=asyncio.FIRST_COMPLETED)
            return None
        began = self._open[iteration] = time.monotonic()
        try:
            made = await self._reflect(iteration, shown, best_at_start)
        finally:
            del self._open[iteration]
            self._showing.done(iteration, shown)
            await self._ctx.notify_written()
        if not made:
            await self._with_siblings(began)
        return made

    async def _with_siblings(self, began: float) -> None:
        """After an answer that made no candidate, wait a little for the answers to the
        proposals asked with it (a hosted model answers calls sent together within a moment
        of each other), so the next parent is chosen knowing what they found.

        Kind noisy race seed 2: three writers on the best answered "unchanged" at once; the
        first one taken in started on a member below the best before the other two were,
        and with them the best had nothing left to fix (4 s to the stop).
        """
        await self._ctx.while_written(
            lambda: any(abs(t - began) <= TOGETHER_S for t in self._open.values()),
            gather_deadline(began, time.monotonic()),
        )

    async def _reflect(self, iteration: int, shown: Shown, best_at_start: str | None) -> bool:
        """Ask the proposer for a child of the parent, shown ``shown``; accept it in turn."""
        d, parent_id = self._d, shown.parent_id
        await d.events.emit(
            "iteration",
            {"iteration": iteration, "parent": parent_id, "minibatch": shown.minibatch},
        )
        parent = d.state.candidates[parent_id]
        parent_mb = await d.queue.evaluate(parent_id, parent.components, shown.minibatch)
        if all(r.reward is not None and r.reward >= 1.0 for r in parent_mb.values()):
            await d.events.emit(
                "skipped", {"iteration": iteration, "reason": "parent is perfect on the minibatch"}
            )
            return False
        request = await self._request(iteration, shown, parent_mb)
        try:
            child = await self._candidates.proposal(
                iteration, "mutation", (parent_id,), lambda: d.proposer.propose(request)
            )
            if child is None:
                return False
            entry = Waiting(
                iteration,
                child,
                parent_id,
                best_at_start,
                shown.minibatch,
                shown.context,
                adds=adds_words(parent, child),
            )
            self._acceptance.waiting.append(entry)  # queued before it stops counting as written
            await self._baseline_in()
        finally:
            span = await self._candidates.written_out(iteration)
        await self._acceptance.start(entry, parent_mb, span)
        return True

    async def _request(
        self, iteration: int, shown: Shown, parent_mb: Mapping[str, SeedResult]
    ) -> ProposalRequest:
        """What the proposer is asked: the parent, its minibatch, the frontier, other failures."""
        d, ctx, parent_id = self._d, self._ctx, shown.parent_id
        names = [c.name for c in d.components]
        target = (names[iteration % len(names)],) if len(names) > 1 else tuple(names)
        return ProposalRequest(
            program_description=d.description,
            components=d.components,
            parent=ctx.view(parent_id),
            evaluations=evaluations_of(parent_mb),
            frontier=tuple(ctx.view(c) for c in d.state.frontier.members() if c != parent_id),
            target_components=target,
            existing_hashes=self._candidates.settled_hashes(),
            train_evaluations=await self._showing.brief(parent_id, shown.context),
        )
