"""``optimize plan``: what a run will spend, measured on a few samples before the money is spent.

It serves a ``--module`` target in-process as a run does, reads the program, fits the plan to
the budget, then measures: the baseline on one train seed alone (it pays any cold start), on
twice ``together`` train seeds with ``together`` in flight, each sent as one returns (a
rollout's latency, the first of them to answer; how many the container answers at a time;
the student's tokens and dollars per rollout), and a few proposals written by the reflection model from
those rollouts, as many at once as the run writes (their latency, calls, tokens and dollars);
for a run that writes one at a time, each new child is scored on the same seeds (the share of
children that pass a gate). From these, :func:`optimizer.runtime.accounts.forecast.forecast`
predicts the run's figures, each with its assumption. Nothing is stored and no run is made,
except that a plan of a stored run is kept in its folder (``forecast.json``), where the run's
evidence compares it with what it spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from optimizer.checks.sample_rollouts import SampleOutcome, sample_rollouts
from optimizer.gepa.ledger import evaluations_of
from optimizer.runtime.accounts.forecast import Forecast, Run, Samples, forecast
from optimizer.runtime.accounts.objectives import StudentPricing
from optimizer.runtime.accounts.plan import RunPlan, plan_for
from optimizer.runtime.lifecycle.embedded import EmbeddedContainer
from optimizer.runtime.lifecycle.run_config import executed_config, metric_call_limit
from optimizer.runtime.results.forecast_check import FORECAST_FILE
from optimizer.runtime.rollouts.client import ContainerClient
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import ProposerLike
from proposer import CandidateView, ComponentSpec, ProposalRequest
from proposer.external import proposer_for
from schemas import (
    InvalidRollout,
    ModelUsage,
    Policy,
    Program,
    ProposerError,
    ProtocolViolation,
    RolloutFailed,
    RolloutRecord,
    RolloutRequest,
    RunConfig,
    UserError,
)
from transport.pricing import PriceTable

__all__ = ["FORECAST_FILE", "PlanReport", "make_plan", "render_plan"]

TOGETHER = 4  # sample rollouts sent at once (at most --concurrency)
MAX_PROPOSALS = 4  # sample proposals: the run's proposals in flight, at least 2, at most this


@dataclass(frozen=True)
class PlanReport:
    """A plan: the program, the budget and seeds, the samples and the forecast."""

    program_id: str
    limit: int
    plan: RunPlan
    samples: Samples
    forecast: Forecast
    problems: tuple[str, ...] = ()  # sample rollouts or proposals that failed

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: what ``--json`` prints and ``forecast.json`` holds."""
        return {
            "program_id": self.program_id,
            "metric_calls": self.limit,
            "seeds": {
                "train": len(self.plan.train),
                "holdout": len(self.plan.holdout),
                "val": len(self.plan.val),
            },  # fmt: skip
            "samples": asdict(self.samples),
            "forecast": self.forecast.as_dict(),
            "problems": list(self.problems),
            "made_at": time.time(),
        }


async def make_plan(
    config: RunConfig,
    *,
    http: httpx.AsyncClient | None = None,
    proposer: ProposerLike | None = None,
    together: int = TOGETHER,
    startup_s: float = 0.0,
) -> PlanReport:
    """Measure the samples and predict the run of ``config``; ``startup_s`` is how long this
    process took to start (a run's takes as long). ``UserError`` when the container cannot be
    reached or no sample rollout scores."""
    config = executed_config(config)
    token = config.container_token.get_secret_value() if config.container_token else None
    own = httpx.AsyncClient() if http is None else contextlib.nullcontext(http)
    async with own as client:
        if config.module:
            async with EmbeddedContainer(config, token=token) as url:
                sampler = await _Sampler.at(url, config, client, token)
                return await _plan(sampler, proposer, together, startup_s)
        if not config.containers:
            raise UserError("no task container: pass --container URL or --module MODULE")
        sampler = await _Sampler.at(config.containers[0].rstrip("/"), config, client, token)
        return await _plan(sampler, proposer, together, startup_s)


@dataclass(frozen=True)
class _Sampler:
    """Sends the plan's rollouts to one container URL, as a run sends them."""

    url: str
    program: Program
    config: RunConfig
    http: httpx.AsyncClient
    token: str | None

    @classmethod
    async def at(
        cls, url: str, config: RunConfig, http: httpx.AsyncClient, token: str | None
    ) -> _Sampler:
        client = ContainerClient([url], token=token, http=http)
        try:
            await client.check_health()
            program = await client.program()
        finally:
            await client.aclose()
        return cls(url, program, config, http, token)

    async def baseline(
        self, count: int, at_once: int | None = None
    ) -> tuple[list[SampleOutcome], float]:
        """The baseline on ``count`` train seeds, ``at_once`` in flight (None: all at once),
        and how long they took together."""
        started = time.perf_counter()
        outcomes = await sample_rollouts(
            self.url, self.program, self.config, http=self.http, token=self.token,
            count=count, run_id="plan", at_once=at_once,
        )  # fmt: skip
        return outcomes, time.perf_counter() - started

    async def score(self, components: dict[str, str], seeds: list[str]) -> float:
        """The summed reward of ``components`` on ``seeds`` (an errored rollout counts 0)."""
        client = ContainerClient([self.url], token=self.token, http=self.http)
        policy = Policy(model=self.config.task_model)

        async def one(seed: str) -> float:
            request = RolloutRequest(
                run_id="plan", candidate_id="plan-child", candidate=components, seed=seed,
                policy=policy, return_trace=False,
            )  # fmt: skip
            try:
                outcome, _ = await client.rollout(request, reward_range=self.program.reward_range)
            except (RolloutFailed, InvalidRollout, ProtocolViolation):
                return 0.0
            return outcome.response.reward if outcome is not None else 0.0

        try:
            return sum(await asyncio.gather(*(one(seed) for seed in seeds)))
        finally:
            await client.aclose()


async def _plan(
    sampler: _Sampler, proposer: ProposerLike | None, together: int, startup_s: float
) -> PlanReport:
    config, seeds = sampler.config, sampler.program.seeds
    limit = metric_call_limit(config, seeds)
    plan = plan_for(config, seeds, limit)
    first, _ = await sampler.baseline(1)
    # Two rounds through the slots, each sent as one returns, as a run's queue sends them: a
    # container that batches what arrives together answers a staggered stream more slowly.
    at_once = max(1, min(together, config.concurrency, len(seeds.train)))
    many, wall = await sampler.baseline(min(2 * at_once, len(seeds.train)), at_once)
    problems = [f"sample rollout {o.seed}: {o.problem}" for o in first + many if o.record is None]
    alone = [o.record for o in first if o.record is not None]
    wave = [o.record for o in many if o.record is not None]
    if not alone and not wave:
        raise UserError(
            "no sample rollout scored, so there is nothing to plan from: "
            + "; ".join(problems[:3])
            + " (`gepa-runtime optimize dry-run` with the same flags says how to fix it)"
        )
    count = min(MAX_PROPOSALS, max(2, config.proposals_in_flight or 1))
    written = await _proposals(sampler, wave or alone, proposer, count)
    samples = _samples(config, alone, wave, wall, written, startup_s, at_once)
    run = Run(limit, config.minibatch_size, config.proposals_in_flight or 1, config.concurrency,
              config.max_cost_usd)  # fmt: skip
    problems += [f"sample proposal: {p}" for p in written.problems]
    return PlanReport(
        sampler.program.program_id, limit, plan, samples, forecast(samples, plan, run),
        tuple(problems),
    )  # fmt: skip


def _samples(
    config: RunConfig,
    alone: list[RolloutRecord],
    wave: list[RolloutRecord],
    wall: float,
    written: _Written,
    startup_s: float,
    at_once: int,
) -> Samples:
    records = alone + wave
    pricing = StudentPricing(PriceTable(config.prices), config.task_model)
    costs = [pricing.cost(r.usage) for r in records]
    known = [c for c in costs if c is not None]
    # The wave's first answer: the lone rollout before it has paid any cold start (a
    # connection, a model server's first prompt), which the run pays once, not per rollout.
    latency = min(r.latency_ms for r in wave or alone) / 1000
    parallel = len(wave) * latency / wall if wave and wall > 0 else 1.0
    usages, n = written.usages, max(len(written.usages), 1)
    return Samples(
        rollouts=len(records) + written.children * len(wave or alone),
        latency_s=latency,
        together=at_once if wave else 0,
        parallel=round(parallel, 2),
        student_input_tokens=sum(r.usage.input_tokens for r in records) / len(records),
        student_output_tokens=sum(r.usage.output_tokens for r in records) / len(records),
        student_cost_usd=sum(known) / len(known) if len(known) == len(costs) else None,
        proposals=len(usages),
        proposal_s=written.seconds,
        reflection_calls=max(1.0, sum(u.calls for u in usages) / n),
        reflection_input_tokens=sum(u.input_tokens for u in usages) / n,
        reflection_output_tokens=sum(u.output_tokens for u in usages) / n,
        reflection_cost_usd=written.cost_usd,
        children=written.children,
        passed=written.passed,
        startup_s=round(startup_s, 2),
    )


@dataclass(frozen=True)
class _Written:
    """The sample proposals: their mean wall time, usages, dollars, and the children scored."""

    seconds: float | None
    usages: tuple[ModelUsage, ...]
    cost_usd: float | None  # per proposal; None: unknown
    children: int
    passed: int
    problems: tuple[str, ...]


async def _proposals(
    sampler: _Sampler, records: list[RolloutRecord], given: ProposerLike | None, count: int
) -> _Written:
    """``count`` proposals from the baseline's sample rollouts, written ``K`` at a time as the
    run writes them; with ``K`` = 1, each new child is scored on the same seeds against the
    baseline."""
    config, program = sampler.config, sampler.program

    def request(turn: int) -> ProposalRequest:
        # Each proposal sees the rollouts in another order, as each proposal of a run is shown
        # another minibatch: the same request would get the same answer from some models.
        shown = records[turn % len(records) :] + records[: turn % len(records)]
        results = {r.seed: SeedResult(seed=r.seed, record=r, cached=False) for r in shown}
        return ProposalRequest(
            program_description=program.description,
            components=tuple(
                ComponentSpec(c.name, c.kind, c.description) for c in program.components
            ),
            parent=CandidateView("baseline", program.baseline()),
            evaluations=evaluations_of(results),
            target_components=(program.components[0].name,),
        )

    at_once = max(1, min(config.proposals_in_flight or 1, count))
    with tempfile.TemporaryDirectory(prefix="gepa-plan-") as folder:
        proposer = given or proposer_for(config, work_dir=Path(folder))
        try:
            written: list[tuple[float, ModelUsage, bool, dict[str, str] | None, str]] = []
            while len(written) < count:
                turns = range(len(written), min(count, len(written) + at_once))
                written += await asyncio.gather(*(_one(proposer, request(i)) for i in turns))
        finally:
            if given is None:
                await proposer.aclose()
    # Scored only for a run that writes one proposal at a time: with several, children are
    # stacked and scored on train whatever their gate would say (forecast's docstring).
    children = (
        list({json.dumps(c, sort_keys=True): c for *_, c, _ in written if c}.values())
        if at_once == 1
        else []
    )
    base = sum(r.reward or 0.0 for r in records)
    scores = await asyncio.gather(*(sampler.score(c, [r.seed for r in records]) for c in children))
    usages = tuple(u for _, u, *_ in written)
    known = all(k for _, _, k, *_ in written)
    return _Written(
        seconds=sum(t for t, *_ in written) / len(written) if written else None,
        usages=usages,
        cost_usd=sum(u.cost_usd for u in usages) / len(usages) if known and usages else None,
        children=len(children),
        passed=sum(1 for score in scores if score > base),
        problems=tuple(why for *_, why in written if why),
    )


async def _one(
    proposer: ProposerLike, request: ProposalRequest
) -> tuple[float, ModelUsage, bool, dict[str, str] | None, str]:
    """One proposal: its wall time, usage, whether its cost is known, its child, what failed."""
    started = time.perf_counter()
    try:
        proposal = await proposer.propose(request)
    except ProposerError as exc:  # refused: it still took its time and its tokens
        return time.perf_counter() - started, exc.usage or ModelUsage(), False, None, str(exc)
    components = {**request.parent.components, **proposal.components}
    return time.perf_counter() - started, proposal.usage, proposal.cost_known, components, ""


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def render_plan(report: PlanReport) -> str:
    """The plan as the CLI prints it: each figure, then the assumption behind it."""
    f, s = report.forecast, report.samples
    rows = [
        ("container calls", f"{f.container_calls.value:,.0f}", f.container_calls.assumption),
        ("proposals", f"{f.proposals.value:,.0f}", f.proposals.assumption),
        ("reflection calls", f"{f.reflection_calls.value:,.0f}", f.reflection_calls.assumption),
        ("reflection tokens", f"{f.reflection_tokens.value:,.0f}", f.reflection_tokens.assumption),
        ("student tokens", f"{f.student_tokens.value:,.0f}", f.student_tokens.assumption),
        ("student dollars", _money(f.student_usd.value), f.student_usd.assumption),
        ("reflection dollars", _money(f.reflection_usd.value), f.reflection_usd.assumption),
        ("total dollars", _money(f.total_usd.value), f.total_usd.assumption),
        ("wall time", _duration(f.wall_s.value), f.wall_s.assumption),
    ]
    width = max(len(name) for name, _, _ in rows)
    out = [
        f"plan of {report.program_id}: {report.limit:,} metric calls, {len(report.plan.train)} "
        f"train / {len(report.plan.val)} val / {len(report.plan.holdout)} holdout seeds "
        f"(measured on {s.rollouts} sample rollouts and {s.proposals} sample proposals; "
        "nothing stored)",
        "",
    ]
    for name, value, why in rows:
        out.append(f"  {name:<{width}}  {value:>10}  {why}")
    if f.limited_by == "cost":
        out += ["", "  the run stops at --max-cost-usd before it spends its metric calls"]
    out += [f"  problem: {p}" for p in report.problems]
    return "\n".join(out)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    minutes = math.floor(seconds / 60)
    return f"{seconds:.0f} s" if minutes < 2 else f"{minutes} min {seconds - 60 * minutes:.0f} s"
