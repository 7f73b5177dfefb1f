"""Run lifecycle: one config in, a result out.

Phases: ``evaluating_baseline -> searching -> evaluating_best -> finalizing -> completed``
(or ``failed``), each transition an event. ``config.method`` picks the search of the
``searching`` phase from the ``searches`` registry it is given (see
:mod:`optimizer.runtime.search.strategy`); every other phase is shared. ``Run`` is one execution
of a stored run; :mod:`optimizer.runtime.lifecycle.runner` creates a run or resumes one by id and
executes it here; a resumed run replays its logged iterations from the workspace and pays
for no finished rollout twice. The config it executes comes from
:mod:`optimizer.runtime.lifecycle.run_config`.

One process executes a run at a time: it holds the run's lease
(:mod:`optimizer.runtime.lifecycle.lease`) from start to end. A cancelled run (Ctrl-C, SIGTERM, the
service's cancel) is recorded as ``cancelled`` and resumes by id. A resumed run must meet the
program it started on (same program id and components); a new fingerprint of that program is
reported and its rollouts are paid again (the cache key holds the fingerprint). The container is
asked for its program again at every phase and every ``PROGRAM_CHECK_S`` seconds: a run whose
container changed under it stops, since scores of two versions cannot be compared.

A person steers a run as it executes (:mod:`optimizer.runtime.steering`): the execution folds
the actions of its log when it starts (a run paused before a restart starts paused), reads
new ones while it runs, and hands them to the rollout queue (a pause), the search state (a
rejection, :mod:`optimizer.runtime.lifecycle.steered`) and the search (``SearchDeps.steering``).
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink, Listener
from optimizer.runtime.accounts.objectives import StudentPricing, directions_of
from optimizer.runtime.accounts.plan import RunPlan, plan_for
from optimizer.runtime.lifecycle.branch import branch_baseline, branched_program
from optimizer.runtime.lifecycle.guard import RunGuard
from optimizer.runtime.lifecycle.holdouts import BackgroundHoldouts
from optimizer.runtime.lifecycle.lease import HeldLease
from optimizer.runtime.lifecycle.program_check import ProgramWatch, check_resumed, check_splits
from optimizer.runtime.lifecycle.run_config import (
    budget_warning,
    executed_config,
    metric_call_limit,
    plan_event,
)
from optimizer.runtime.lifecycle.steered import SteeredRun
from optimizer.runtime.results.evidence import EvidenceInputs, write_evidence
from optimizer.runtime.results.promotion import Promotion, select_and_promote
from optimizer.runtime.results.stats import promotion_rng
from optimizer.runtime.rollouts.client import ContainerClient, client_for
from optimizer.runtime.rollouts.gate import ErrorGate
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.rollouts.seed_failures import SetAside
from optimizer.runtime.search.baseline import BaselineScores, score_baseline
from optimizer.runtime.search.deps import ProposerLike, SearchDeps
from optimizer.runtime.search.objectives import ObjectiveTable
from optimizer.runtime.search.selection import check_rule
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import SearchMethod, SearchStart
from optimizer.runtime.steering import RunSteering
from proposer import ComponentSpec
from proposer.external import proposer_for
from schemas import (
    CandidateRecord,
    ContainerError,
    Policy,
    Program,
    RunConfig,
    RunRecord,
    candidate_id_for,
    content_hash,
)
from transport.pricing import PriceTable
from workspace import Workspace

__all__ = ["PROGRAM_CHECK_S", "Run", "RunResult"]

PROGRAM_CHECK_S = 60.0  # how often a running run asks GET /program again, besides each phase
RUN_STATE_KEYS = ("budget", "seed_failures")  # the run's own, not the search method's


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    run_id: str
    status: str
    best_candidate_id: str
    baseline_candidate_id: str
    promoted: bool
    evidence_dir: Path
    evidence: dict[str, Any]


@dataclass(frozen=True)
class _Parts:
    """What the phases after planning share (one object instead of six parameters)."""

    program: Program
    plan: RunPlan
    budget: Budget
    proposer: ProposerLike
    state: SearchState
    base: CandidateRecord
    gate: ErrorGate


class Run:
    """One execution of a run record; holds what the phases share.

    ``config`` is the run's config as :func:`optimizer.runtime.lifecycle.run_config.executed_config`
    completes it; ``held`` the lease of the process executing it.
    """

    def __init__(
        self,
        config: RunConfig,
        record: RunRecord,
        workspace: Workspace,
        proposer: ProposerLike | None,
        http: httpx.AsyncClient | None,
        listeners: list[Listener],
        held: HeldLease | None = None,
        *,
        method: SearchMethod,
    ) -> None:
        config = executed_config(config)
        self.config = config
        self.method = method
        self.record = record
        self.workspace = workspace
        self.proposer = proposer
        self.http = http
        self.events = EventSink(workspace, record.run_id)
        for listener in listeners:
            self.events.subscribe(listener)
        self.rng = random.Random(config.seed)
        self.started = time.time()
        self.held = held
        self.watch: ProgramWatch | None = None  # set once the container served its program
        self.warnings: list[str] = []  # this execution's, for the report
        self.guard = RunGuard(record.run_id, workspace, self.events, held)
        self.steering = RunSteering(workspace, record.run_id)
        self.steered = SteeredRun(self.steering, workspace, self.events, record.run_id)

    async def phase(self, phase: str, **fields: Any) -> None:
        if self.watch is not None:
            await self.watch.check()
        await self.workspace.update_run(self.record.run_id, phase=phase, **fields)  # type: ignore[arg-type]
        await self.events.emit("phase", {"phase": phase})

    async def warn(self, message: str) -> None:
        """A ``warning`` event: logged with the run, shown on stderr by the CLI and in the report."""
        self.warnings.append(message)
        await self.events.emit("warning", {"message": message})

    async def guarded(self) -> RunResult:
        """``execute``, with how it ended recorded when it did not complete (failed,
        cancelled, taken over; :mod:`optimizer.runtime.lifecycle.guard`)."""
        return await self.guard.run(self.execute)

    async def execute(self) -> RunResult:
        """The run's phases, with a person's actions read as they come."""
        await self.steering.load()
        watch = asyncio.create_task(
            self.steering.watch(self.guard.halt), name=f"steering:{self.record.run_id}"
        )
        try:
            return await self._execute()
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    async def _execute(self) -> RunResult:
        cfg = self.config
        if self.held is not None and self.held.takeover is not None:
            previous, why = self.held.takeover.previous, self.held.takeover.reason
            await self.warn(f"took run {previous.run_id} over from {previous.describe()}: {why}")
        client = client_for(cfg, http=self.http, max_connections=max(cfg.concurrency * 2, 16))
        try:
            await client.check_health()
            program = await self._branched(await client.program())
            await self._check_resumed(program)
            self.watch = ProgramWatch(client, program, self.record.run_id, self.warn)
            every = asyncio.create_task(self.watch.every(PROGRAM_CHECK_S, self.guard.halt))
            try:
                return await self._with_program(client, program)
            finally:
                every.cancel()
        finally:
            await client.aclose()

    async def _branched(self, program: Program) -> Program:
        """The program as served, or for a branch with its origin candidate's texts as the
        baseline (:mod:`optimizer.runtime.lifecycle.branch`)."""
        branch = self.config.branch_of
        if branch is None:
            return program
        components = await branch_baseline(self.workspace, self.record.run_id, branch)
        return branched_program(program, components, branch)

    async def _check_resumed(self, program: Program) -> None:
        seeds = [
            c
            for c in await self.workspace.list_candidates(self.record.run_id)
            if c.origin == "seed"
        ]
        stored = list(seeds[0].components) if seeds else None
        warning = check_resumed(self.record, program, stored, self.config.containers)
        if warning:
            await self.warn(warning)

    async def _with_program(self, client: ContainerClient, program: Program) -> RunResult:
        """The phases against a served program: baseline, search, promotion, evidence."""
        parts = await self._prepare(program)
        async with self._queue(client, parts) as queue:
            await self.phase("evaluating_baseline")
            stop = await self._baseline_and_search(queue, parts)
            await self.phase("evaluating_best")
            promotion = await select_and_promote(
                queue=queue,
                state=parts.state,
                baseline_id=parts.base.candidate_id,
                plan=parts.plan,
                min_improvement=self.config.min_holdout_improvement,
                rng=promotion_rng(self.config.seed),
                events=self.events,
                directions=directions_of(parts.program),
            )
            await self.phase("finalizing")
            await self._checkpoint(parts)
            folder, packet = await self._write_evidence(queue, parts, stop, promotion)
        return await self._completed(parts, promotion, folder, packet)

    async def _prepare(self, program: Program) -> _Parts:
        """The plan and budget, the proposer, and the state with the baseline stored."""
        plan, budget = await self._plan(program)
        proposer = self.proposer or proposer_for(
            self.config, work_dir=self.workspace.run_dir(self.record.run_id) / "proposals"
        )
        state, base = await self._state(program, plan)
        return _Parts(program, plan, budget, proposer, state, base, self._gate(plan, state))

    def _gate(self, plan: RunPlan, state: SearchState) -> ErrorGate:
        """The gate on failed rollouts, with the seeds an earlier execution set aside."""
        cfg = self.config
        gate = ErrorGate(
            max_rate=cfg.max_error_rate,
            timeout_s=cfg.rollout_timeout_s,
            seeds=len({*plan.train, *plan.val, *plan.holdout}),
        )
        gate.restore(self.record.state.get("seed_failures"))
        for note in gate.set_aside.values():
            state.set_seed_aside(note)
        return gate

    async def _seed_set_aside(self, parts: _Parts, note: SetAside) -> None:
        """A seed failed for two candidates: out of the state, named, and checkpointed."""
        parts.state.set_seed_aside(note)
        if not parts.state.train_seeds:
            raise ContainerError(f"every train seed was set aside; the last: {note.describe()}")
        await self.warn(note.describe())
        await self._checkpoint(parts)

    def _queue(self, client: ContainerClient, parts: _Parts) -> RolloutQueue:
        """The run's one rollout queue: cache first, bounded concurrency, budget booked."""
        cfg = self.config
        return RolloutQueue(
            client=client,
            workspace=self.workspace,
            run_id=self.record.run_id,
            program=parts.program,
            budget=parts.budget,
            events=self.events,
            concurrency=cfg.concurrency,
            policy=Policy(model=cfg.task_model),
            error_gate=parts.gate,
            on_set_aside=functools.partial(self._seed_set_aside, parts),
            hold=self.steering.hold,
            pricing=parts.state.objectives.pricing,
            on_results=parts.state.objectives.observe,
        )

    async def _checkpoint(self, parts: _Parts) -> None:
        """Store what a resumed run replays: the budget, the search method's own state."""
        state = parts.state
        await self.workspace.update_run(
            self.record.run_id,
            state={
                "budget": parts.budget.snapshot(),
                "seed_failures": parts.gate.snapshot(),
                **state.extra,
            },
        )

    async def _baseline_and_search(self, queue: RolloutQueue, parts: _Parts) -> str:
        """The baseline (its holdout in the background), then the search; why it stopped."""
        holdouts = BackgroundHoldouts(
            queue, parts.state, parts.plan, parts.budget, parts.base.candidate_id, self.events
        )
        self.steered.refresh_reserve = holdouts.refresh_reserve
        baseline = await self._baseline(queue, parts, holdouts)
        await self.phase("searching")
        try:
            stop = await self._search(self._deps(queue, parts, holdouts), parts, baseline)
            await baseline.finish()
            await holdouts.wait()
        finally:
            await baseline.cancel()
            await holdouts.cancel()
            if self.proposer is None:  # made here (one given to the run is the caller's)
                await parts.proposer.aclose()
        await self.events.emit(
            "search_stopped", {"reason": stop, "budget": parts.budget.snapshot()}
        )
        return stop

    def _deps(self, queue: RolloutQueue, parts: _Parts, holdouts: BackgroundHoldouts) -> SearchDeps:
        """What the search is given: the run's shared parts, injected."""

        async def checkpoint() -> None:
            await self._checkpoint(parts)

        return SearchDeps(
            config=self.config,
            run_id=self.record.run_id,
            workspace=self.workspace,
            queue=queue,
            proposer=parts.proposer,
            budget=parts.budget,
            events=self.events,
            rng=self.rng,
            state=parts.state,
            components=tuple(
                ComponentSpec(c.name, c.kind, c.description) for c in parts.program.components
            ),
            description=parts.program.description,
            checkpoint=checkpoint,
            proposer_cost=lambda: parts.proposer.total_usage.cost_usd,
            refresh_reserve=holdouts.refresh_reserve,
            measure_if_settled=holdouts.settle_if_final,
            steering=self.steering,
        )

    async def _write_evidence(
        self, queue: RolloutQueue, parts: _Parts, stop: str, promotion: Promotion
    ) -> tuple[Path, dict[str, Any]]:
        """The evidence packet (``evidence.json``, ``report.md``) of the finished run."""
        inputs = EvidenceInputs(
            run_id=self.record.run_id,
            status="completed",
            config=self.record.config,
            method=self.method,
            program=parts.program,
            state=parts.state,
            baseline_id=parts.base.candidate_id,
            promotion=promotion,
            budget=parts.budget,
            proposer_usage=parts.proposer.total_usage,
            stop_reason=stop,
            started_at=self.started,
            plan=parts.plan,
            warnings=tuple(self.warnings),
        )
        return await write_evidence(inputs, self.workspace, queue)

    async def _completed(
        self, parts: _Parts, promotion: Promotion, folder: Path, packet: dict[str, Any]
    ) -> RunResult:
        """Mark the run completed, announce it, and say what it produced."""
        run_id = self.record.run_id
        await self.workspace.update_run(run_id, status="completed", phase="completed")
        await self.events.emit(
            "phase",
            {"phase": "completed", "evidence_dir": str(folder), "promoted": promotion.promoted},
        )
        return RunResult(
            run_id=run_id,
            status="completed",
            best_candidate_id=promotion.best_id,
            baseline_candidate_id=parts.base.candidate_id,
            promoted=promotion.promoted,
            evidence_dir=folder,
            evidence=packet,
        )

    async def _plan(self, program: Program) -> tuple[RunPlan, Budget]:
        """Check the program, fit the plan to the budget, restore the counters, announce it."""
        cfg, run_id, seeds = self.config, self.record.run_id, program.seeds
        self.method.prepare(cfg)  # e.g. a missing extra: refused before the baseline is paid
        check_splits(program, cfg)
        check_rule(cfg.select_rule(), directions_of(program))
        limit = metric_call_limit(cfg, seeds)
        plan = plan_for(cfg, seeds, limit)
        budget = Budget(max_calls=limit, max_cost_usd=cfg.max_cost_usd)
        counts = await self.workspace.count_trials(run_id)
        budget.paid, budget.errors = counts.get("paid", 0), counts.get("errors", 0)
        await self.workspace.update_run(
            run_id, program_id=program.program_id, fingerprint=program.fingerprint, status="running"
        )
        await self.events.emit("program", plan_event(cfg, program, plan, limit))
        large = budget_warning(cfg, seeds, limit)
        if large:
            await self.warn(large)
        return plan, budget

    async def _state(self, program: Program, plan: RunPlan) -> tuple[SearchState, CandidateRecord]:
        """The search state with every stored candidate, and the baseline's record."""
        run_id = self.record.run_id
        low, high = program.reward_range
        cfg = self.config
        state = SearchState(
            train_seeds=plan.train,
            floor=low,
            ceiling=high,
            objectives=ObjectiveTable(
                pricing=StudentPricing(PriceTable(cfg.prices), cfg.task_model),
                seeds=frozenset([*plan.train, *plan.val, *plan.holdout]),
            ),
            rule=cfg.select_rule(),
        )
        state.extra.update({k: v for k, v in self.record.state.items() if k not in RUN_STATE_KEYS})
        baseline = program.baseline()
        base = CandidateRecord(
            run_id=run_id,
            candidate_id=candidate_id_for(baseline),
            content_hash=content_hash(baseline),
            components=baseline,
            origin="seed",
        )
        await self.workspace.add_candidate(base)
        for record in await self.workspace.list_candidates(run_id):
            state.add(record)
        state.add(base)
        self.steered.attach(state)
        return state, base

    async def _baseline(
        self, queue: RolloutQueue, parts: _Parts, holdouts: BackgroundHoldouts
    ) -> BaselineScores:
        """The baseline on train now, and on holdout in the background (the reference).

        Holdout scores are needed only at promotion, so they are paid for while the first
        proposals are written instead of before, behind the search's own rollouts (a gate
        does not wait for them); their calls are booked here, before the search looks at
        its budget. With several proposals in flight, the search may start on the train
        split's first round, the rest scored behind it (:mod:`optimizer.runtime.search.baseline`).
        """
        cfg = self.config
        several = parts.plan.search and (cfg.proposals_in_flight or 1) > 1
        scores = await score_baseline(
            queue,
            parts.state,
            parts.budget,
            self.events,
            parts.base,
            first_round=cfg.concurrency if several else None,
            starts=functools.partial(self.method.starts_on_first_round, cfg),
        )
        await holdouts.start(parts.base.candidate_id)
        return scores

    async def _search(self, deps: SearchDeps, parts: _Parts, baseline: BaselineScores) -> str:
        """The method's search, or (when the plan has none) one unevaluated smoke proposal."""
        plan = parts.plan
        start = SearchStart(
            parts.program,
            parts.base.candidate_id,
            baseline.train,
            baseline if baseline.rest is not None else None,
        )
        if plan.search:
            deps.refresh_reserve()
            return await self.method.build(deps, start).run()
        return "; ".join(plan.skipped) + await self.method.without_search(deps, start)
