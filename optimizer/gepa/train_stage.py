"""The train stage of acceptance: a child past its gate is scored on every train seed.

What it is scored against decides what happens next: a child tying its parent by trading
seeds is built on next (``LateralFollowUps``); one that only deleted text and did not prove
it is an *unproven deletion*, held back from the ranking and never built on; one with full
marks on every train seed stops the search (nothing can beat it).
"""

from __future__ import annotations

from optimizer.gepa.context import SearchContext
from optimizer.gepa.edits import adds_words
from optimizer.gepa.followups import LateralFollowUps
from optimizer.gepa.stopping import Stopping
from optimizer.gepa.strategies.stop_condition import Perfect
from optimizer.gepa.weighing import proven_by_rule
from optimizer.runtime.search.deps import score_on_train

__all__ = ["PROOF", "TrainStage"]

# A child that only deleted text must beat its parent by this many seeds' worth on the train
# seeds its gate did not pick, or it is an unproven deletion.
PROOF = 2


class TrainStage:
    """Scores accepted children on train and takes in what their scores say."""

    def __init__(self, ctx: SearchContext, stopping: Stopping, followups: LateralFollowUps) -> None:
        self._ctx = ctx
        self._stopping = stopping
        self._followups = followups
        self.accepted_since_merge = False  # a child was accepted since the last merge

    async def full_train(self, candidate_id: str, against: str | tuple[str, str]) -> None:
        """Score an accepted candidate on every train seed, against its parent(s)."""
        d, ctx = self._ctx.deps, self._ctx
        if candidate_id not in d.state.train:
            await score_on_train(d, ctx.lock, candidate_id)
        self.accepted_since_merge = True
        lateral = False
        if isinstance(against, str):
            if self.is_unproven_deletion(candidate_id, against):
                d.state.held_back.add(candidate_id)
            else:
                lateral = self._followups.offer(candidate_id, against)
        scores = d.state.train.get(candidate_id, {})
        perfect = None
        if len(scores) == len(d.state.train_seeds) and min(scores.values(), default=0.0) >= 1.0:
            # An unproven deletion with full marks: its parent's failures were slips.
            best = ctx.best_id() if candidate_id in d.state.held_back else None
            perfect = Perfect(candidate_id, best)
        self._stopping.scored(perfect)
        await self.verdict(candidate_id, against, lateral=lateral, perfect=perfect is not None)

    async def verdict(
        self,
        candidate_id: str,
        against: str | tuple[str, str],
        *,
        lateral: bool = False,
        perfect: bool = False,
    ) -> None:
        """Announce what a candidate's train scores made of it (the ``train_verdict`` event):
        its mean against its parent(s)', and whether it is held back as an unproven deletion,
        built on next as a lateral child, or solves every train seed."""
        s = self._ctx.deps.state
        parents = [against] if isinstance(against, str) else list(against)
        await self._ctx.deps.events.emit(
            "train_verdict",
            {
                "candidate_id": candidate_id,
                "against": parents,
                "mean": s.train_mean(candidate_id),
                "against_means": [s.train_mean(p) for p in parents],
                "held_back": candidate_id in s.held_back,
                "lateral": lateral,
                "perfect": perfect,
            },
        )

    def is_unproven_deletion(self, candidate_id: str, parent_id: str) -> bool:
        """Whether a fully scored child's edit adds nothing and it did not prove itself on
        train: it only deleted or garbled text, and beats its parent on the train seeds its
        gate did not pick by less than ``PROOF`` seeds' worth (a tie, a trade, or a gate
        passed by noise: a minibatch of seeds its parent failed, scored afresh).

        Proposals on it would be shown what it broke and write back what it deleted, so it is
        not built on, it is no answer to the failures its proposal was shown (those stay open
        on its parent), and it is never the best (``SearchState.held_back``): a line the
        parent needed is worth more than a lucky draw.
        """
        s = self._ctx.deps.state
        child, parent = s.train.get(candidate_id), s.train.get(parent_id)
        if not child or not parent:
            return False
        if adds_words(s.candidates[parent_id], s.candidates[candidate_id]):
            return False
        if proven_by_rule(s, candidate_id, parent_id):  # shorter (cheaper) at equal reward
            return False
        gate = s.minibatch.get(candidate_id, {})
        fresh = [x for x in s.train_seeds if x not in gate and x in child and x in parent]
        gained = sum(child[x] - parent[x] for x in fresh)
        return gained < PROOF * (s.ceiling - s.floor) - 1e-9

    def is_lateral(self, candidate_id: str, base: str) -> bool:
        """Whether a fully scored candidate ties ``base``'s train mean and wins other seeds."""
        s = self._ctx.deps.state
        mean, base_mean = s.train_mean(candidate_id), s.train_mean(base)
        return (
            mean is not None
            and base_mean is not None
            and abs(mean - base_mean) < 1e-9
            and candidate_id in s.frontier.members()
        )
