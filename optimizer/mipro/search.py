"""The MIPRO search: instructions x demo sets, chosen by a seeded TPE on minibatches.

Setup (once per run, kept in the run state so a resumed run reuses it): demo sets are
bootstrapped from the baseline's verified-correct train answers plus labelled train
examples; instruction candidates come from the reflection model, grounded in a summary of
the data. Then each trial asks TPE for (instruction, demo set), scores that candidate on a
minibatch through the rollout queue (cache first, budget booked), and tells TPE the score.
Every ``full_eval_every`` trials the best-so-far by minibatch mean is scored on the full
train split, which feeds the frontier that heldout selection reads; the search ends on the
budget (keeping room for a last full evaluation), after ``max_idle_iterations`` trials in a
row that only repeated (candidate, seed) pairs this search had already scored, or when a
person stops it (``gepa-runtime runs stop``: checked before each trial). A candidate a person
rejected is never the best-so-far; a paused run asks for no instructions until resumed.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from optimizer.mipro.demos import bootstrap_demos, build_demo_sets, labelled_demos, task_info
from optimizer.mipro.sampler import Ask, TrialSampler
from optimizer.mipro.surface import Surface
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import SearchDeps, score_on_train
from optimizer.runtime.search.frontier import mean_score
from optimizer.runtime.search.minibatch import MinibatchSampler
from proposer import ComponentSpec, InstructionRequest, InstructionSet, TaskExample
from proposer.guards import unified_diff
from schemas import (
    BudgetExhausted,
    CandidateRecord,
    Demo,
    ModelUsage,
    candidate_id_for,
    content_hash,
)

__all__ = ["InstructionSource", "MiproSearch"]


@runtime_checkable
class InstructionSource(Protocol):
    """What MIPRO needs of a proposer (``proposer.Proposer`` is one)."""

    async def instructions(self, request: InstructionRequest) -> InstructionSet:
        """Instruction candidates grounded in the data."""
        ...


class MiproSearch:
    """Runs MIPRO trials until the budget is reached or the search goes idle."""

    def __init__(
        self,
        deps: SearchDeps,
        *,
        surface: Surface,
        source: InstructionSource,
        baseline_id: str,
        baseline_train: Mapping[str, SeedResult],
    ) -> None:
        self._d = deps
        self._surface = surface
        self._source = source
        self._baseline_id = baseline_id
        self._baseline_train = baseline_train
        self._lock = asyncio.Lock()
        self._sampler = MinibatchSampler(
            deps.state.train_seeds, deps.config.minibatch_size, deps.rng, skip=deps.state.set_aside
        )
        self.instructions: list[str] = []
        self.demo_sets: list[tuple[Demo, ...]] = []
        self.trials: list[dict[str, Any]] = []
        self._seen: set[tuple[str, str]] = set()  # (candidate, seed) scored in this search

    async def run(self) -> str:
        """Set up, search, make sure the best is fully scored; returns why it stopped."""
        await self._setup()
        tpe = TrialSampler(len(self.instructions), len(self.demo_sets), seed=self._d.config.seed)
        idle, stop = 0, "stopped"
        try:
            while True:
                if (asked := self._d.steering.state.stop_reason) is not None:
                    stop = asked
                    break
                if not self._room_for_trial():
                    stop = "metric-call budget reached (room kept for the best's full train evaluation)"
                    break
                self._d.budget.check_search()
                new = await self._trial(tpe.ask(), tpe)
                idle = 0 if new else idle + 1
                if idle >= self._d.config.max_idle_iterations:
                    stop = (
                        f"{idle} trials in a row only repeated rollouts this search already "
                        "had (search space covered)"
                    )
                    break
                if len(self.trials) % self._d.config.full_eval_every == 0:
                    await self._score_best()
        except BudgetExhausted as exc:
            stop = str(exc)
        try:
            await self._score_best()
        except BudgetExhausted as exc:
            stop = f"{stop}; the best-so-far was not fully re-scored: {exc}"
        self._d.state.extra["mipro"] = {
            **self._d.state.extra.get("mipro", {}),
            "trials": self.trials,
        }
        return stop

    # -- setup ---------------------------------------------------------------------------

    async def _setup(self) -> None:
        d = self._d
        stored = d.state.extra.get("mipro")
        base = d.state.candidates[self._baseline_id].components
        if stored and "instructions" in stored:
            self.instructions = list(stored["instructions"])
            self.demo_sets = [tuple(Demo.model_validate(x) for x in s) for s in stored["demo_sets"]]
            info = stored.get("setup", {})
        else:
            info = await self._make_setup(base[self._surface.instruction])
        await d.events.emit(
            "mipro_setup",
            {
                "instructions": self.instructions,
                "demo_sets": [[x.model_dump(mode="json") for x in s] for s in self.demo_sets],
                **info,
            },
        )

    async def _make_setup(self, baseline_instruction: str) -> dict[str, Any]:
        d, cfg = self._d, self._d.config
        records = [r.record for r in self._baseline_train.values()]
        booted = bootstrap_demos(records)
        infos = [i for i in (task_info(r) for r in records) if i is not None]
        labelled = labelled_demos(infos, exclude=[seed for seed, _ in booted])
        rng = random.Random(cfg.seed + 31337)
        self.demo_sets = build_demo_sets(
            [demo for _, demo in booted],
            [demo for _, demo in labelled],
            count=cfg.num_demo_sets,
            max_demos=cfg.max_demos,
            rng=rng,
        )
        spec = next(
            (c for c in d.components if c.name == self._surface.instruction),
            ComponentSpec(self._surface.instruction, "prompt", d.description),
        )
        made = InstructionSet((), "", ModelUsage())
        if cfg.num_instructions > 1:
            await d.steering.hold()
            made = await self._source.instructions(
                InstructionRequest(
                    program_description=d.description,
                    component=spec,
                    baseline=baseline_instruction,
                    examples=tuple(TaskExample(i.input, i.expected) for i in infos),
                    count=cfg.num_instructions - 1,
                )
            )
            d.budget.proposer_cost_usd = d.proposer_cost()
        self.instructions = [baseline_instruction, *made.instructions]
        info = {
            "bootstrapped": len(booted),
            "labelled": len(labelled),
            "examples": len(infos),
            "summary": made.summary,
            "rejected": list(made.rejected),
        }
        d.state.extra["mipro"] = {
            "instructions": self.instructions,
            "demo_sets": [[x.model_dump(mode="json") for x in s] for s in self.demo_sets],
            "setup": info,
        }
        await d.checkpoint()
        return info

    # -- trials --------------------------------------------------------------------------

    def _room_for_trial(self) -> bool:
        room = self._d.budget.search_room()
        return room is None or room >= self._d.config.minibatch_size + len(
            self._d.state.train_seeds
        )

    async def _candidate(self, trial: int, instruction: int, demo_set: int) -> CandidateRecord:
        d = self._d
        base = d.state.candidates[self._baseline_id]
        components = self._surface.compose(
            base.components, self.instructions[instruction], self.demo_sets[demo_set]
        )
        cid = candidate_id_for(components)
        if cid in d.state.candidates:
            return d.state.candidates[cid]
        diff = unified_diff(base.components, components, self._baseline_id)
        record = CandidateRecord(
            run_id=d.run_id,
            candidate_id=cid,
            content_hash=content_hash(components),
            components=components,
            parents=[self._baseline_id],
            origin="mipro",
            rationale=f"instruction {instruction} + demo set {demo_set} "
            f"({len(self.demo_sets[demo_set])} demos)",
            diffs={self._baseline_id: diff},
        )
        await d.workspace.add_candidate(record)
        async with self._lock:
            d.state.add(record)
        await d.events.emit(
            "candidate",
            {
                "candidate_id": cid,
                "parents": record.parents,
                "origin": "mipro",
                "iteration": trial,
                "rationale": record.rationale,
                "diff": diff[:4000],
                "mode": "mipro",
            },
        )
        return record

    async def _trial(self, ask: Ask, tpe: TrialSampler) -> int:
        """One trial; returns how many of its (candidate, seed) pairs are new to this search.

        New, not paid: a resumed run replays its earlier trials from the cache, and those
        are progress through the search, not a sign that the space is exhausted.
        """
        d = self._d
        number = len(self.trials) + 1
        record = await self._candidate(number, ask.instruction, ask.demo_set)
        minibatch = self._sampler.next()
        results = await d.queue.evaluate(record.candidate_id, record.components, minibatch)
        scored = {s: r.reward for s, r in results.items() if r.reward is not None}
        score = sum(scored.values()) / len(scored) if scored else None
        tpe.tell(ask, score)
        async with self._lock:
            d.state.minibatch.setdefault(record.candidate_id, {}).update(scored)
        best = self._best()
        paid = sum(1 for r in results.values() if not r.cached)
        trial = {
            "trial": number,
            "candidate_id": record.candidate_id,
            "instruction": ask.instruction,
            "demo_set": ask.demo_set,
            "minibatch": minibatch,
            "score": score,
            "paid": paid,
            "best": best,
        }
        self.trials.append(trial)
        await d.events.emit("trial", trial)
        pairs = {(record.candidate_id, seed) for seed in minibatch}
        new = len(pairs - self._seen)
        self._seen |= pairs
        return new

    def _best(self) -> dict[str, Any] | None:
        """The candidate with the best mean over all its minibatch rollouts (earliest on ties)."""
        state = self._d.state
        ranked = [
            (mean_score(scores, list(scores)), i, cid)
            for i, (cid, scores) in enumerate(state.minibatch.items())
            if scores and cid in state.candidates and cid not in state.rejected
        ]
        if not ranked:
            return None
        score, _, cid = max(ranked, key=lambda t: (t[0] or 0.0, -t[1]))
        trial = next(
            (t["trial"] for t in self.trials if t["candidate_id"] == cid), len(self.trials) + 1
        )
        return {"candidate_id": cid, "score": score, "trial": trial}

    async def _score_best(self) -> None:
        best = self._best()
        if best is not None and best["candidate_id"] not in self._d.state.train:
            await score_on_train(self._d, self._lock, best["candidate_id"])
