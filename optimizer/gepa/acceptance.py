"""Acceptance: a child that passed its proposal is gated, and if it passes, scored on train.

Children are accepted one at a time, in the background while their writers write again.
What keeps parallel proposals as good as sequential ones happens here:

- **Stacking** (``optimizer.gepa.stacking``). Children waiting for the same base are
  replayed on it and judged as one candidate on the whole train split; a stack that broke
  seeds its base solved is stacked again without the children to blame.
  A child whose edit adds nothing (it only dropped or garbled text) is dropped when it was
  written with children that add something.
- **Rebasing.** A child written on the best while a sibling replaced that best is replayed on
  the new best and gated against it; one whose edit the best already has, or whose edit
  conflicts with what the best changed, is dropped.
- **Sideways children.** One that fixes its seeds but breaks a look-alike's, no better on
  the mean, is built on next, shown the seeds it broke (``follow_up``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.edits import adds_words
from optimizer.gepa.gate import Gate
from optimizer.gepa.merge3 import merge_components
from optimizer.gepa.parents import ancestors
from optimizer.gepa.showing import CONTEXT_PER_MINIBATCH, Showing
from optimizer.gepa.stacking import Stacking, Waiting
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import score_on_train
from schemas import BudgetExhausted, CandidateRecord

__all__ = ["CONFLICT", "REDUNDANT", "TOGETHER_S", "Acceptance", "Waiting", "gather_deadline"]


CONFLICT, REDUNDANT = "conflict", "redundant"  # why a rebase did not apply
# Proposals asked for within this many seconds of each other count as written together: a
# child waits for its siblings (at most GATHER_SHARE of its own writing time, GATHER_MAX_S)
# so that they are stacked and gated once (``Acceptance._gather``).
TOGETHER_S = 0.5
# A child that only dropped text must beat its parent by this many seeds' worth on the train
# seeds its gate did not pick, or it is hollow (``Acceptance.hollow``).
PROOF = 2
GATHER_SHARE = 0.25
GATHER_MAX_S = 2.0


def gather_deadline(began: float, ended: float) -> float:
    """How long to wait for the proposals asked together with one asked at ``began`` and
    answered at ``ended`` (``time.monotonic``): a share of its writing time, at most
    ``GATHER_MAX_S``."""
    return ended + min(GATHER_MAX_S, GATHER_SHARE * (ended - began))


class Acceptance:
    """Gates and accepts children in turn; keeps the follow-ups and the children in flight."""

    def __init__(
        self, ctx: SearchContext, gate: Gate, candidates: Candidates, showing: Showing
    ) -> None:
        self._ctx = ctx
        self._gate = gate
        self._candidates = candidates
        self._showing = showing
        self.waiting: list[Waiting] = []  # children queued for the context's ``accepting``
        self.pending: set[asyncio.Task[None]] = set()  # children being accepted
        # Accepted children that broke seeds their parent passed without beating it -> (the
        # seeds it broke, writers still to build on it, shown those first) (``follow_up``).
        self._follow: dict[str, tuple[list[str], int]] = {}
        self._followed: set[str] = set()  # children ever queued there: their turns are given once
        self.merge_due = False  # a child was accepted since the last merge
        self._stacking = Stacking(ctx, gate, candidates, self)

    def next_follow_up(self) -> tuple[str, list[str]] | None:
        """A sideways child to build on next and the seeds it broke, if one is queued.

        A child one of whose descendants now scores above it on train (a stack or merge of
        its edit with others) has been built on: the turns left on it are dropped, and the
        writers go where the search stands now.
        """
        for stale in [cid for cid in self._follow if self._outgrown(cid)]:
            del self._follow[stale]
        if not self._follow:
            return None
        parent_id = next(iter(self._follow))
        broken, left = self._follow.pop(parent_id)
        if left > 1:  # writers still to have their turn on it
            self._follow[parent_id] = (broken, left - 1)
        return parent_id, broken

    async def start(
        self,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None,
    ) -> None:
        """Accept ``entry`` now (one in flight) or in the background (several)."""
        accept = self._gate_and_accept(entry, parent_mb, span)
        if self._ctx.in_flight <= 1:
            await accept
            return
        # In flight: the child waits its turn to be gated and accepted in the background while
        # its worker writes its next proposal; every failure it was shown stays marked (its
        # edit may fix any of them), so the next proposals are shown other failures. An edit
        # that adds nothing is unlikely to fix them: they are shown to the next writers.
        shown = (*entry.minibatch, *entry.context) if entry.adds else ()
        targets = self._showing.failure_kinds(entry.parent_id, shown)
        self._showing.shown.update(targets)
        task = asyncio.create_task(self._settle(accept, targets))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _settle(self, accept: Awaitable[None], shown: Sequence[str]) -> None:
        try:
            await accept
        except BudgetExhausted as exc:
            self._ctx.halt(str(exc))
        finally:
            self._showing.shown.subtract(shown)

    async def _gate_and_accept(
        self,
        entry: Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None = None,
    ) -> None:
        """Gate a child once against what it would be stacked on; if it passes, score it on train.

        Those waiting for the same best are first tried together as one stacked candidate
        (``_stack``); otherwise the child is rebased when its best was replaced (``_accept_one``).
        A child whose edit adds nothing (``adds_words``) is dropped when siblings that add
        something were written with it: their stack is judged without it, and without the
        round of rollouts and the restack it would cost to find that it broke seeds. One
        alone is gated as any child is.
        """
        try:
            if span is not None:
                await self._gather(*span)
            if not entry.adds and self._adding_siblings(entry):
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
            self.waiting.remove(entry)

    def _adding_siblings(self, entry: Waiting) -> bool:
        """Whether another child on ``entry``'s base that adds something is still waiting or
        being stacked (it leaves ``waiting`` once settled)."""
        base = self.base_of(entry)
        return any(w is not entry and w.adds and self.base_of(w) == base for w in self.waiting)

    async def _gather(self, began: float, ended: float) -> None:
        """Wait a little for the proposals asked for together with the one asked at ``began``.

        Calls sent to a hosted model at the same moment answer within a moment of each other;
        the first child to arrive would otherwise be gated and scored alone, and its siblings
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
        if (onto := self._superseded(parent_id, entry.best_at_start)) is not None:
            rebased = await self._rebase(iteration, 0, child, parent_id, onto)
            if rebased in (REDUNDANT, CONFLICT):
                return
            if isinstance(rebased, CandidateRecord):
                parent_scores = d.state.train.get(parent_id, {})
                targets = [s for s in (*minibatch, *context) if parent_scores.get(s, 1.0) < 1.0]
                candidate, against, parent_mb = rebased, onto, None
                seeds, extension = await self._seeds_for(onto, targets, minibatch)
        if await self._gate.gate(
            iteration, candidate, against, seeds, parent_mb=parent_mb, extension=extension
        ):
            await self.full_train(candidate.candidate_id, against)

    def base_of(self, w: Waiting) -> str:
        """What a waiting child's edit is replayed on: the best that replaced its parent, if
        its parent was the best when it was asked, else its parent."""
        return self._superseded(w.parent_id, w.best_at_start) or w.parent_id

    def sideways(self, candidate_id: str, base: str) -> bool:
        """Whether a fully scored candidate ties ``base``'s train mean and wins other seeds."""
        s = self._ctx.deps.state
        mean, base_mean = s.train_mean(candidate_id), s.train_mean(base)
        return (
            mean is not None
            and base_mean is not None
            and abs(mean - base_mean) < 1e-9
            and candidate_id in s.frontier.members()
        )

    async def _seeds_for(
        self, parent_id: str, targets: Sequence[str], rotation: list[str]
    ) -> tuple[list[str], list[str]]:
        """Gate seeds for an edit (meant to fix ``targets``) rebased onto ``parent_id``.

        Targets that ``parent_id`` still fails show whether the edit still fixes something;
        seeds it passes catch regressions; its other failures are the extension. (The first
        minibatch may be solved entirely by the new parent, which would leave the gate
        nothing to show.)
        """
        async with self._ctx.lock:
            minibatch, context = self._showing.seeds(parent_id, rotation, share=False)
            scores = self._ctx.deps.state.train.get(parent_id, {})
            still = [s for s in targets if scores.get(s, 1.0) < 1.0]
            if not still:
                return minibatch, context
            size = len(rotation)
            passing = [s for s in minibatch + rotation if scores.get(s, 0.0) >= 1.0]
            chosen = still[: -(-size // 2)]
            seeds = list(dict.fromkeys(chosen + passing))[:size]
            extension = [s for s in dict.fromkeys(still + context) if s not in seeds]
            return seeds, extension[: CONTEXT_PER_MINIBATCH * size]

    def _superseded(self, parent_id: str, best_at_start: str | None) -> str | None:
        """The new best when the parent was the best at the start and has been replaced."""
        now = self._ctx.best_id()
        if parent_id == best_at_start and now is not None and now != parent_id:
            return now
        return None

    async def _rebase(
        self, iteration: int, attempt: int, child: CandidateRecord, parent_id: str, onto: str
    ) -> CandidateRecord | str:
        """``child``'s edit replayed on ``onto`` (a clean three-way merge), or why not.

        ``CONFLICT``: the child changed what the new best changed, another way (a rewrite
        of the text, or two edits of one sentence): the best's version already won, and
        keeping the child on a branch of the stale parent would send writers and merges
        after a line the search has left; it is dropped, and the failures it was shown are
        shown again while the best still has them. ``REDUNDANT``: the best already has the
        child's edit (or the rebased text exists), so the child would only pay a train
        evaluation to learn what is known.
        """
        d = self._ctx.deps
        parent, best = d.state.candidates[parent_id], d.state.candidates[onto]
        merged = merge_components(parent.components, best.components, child.components)
        if merged is None or merged == dict(best.components):
            why = CONFLICT if merged is None else REDUNDANT
            await d.events.emit(
                "rebase",
                {
                    "iteration": iteration,
                    "candidate_id": child.candidate_id,
                    "onto": onto,
                    "applied": False,
                    "reason": "conflict" if merged is None else "already in the best",
                    "dropped": True,
                },
            )
            return why
        rationale = (
            f"rebased: the edit of {child.candidate_id} (written on {parent_id}) replayed on "
            f"{onto}, the best candidate when it was done. {child.rationale}"
        )
        record = await self._candidates.derive(
            f"{iteration}r{attempt}",
            merged,
            (onto, child.candidate_id),
            rationale,
            "merge",
            iteration,
        )
        await d.events.emit(
            "rebase",
            {
                "iteration": iteration,
                "candidate_id": child.candidate_id,
                "onto": onto,
                "applied": record is not None,
                "rebased": record.candidate_id if record else None,
            },
        )
        if record is None and merged == dict(child.components):
            return child  # its edit held the best's already: the child itself is gated
        return record if record is not None else REDUNDANT

    async def full_train(self, candidate_id: str, against: str | tuple[str, str]) -> None:
        """Score an accepted candidate on every train seed; stop on full marks."""
        d = self._ctx.deps
        if candidate_id not in d.state.train:
            await score_on_train(d, self._ctx.lock, candidate_id)
        self.merge_due = True
        if isinstance(against, str):
            if self.hollow(candidate_id, against):
                self._showing.hollow.add(candidate_id)
            else:
                self.follow_up(candidate_id, against)
        scores = d.state.train.get(candidate_id, {})
        if len(scores) == len(d.state.train_seeds) and min(scores.values(), default=0.0) >= 1.0:
            reason = f"{candidate_id} scores full marks on every train seed"
            if candidate_id in self._showing.hollow:  # its parent's failures were slips
                reason += (
                    f" (it only dropped text and did not prove it: {self._ctx.best_id()} "
                    "stays the best)"
                )
            self._ctx.halt(reason, solved=True)

    def hollow(self, candidate_id: str, parent_id: str) -> bool:
        """Whether a fully scored child's edit adds nothing and it did not prove itself on
        train: it only dropped or garbled text, and beats its parent on the train seeds its
        gate did not pick by less than ``PROOF`` seeds' worth (a tie, a trade, or a gate
        passed by noise: a minibatch of seeds its parent failed, scored afresh).

        Proposals on it would be shown what it broke and write back what it dropped, so it
        is not built on (``Showing.hollow``), it is no answer to the failures its writer was
        shown (those stay open on its parent), and it is never the best
        (``SearchState.ranked``): a line the parent needed is worth more than a lucky draw.
        """
        s = self._ctx.deps.state
        child, parent = s.train.get(candidate_id), s.train.get(parent_id)
        if not child or not parent:
            return False
        if adds_words(s.candidates[parent_id], s.candidates[candidate_id]):
            return False
        gate = s.minibatch.get(candidate_id, {})
        fresh = [x for x in s.train_seeds if x not in gate and x in child and x in parent]
        margin = sum(child[x] - parent[x] for x in fresh)
        return margin < PROOF * (s.ceiling - s.floor) - 1e-9

    def give_back(self, candidate_id: str, broken: list[str]) -> None:
        """A follow-up turn taken by a writer that only waited (``Showing.choose``): it is
        the next free writer's."""
        _, left = self._follow.get(candidate_id, (broken, 0))
        self._follow[candidate_id] = (broken, left + 1)

    def _outgrown(self, candidate_id: str) -> bool:
        """Whether a candidate descending from ``candidate_id`` scores above it on train."""
        s = self._ctx.deps.state
        mean = s.train_mean(candidate_id)
        if mean is None:
            return False
        above = [cid for cid in s.train if (s.train_mean(cid) or 0.0) > mean + 1e-9]
        lineage = self._ctx.lineage() if above else {}
        return any(candidate_id in ancestors(lineage, cid) for cid in above)

    def follow_up(self, candidate_id: str, parent_id: str) -> None:
        """Queue a sideways child (it fixed seeds and broke as many others: a tie on the mean).

        Fixes interact: a new rule can win its own seeds and take over others' (two
        look-alike cases). The child is kept on the frontier for the seeds it wins, but only
        a next edit on it (one that tells the cases apart) pays off, and sampling parents by
        seeds won rarely picks a child that wins few. So the next free worker writes that edit,
        shown the seeds the child broke first.
        """
        s = self._ctx.deps.state
        child, parent = s.train.get(candidate_id, {}), s.train.get(parent_id, {})
        broken = [x for x in s.train_seeds if x in child and child[x] < parent.get(x, 0.0)]
        mean, parent_mean = s.train_mean(candidate_id), s.train_mean(parent_id)
        # A tie: it traded seeds with its parent. One worse on the mean lost more than it
        # won (an answer that dropped a rule, or a gate passed on a noisy minibatch).
        sideways = mean is not None and parent_mean is not None and abs(mean - parent_mean) < 1e-9
        if broken and sideways and candidate_id in s.frontier.members():
            if candidate_id in self._followed:  # a second writer wrote the same text: once
                return
            # Every writer free meanwhile builds on it, each shown its share of what it broke.
            self._followed.add(candidate_id)
            self._follow[candidate_id] = (broken, self._ctx.in_flight)
