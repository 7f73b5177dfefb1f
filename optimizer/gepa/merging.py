"""Merging: one candidate that keeps what two frontier candidates do well.

The merge strategy (:mod:`optimizer.gepa.strategies.merge`) says when and which two; this
part makes the merge. A clean three-way text merge on their common ancestor needs no
reflection call; otherwise the proposer is asked, shown both on the seeds where they differ.
A merge, like any child, is gated against both parents, then scored on train.
"""

from __future__ import annotations

import random

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.ledger import evaluations_of
from optimizer.gepa.merge3 import merge_components
from optimizer.gepa.parents import common_ancestor
from optimizer.gepa.strategies.merge import MergeStrategy, MergeView
from optimizer.gepa.train_stage import TrainStage
from proposer import MergeRequest
from schemas import CandidateRecord

__all__ = ["MERGE_MINIBATCH", "Merging"]

MERGE_MINIBATCH = 6


class Merging:
    """Asks the merge strategy when a merge is due, and writes, gates and accepts it."""

    def __init__(
        self,
        ctx: SearchContext,
        strategy: MergeStrategy,
        gate: MinibatchGate,
        candidates: Candidates,
        train: TrainStage,
    ) -> None:
        self._ctx = ctx
        self._strategy = strategy
        self._gate = gate
        self._candidates = candidates
        self._train = train
        self._made = 0  # merges asked for so far

    def due(self, rng: random.Random) -> tuple[str, str] | None:
        """The pair to merge now, if the strategy says a merge is due.

        Call under the context's lock: the strategy may draw from the run's ``random.Random``.
        """
        view = MergeView(
            frontier=self._ctx.deps.state.frontier,
            lineage=self._ctx.lineage(),
            accepted_since_last=self._train.accepted_since_merge,
            merges_so_far=self._made,
        )
        pair = self._strategy.pair(view, rng)
        if pair is None:
            return None
        self._train.accepted_since_merge = False
        self._made += 1
        return pair

    async def merge(self, iteration: int, pair: tuple[str, str], rotation: list[str]) -> bool:
        """Merge ``pair``; True when it made a candidate. It is shown the seeds where the two
        differ, or the iteration's ``rotation`` when they differ on none."""
        d = self._ctx.deps
        ranked = [cid for cid, _ in d.state.ranked(list(pair))]
        a, b = (d.state.candidates[c] for c in (ranked if len(ranked) == 2 else pair))
        wins = d.state.frontier.wins()
        differing = sorted(set(wins.get(a.candidate_id, ())) ^ set(wins.get(b.candidate_id, ())))
        seeds = differing[:MERGE_MINIBATCH] or rotation
        await d.events.emit(
            "iteration",
            {"iteration": iteration, "merge": [a.candidate_id, b.candidate_id], "minibatch": seeds},
        )
        child = await self.text_merge(iteration, a, b)
        if child is None:
            res_a = await d.queue.evaluate(a.candidate_id, a.components, seeds)
            res_b = await d.queue.evaluate(b.candidate_id, b.components, seeds)
            request = MergeRequest(
                program_description=d.description,
                components=d.components,
                a=self._ctx.view(a.candidate_id),
                b=self._ctx.view(b.candidate_id),
                evaluations_a=evaluations_of(res_a),
                evaluations_b=evaluations_of(res_b),
                existing_hashes=frozenset(c.content_hash for c in d.state.candidates.values()),
            )
            pair = (a.candidate_id, b.candidate_id)
            try:
                child = await self._candidates.proposal(
                    iteration, "merge", pair, lambda: d.proposer.merge(request)
                )
            finally:
                await self._candidates.written_out(iteration)
        if child is None:
            return False
        if await self._gate.gate(iteration, child, (a.candidate_id, b.candidate_id), seeds):
            async with self._ctx.accepting:
                await self._train.full_train(child.candidate_id, (a.candidate_id, b.candidate_id))
        return True

    async def text_merge(
        self, iteration: int, a: CandidateRecord, b: CandidateRecord
    ) -> CandidateRecord | None:
        """``a`` and ``b`` merged on their common ancestor with no reflection call, if clean."""
        d = self._ctx.deps
        base = common_ancestor(self._ctx.lineage(), a.candidate_id, b.candidate_id, d.state.order())
        if base is None:
            return None
        merged = merge_components(d.state.candidates[base].components, a.components, b.components)
        if merged is None or merged in (dict(a.components), dict(b.components)):
            return None
        rationale = (
            f"three-way text merge of {a.candidate_id} and {b.candidate_id} on their common "
            f"ancestor {base}: both edits kept, no reflection call"
        )
        return await self._candidates.derive(
            f"{iteration}m", merged, (a.candidate_id, b.candidate_id), rationale, "merge", iteration
        )
