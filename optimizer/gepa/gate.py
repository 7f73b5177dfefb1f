"""The minibatch gate: does a child earn a full train evaluation?

A child is scored on its minibatch beside its parent(s), and the acceptance criterion
(:mod:`optimizer.gepa.strategies.acceptance`) judges it. While the criterion is undecided (a
tie under the strict rule: the same seeds, or one seed gained and another lost) both are
scored on more of the failures its proposal was shown (``MinibatchGate.extend``) until it
decides. A stack of several children's edits is judged on the whole train split at once
(``MinibatchGate.on_train``). A text that failed its gate may be gated again when a proposal
writes it again (``MinibatchGate.is_regatable``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from optimizer.gepa.context import SearchContext
from optimizer.gepa.strategies.acceptance import (
    ACCEPT,
    UNDECIDED,
    AcceptanceCriterion,
    total,
)
from optimizer.gepa.weighing import weigh
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import score_on_train
from schemas import BudgetExhausted, CandidateRecord

__all__ = ["MAX_REGATES", "MinibatchGate", "seed_changes"]

# A text written again after it failed its gate is gated again this many times at most.
MAX_REGATES = 2


def _rewards(results: Mapping[str, SeedResult]) -> dict[str, float | None]:
    return {s: r.reward for s, r in results.items()}


def _scored(results: Mapping[str, SeedResult]) -> dict[str, float]:
    return {s: r.reward for s, r in results.items() if r.reward is not None}


def seed_changes(
    parents: Sequence[Mapping[str, float | None]],
    child: Mapping[str, float | None],
    seeds: Sequence[str],
) -> dict[str, list[str]]:
    """The seeds where the child scored above its best parent (``better``) and below it
    (``worse``): what a gate's verdict rests on, for the ``gate`` event."""
    out: dict[str, list[str]] = {"better": [], "worse": []}
    for seed in seeds:
        mine = child.get(seed)
        theirs = [v for p in parents if (v := p.get(seed)) is not None]
        if mine is None or not theirs:
            continue
        if mine > max(theirs):
            out["better"].append(seed)
        elif mine < max(theirs):
            out["worse"].append(seed)
    return out


class MinibatchGate:
    """Gates children through the run's queue and records each verdict in the state.

    ``judges_ahead``: the gate also judges on the seeds that fill its round of rollouts (one
    proposal at a time); otherwise they are only scored ahead, on idle slots.
    """

    def __init__(
        self, ctx: SearchContext, criterion: AcceptanceCriterion, *, judges_ahead: bool
    ) -> None:
        self._ctx = ctx
        self._criterion = criterion
        self._judges_ahead = judges_ahead
        self._gating: set[str] = set()  # candidates being gated or scored right now
        self._gates: Counter[str] = Counter()  # gates each candidate went through

    def is_regatable(self, candidate_id: str) -> bool:
        """A child that failed its gate and is not being evaluated: it may be tried again.

        Proposers often write the same text again from another minibatch; a child rejected on
        one unlucky minibatch then gets a second gate, where its seeds already scored are
        cached (free), instead of being thrown away as a duplicate.
        """
        s = self._ctx.deps.state
        return (
            self._gates[candidate_id] <= MAX_REGATES
            and candidate_id in s.minibatch
            and candidate_id not in s.train
            and candidate_id not in s.partial
            and candidate_id not in s.contenders
            and candidate_id not in self._gating
            and candidate_id not in s.rejected
        )

    async def gate(
        self,
        iteration: int,
        child: CandidateRecord,
        parent: str | tuple[str, str],
        seeds: list[str],
        *,
        parent_mb: Mapping[str, SeedResult] | None = None,
        extension: Sequence[str] = (),
    ) -> bool:
        """Score ``child`` on ``seeds`` against its parent(s); whether the criterion accepts it.

        While the criterion is undecided, both are scored on the other failures its proposal
        was shown (``extension``) too, a minibatch at a time. The child's rollouts are reused
        by its full train evaluation if it passes.
        """
        d = self._ctx.deps
        parent_ids = (parent,) if isinstance(parent, str) else parent
        ahead = self._ahead(seeds, extension)
        more, prefetch = (ahead, []) if self._judges_ahead else ([], ahead)
        seeds = seeds + more
        results: list[Mapping[str, SeedResult]] = [
            {**parent_mb, **await d.queue.evaluate(p, d.state.candidates[p].components, more)}
            if parent_mb is not None
            else await d.queue.evaluate(p, d.state.candidates[p].components, seeds)
            for p in parent_ids
        ]
        if all(r.reward is not None and r.reward >= 1.0 for res in results for r in res.values()):
            await d.events.emit(
                "skipped",
                {
                    "iteration": iteration,
                    "candidate_id": child.candidate_id,
                    "reason": "the parent already solves every seed of this minibatch",
                },
            )
            async with self._ctx.lock:  # never scored: it may be gated again when written again
                d.state.minibatch.setdefault(child.candidate_id, {})
            return False
        self._gating.add(child.candidate_id)
        self._gates[child.candidate_id] += 1
        try:
            sent = await d.queue.evaluate(child.candidate_id, child.components, seeds + prefetch)
            first = {s: sent[s] for s in seeds}
            seeds, child_res = await self.extend(
                child, parent_ids, results, first, seeds, extension
            )
            parents, mine = [_rewards(r) for r in results], _rewards(child_res)
            accepted, why = weigh(
                d.state,
                self._criterion.judge(parents, mine, seeds) == ACCEPT,
                child=child.candidate_id, parents=parent_ids, scores=(parents, mine), seeds=seeds,
            )  # fmt: skip
            await self._record(
                iteration, child, parent_ids, (results, child_res), seeds, (accepted, why)
            )
        finally:
            self._gating.discard(child.candidate_id)
        return accepted

    def _ahead(self, seeds: list[str], extension: Sequence[str]) -> list[str]:
        """Train seeds the gate adds to the minibatch, to fill its round of rollouts.

        With one proposal in flight the minibatch leaves most of the concurrency idle for its
        round. Seeds sent in those slots (the extension first, then the rest of the train
        split) cost no extra round: the gate judges on them too (a noisy student then needs
        more than one lucky seed to pass a child), and a child that passes needs a round
        fewer for its full train evaluation. The parent's are cached.

        With several in flight, only the slots no other rollout holds or waits for are filled
        (a wave's one child is gated while the other proposals wait for it), and the gate still
        judges on its minibatch alone: the seeds ahead only save the round, so its decisions
        are those of a minibatch gate.
        """
        d = self._ctx.deps
        spare = d.config.concurrency - len(seeds)
        if not self._judges_ahead:
            spare = min(spare, d.queue.idle_slots() - len(seeds))
        room = d.budget.search_room()
        if room is not None:
            spare = min(spare, room - len(seeds))
        if spare <= 0:
            return []
        rest = [s for s in dict.fromkeys([*extension, *d.state.train_seeds]) if s not in seeds]
        return rest[:spare]

    async def extend(
        self,
        child: CandidateRecord,
        parent_ids: tuple[str, ...],
        results: list[Mapping[str, SeedResult]],
        child_res: Mapping[str, SeedResult],
        seeds: list[str],
        extension: Sequence[str],
    ) -> tuple[list[str], Mapping[str, SeedResult]]:
        """While the criterion is undecided, score the child and its parents on more
        ``extension`` seeds.

        Updates ``results`` (the parents' rollouts) in place; the parents' are cached when
        they were fully evaluated, so only the child's rollouts are paid.
        """
        d, seeds = self._ctx.deps, list(seeds)
        step = max(1, len(seeds))
        for at in range(0, len(extension), step):
            parents = [_rewards(r) for r in results]
            if self._criterion.judge(parents, _rewards(child_res), seeds) != UNDECIDED:
                break
            chunk = [s for s in extension[at : at + step] if s not in seeds]
            for i, p in enumerate(parent_ids):
                more = await d.queue.evaluate(p, d.state.candidates[p].components, chunk)
                results[i] = {**results[i], **more}
            more = await d.queue.evaluate(child.candidate_id, child.components, chunk)
            child_res = {**child_res, **more}
            seeds += chunk
        return seeds, child_res

    async def _record(
        self,
        iteration: int,
        child: CandidateRecord,
        parent_ids: tuple[str, ...],
        scored: tuple[list[Mapping[str, SeedResult]], Mapping[str, SeedResult]],
        seeds: list[str],
        verdict: tuple[bool, str],
    ) -> None:
        d, (results, child_res), (accepted, why) = self._ctx.deps, scored, verdict
        await d.events.emit(
            "gate",
            {
                "iteration": iteration,
                "candidate_id": child.candidate_id,
                "parent": parent_ids[0] if len(parent_ids) == 1 else list(parent_ids),
                "parent_score": max(total(_rewards(r), seeds) for r in results),
                "child_score": total(_rewards(child_res), seeds),
                "minibatch": seeds,
                "accepted": accepted,
                **({"weighed": why} if why else {}),
                **seed_changes([_rewards(r) for r in results], _rewards(child_res), seeds),
            },
        )
        async with self._ctx.lock:
            d.state.minibatch.setdefault(child.candidate_id, {}).update(_scored(child_res))
            if accepted:
                d.state.contenders.add(child.candidate_id)
                d.refresh_reserve()

    async def breaks(self, record: CandidateRecord, base: str) -> list[str]:
        """Score a stack first on the train seeds its base scores on, a round of rollouts at a
        time; the seeds it broke there (scored below its base) once a round shows any.

        Those are the seeds where its base is above the program's lowest reward, the only
        ones it can break: a stack with a bad edit is caught in the first rounds of its train
        evaluation instead of after it, and one that breaks none has paid for part of that
        evaluation (``on_train`` reuses the rollouts). A round is ``concurrency`` seeds,
        filled up with other train seeds; nothing more is scored once the budget left could
        not pay for a round.
        """
        d, cid = self._ctx.deps, record.candidate_id
        theirs = d.state.train.get(base, {})
        seeds, low = d.state.train_seeds, d.state.floor
        scoring = [s for s in seeds if theirs.get(s, low) > low]
        order = [*scoring, *(s for s in seeds if s not in scoring)]
        size = max(1, d.config.concurrency)
        mine: dict[str, float] = {}
        for at in range(0, len(scoring), size):
            chunk = order[at : at + size]
            room = d.budget.search_room()
            if room is not None and room < len(chunk):
                return []
            try:
                results = await d.queue.evaluate(cid, record.components, chunk)
            except BudgetExhausted:  # booked by another worker meanwhile: ``on_train`` decides
                return []
            mine.update(_scored(results))
            broken = [s for s in scoring if s in mine and mine[s] < theirs[s]]
            if broken:
                return broken
        return []

    async def on_train(self, iteration: int, record: CandidateRecord, base: str) -> bool:
        """Score a stack on every train seed at once; whether it beats ``base`` there.

        A stack carries several proposals' fixes and nearly always earns its train evaluation,
        so it skips the minibatch gate: the full evaluation takes as many rounds of rollouts
        as a gate and the rest of the train split would (fewer when the gate would extend),
        and it decides on every seed, which a noisy student needs (a few seeds can hide
        several fixes). What happens to one that is no better: ``Stacking.stack``.
        """
        d, cid = self._ctx.deps, record.candidate_id
        self._gating.add(cid)
        self._gates[cid] += 1
        try:
            await score_on_train(d, self._ctx.lock, cid)
        finally:
            self._gating.discard(cid)
        scores, parent = d.state.train.get(cid, {}), d.state.train.get(base, {})
        seeds = [s for s in d.state.train_seeds if s in scores and s in parent]
        accepted, why = weigh(
            d.state,
            self._criterion.judge([parent], scores, seeds) == ACCEPT,
            child=cid, parents=(base,), scores=([parent], scores), seeds=seeds,
        )  # fmt: skip
        await d.events.emit(
            "gate",
            {
                "iteration": iteration,
                "candidate_id": cid,
                "parent": base,
                "parent_score": total(parent, seeds),
                "child_score": total(scores, seeds),
                "minibatch": seeds,
                "accepted": accepted,
                "on_train": True,  # a stack, judged on every train seed at once
                **({"weighed": why} if why else {}),
                **seed_changes([parent], scores, seeds),
            },
        )
        if accepted:
            async with self._ctx.lock:
                d.state.contenders.add(cid)
                d.refresh_reserve()
        return accepted
