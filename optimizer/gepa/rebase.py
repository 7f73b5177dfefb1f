"""Rebasing: a child written on the best while a sibling replaced it is replayed on the new best.

With several proposals in flight, the best may change while a proposal on it is written. The
child's edit is then replayed on the new best (a clean three-way merge) and gated against
it; one whose edit the best already has, or whose edit conflicts with what the best changed,
is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.ledger import FailureLedger
from optimizer.gepa.merge3 import merge_components
from optimizer.gepa.strategies.batch_sampler import (
    CONTEXT_PER_MINIBATCH,
    BatchSampler,
    request_for,
)
from schemas import CandidateRecord

__all__ = ["CONFLICT", "REDUNDANT", "Rebaser"]

CONFLICT, REDUNDANT = "conflict", "redundant"  # why a rebase did not apply


class Rebaser:
    """Replays a stale child's edit on the new best and chooses its gate's seeds."""

    def __init__(
        self,
        ctx: SearchContext,
        candidates: Candidates,
        ledger: FailureLedger,
        sampler: BatchSampler,
    ) -> None:
        self._ctx = ctx
        self._candidates = candidates
        self._ledger = ledger
        self._sampler = sampler

    async def rebase(
        self, iteration: int, attempt: int, child: CandidateRecord, parent_id: str, onto: str
    ) -> CandidateRecord | str:
        """``child``'s edit replayed on ``onto`` (a clean three-way merge), or why not.

        ``CONFLICT``: the child changed what the new best changed, another way (a rewrite
        of the text, or two edits of one sentence): the best's version already won, and
        keeping the child on a branch of the stale parent would send proposals and merges
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

    async def seeds_for(
        self, parent_id: str, targets: Sequence[str], rotation: list[str]
    ) -> tuple[list[str], list[str]]:
        """Gate seeds for an edit (meant to fix ``targets``) rebased onto ``parent_id``.

        Targets that ``parent_id`` still fails show whether the edit still fixes something;
        seeds it passes catch regressions; its other failures are the extension. (The first
        minibatch may be solved entirely by the new parent, which would leave the gate
        nothing to show.)
        """
        ctx = self._ctx
        async with ctx.lock:
            state = ctx.deps.state
            request = request_for(ctx, parent_id, rotation, share=False)
            batch = self._sampler.sample(request, self._ledger, ctx.deps.rng)
            minibatch, context = batch.minibatch, batch.context
            scores = state.train.get(parent_id, {})
            still = [s for s in targets if scores.get(s, 1.0) < 1.0]
            if not still:
                return minibatch, context
            size = len(rotation)
            passing = [s for s in minibatch + rotation if scores.get(s, 0.0) >= 1.0]
            chosen = still[: -(-size // 2)]
            seeds = list(dict.fromkeys(chosen + passing))[:size]
            extension = [s for s in dict.fromkeys(still + context) if s not in seeds]
            return seeds, extension[: CONTEXT_PER_MINIBATCH * size]
