"""The GEPA search loop: sample a parent, reflect, gate on a minibatch, keep the frontier.

``proposals_in_flight`` workers share one queue, one budget and one frontier; every
read-modify-write of the shared state happens under one lock, so with one worker the loop
is strictly sequential and deterministic for a given seed. Each iteration's proposal is
logged in the run state, so a resumed run replays earlier iterations from the workspace
(cached rollouts, stored candidates) and pays for nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from optimizer.deps import ProposerLike, SearchDeps, score_on_train
from optimizer.dispatch import SeedResult
from optimizer.frontier import complementary_pairs, sample_parent
from optimizer.gate import gate_total, passes_gate
from optimizer.minibatch import MinibatchSampler
from proposer import (
    CandidateView,
    Evaluation,
    MergeRequest,
    Proposal,
    ProposalRequest,
)
from schemas import (
    BudgetExhausted,
    CandidateRecord,
    Origin,
    ProposerError,
    candidate_id_for,
    content_hash,
)

__all__ = ["GepaSearch", "ProposerLike", "SearchDeps"]

MERGE_MINIBATCH = 6


def _evaluations(results: Mapping[str, SeedResult]) -> tuple[Evaluation, ...]:
    return tuple(
        Evaluation(
            seed=r.seed,
            reward=r.reward,
            output=r.record.output,
            feedback=r.record.feedback or (r.record.error or ""),
            trace=r.record.trace,
            status=r.record.status,
        )
        for r in results.values()
    )


def _rewards(results: Mapping[str, SeedResult]) -> dict[str, float | None]:
    return {s: r.reward for s, r in results.items()}


def _scored(results: Mapping[str, SeedResult]) -> dict[str, float]:
    return {s: r.reward for s, r in results.items() if r.reward is not None}


class GepaSearch:
    """Runs iterations until a budget is reached or the search goes idle."""

    def __init__(self, deps: SearchDeps) -> None:
        self._d = deps
        self._lock = asyncio.Lock()
        self._sampler = MinibatchSampler(
            deps.state.train_seeds, deps.config.minibatch_size, deps.rng
        )
        self._iteration = 0
        self._merge_due = False
        self._merges = 0
        self._idle = 0
        self._stop: str | None = None

    @property
    def stop_reason(self) -> str | None:
        """Why the search ended (budget, idle)."""
        return self._stop

    async def run(self) -> str:
        """Search until stopped; returns the reason."""
        workers = [
            asyncio.create_task(self._worker()) for _ in range(self._d.config.proposals_in_flight)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
        return self._stop or "stopped"

    async def _worker(self) -> None:
        while self._stop is None:
            try:
                made = await self._step()
                self._idle = 0 if made else self._idle + 1
                if self._idle >= self._d.config.max_idle_iterations:
                    self._stop = (
                        f"no new candidate in {self._idle} iterations in a row "
                        "(proposals rejected, duplicates, or parents already perfect)"
                    )
            except BudgetExhausted as exc:
                self._stop = str(exc)

    def _view(self, candidate_id: str) -> CandidateView:
        record = self._d.state.candidates[candidate_id]
        wins = self._d.state.frontier.wins().get(candidate_id, ())
        diff = next(iter(record.diffs.values()), "")
        return CandidateView(
            candidate_id=candidate_id,
            components=dict(record.components),
            parents=tuple(record.parents),
            scores=dict(self._d.state.train.get(candidate_id, {})),
            wins=wins,
            diff_from_parent=diff,
        )

    async def _step(self) -> bool:
        """One iteration; True when it produced a new candidate."""
        self._d.budget.check_search()
        async with self._lock:
            self._iteration += 1
            iteration = self._iteration
            pairs = complementary_pairs(self._d.state.frontier)
            merging = (
                self._merge_due
                and self._d.config.use_merge
                and self._merges < self._d.config.max_merges
                and bool(pairs)
            )
            if merging:
                self._merge_due = False
                self._merges += 1
                pair = pairs[self._d.rng.randrange(len(pairs))]
            else:
                parent_id = sample_parent(self._d.state.frontier, self._d.rng)
            minibatch = self._sampler.next()
        if merging:
            return await self._merge(iteration, pair)
        return await self._mutate(iteration, parent_id, minibatch)

    async def _mutate(self, iteration: int, parent_id: str, minibatch: list[str]) -> bool:
        d = self._d
        parent = d.state.candidates[parent_id]
        await d.events.emit(
            "iteration", {"iteration": iteration, "parent": parent_id, "minibatch": minibatch}
        )
        parent_mb = await d.queue.evaluate(parent_id, parent.components, minibatch)
        if all(r.reward is not None and r.reward >= 1.0 for r in parent_mb.values()):
            await d.events.emit(
                "skipped", {"iteration": iteration, "reason": "parent is perfect on the minibatch"}
            )
            return False
        names = [c.name for c in d.components]
        target = (names[iteration % len(names)],) if len(names) > 1 else tuple(names)
        request = ProposalRequest(
            program_description=d.description,
            components=d.components,
            parent=self._view(parent_id),
            evaluations=_evaluations(parent_mb),
            frontier=tuple(self._view(c) for c in d.state.frontier.members() if c != parent_id),
            target_components=target,
            existing_hashes=frozenset(c.content_hash for c in d.state.candidates.values()),
        )
        child = await self._proposal(
            iteration, "mutation", (parent_id,), lambda: d.proposer.propose(request)
        )
        if child is None:
            return False
        child_mb = await d.queue.evaluate(child.candidate_id, child.components, minibatch)
        before, after = (
            gate_total(_rewards(parent_mb), minibatch),
            gate_total(_rewards(child_mb), minibatch),
        )
        accepted = passes_gate([_rewards(parent_mb)], _rewards(child_mb), minibatch)
        await d.events.emit(
            "gate",
            {
                "iteration": iteration,
                "candidate_id": child.candidate_id,
                "parent": parent_id,
                "parent_score": before,
                "child_score": after,
                "minibatch": minibatch,
                "accepted": accepted,
            },
        )
        async with self._lock:
            d.state.minibatch.setdefault(child.candidate_id, {}).update(_scored(child_mb))
        if accepted:
            await self._full_train(child.candidate_id)
        return True

    async def _merge(self, iteration: int, pair: tuple[str, str]) -> bool:
        d = self._d
        a, b = (d.state.candidates[c] for c in pair)
        wins = d.state.frontier.wins()
        differing = sorted(set(wins.get(a.candidate_id, ())) ^ set(wins.get(b.candidate_id, ())))
        seeds = differing[:MERGE_MINIBATCH] or self._sampler.next()
        await d.events.emit(
            "iteration", {"iteration": iteration, "merge": list(pair), "minibatch": seeds}
        )
        res_a = await d.queue.evaluate(a.candidate_id, a.components, seeds)
        res_b = await d.queue.evaluate(b.candidate_id, b.components, seeds)
        request = MergeRequest(
            program_description=d.description,
            components=d.components,
            a=self._view(a.candidate_id),
            b=self._view(b.candidate_id),
            evaluations_a=_evaluations(res_a),
            evaluations_b=_evaluations(res_b),
            existing_hashes=frozenset(c.content_hash for c in d.state.candidates.values()),
        )
        child = await self._proposal(iteration, "merge", pair, lambda: d.proposer.merge(request))
        if child is None:
            return False
        res_c = await d.queue.evaluate(child.candidate_id, child.components, seeds)
        best_parent = max(gate_total(_rewards(res_a), seeds), gate_total(_rewards(res_b), seeds))
        accepted = passes_gate(
            [_rewards(res_a), _rewards(res_b)], _rewards(res_c), seeds, merge=True
        )
        await d.events.emit(
            "gate",
            {
                "iteration": iteration,
                "candidate_id": child.candidate_id,
                "parent": list(pair),
                "parent_score": best_parent,
                "child_score": gate_total(_rewards(res_c), seeds),
                "minibatch": seeds,
                "accepted": accepted,
            },
        )
        if accepted:
            await self._full_train(child.candidate_id)
        return True

    async def _proposal(
        self,
        iteration: int,
        origin: Origin,
        parents: tuple[str, ...],
        call: Callable[[], Awaitable[Proposal]],
    ) -> CandidateRecord | None:
        """Replay the iteration's stored proposal or ask the proposer; store the candidate."""
        d = self._d
        key = str(iteration)
        if key in d.state.proposals:
            stored = d.state.proposals[key]
            return d.state.candidates.get(stored) if stored else None
        try:
            proposal = await call()
        except ProposerError as exc:
            d.budget.proposer_cost_usd = d.proposer_cost()
            d.state.proposals[key] = None
            await d.events.emit(
                "proposal_rejected",
                {
                    "iteration": iteration,
                    "parents": list(parents),
                    "reason": getattr(exc, "reason", "error"),
                    "message": str(exc)[:500],
                },
            )
            await d.checkpoint()
            return None
        d.budget.proposer_cost_usd = d.proposer_cost()
        components = {**d.state.candidates[parents[0]].components, **proposal.components}
        record = CandidateRecord(
            run_id=d.run_id,
            candidate_id=candidate_id_for(components),
            content_hash=content_hash(components),
            components=components,
            parents=list(parents),
            origin=origin,
            rationale=proposal.rationale,
            diffs=dict(proposal.diffs) or {parents[0]: proposal.diff},
            proposer_usage=proposal.usage,
        )
        await d.workspace.add_candidate(record)
        async with self._lock:
            d.state.add(record)
            d.state.proposals[key] = record.candidate_id
        await d.checkpoint()
        await d.events.emit(
            "candidate",
            {
                "candidate_id": record.candidate_id,
                "parents": record.parents,
                "origin": origin,
                "iteration": iteration,
                "rationale": record.rationale[:1000],
                "diff": proposal.diff[:4000],
                "mode": proposal.mode,
            },
        )
        return d.state.candidates[record.candidate_id]

    async def _full_train(self, candidate_id: str) -> None:
        await score_on_train(self._d, self._lock, candidate_id)
        self._merge_due = True
