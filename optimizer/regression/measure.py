"""Score both sides of a check on the same seeds, through the rollout cache.

Every (side, seed) is looked up in the workspace's rollout cache first, under the key a run
uses (program fingerprint, candidate texts, seed, policy), so what a run or an earlier check
paid for is read, not paid again: checking the same pair twice costs nothing. The misses are
counted before anything is sent and refused whole when they pass ``max_calls``; the rest are
sent ``concurrency`` at a time through the run's container client (its retries and backoff)
and each is committed to the cache as soon as it is scored. A rollout that still fails is
left out of the pairing, as the promotion leaves out an errored seed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from optimizer.regression.sources import Side
from optimizer.runtime import ContainerClient, scored_record
from schemas import (
    InvalidRollout,
    Policy,
    Program,
    RolloutFailed,
    RolloutRecord,
    RolloutRequest,
    UserError,
    cache_key,
    content_hash,
    policy_key,
)
from workspace import Workspace

__all__ = ["Measured", "measure"]


@dataclass
class Measured:
    """Each side's rewards by seed, what it cost, and the seeds whose rollouts failed."""

    scores: dict[str, dict[str, float]]  # side -> seed -> reward
    paid: int = 0
    cached: int = 0
    errors: dict[str, dict[str, str]] = field(default_factory=dict)  # side -> seed -> error


@dataclass(frozen=True)
class _Job:
    side: str
    seed: str
    key: str


async def measure(
    *,
    client: ContainerClient,
    workspace: Workspace,
    program: Program,
    sides: dict[str, Side],
    seeds: Sequence[str],
    policy: Policy,
    check_id: str,
    concurrency: int,
    max_calls: int | None,
) -> Measured:
    """Score every side on every seed (cache first); ``UserError`` before any rollout when
    the misses do not fit ``max_calls``."""
    pkey = policy_key(policy)
    jobs = [
        _Job(name, seed, cache_key(program.fingerprint, content_hash(side.components), seed, pkey))
        for name, side in sides.items()
        for seed in seeds
    ]
    hits = await workspace.lookup_many(list({j.key for j in jobs}))
    misses = list({j.key: j for j in jobs if j.key not in hits}.values())  # a text once
    if max_calls is not None and len(misses) > max_calls:
        raise UserError(
            f"the check needs {len(misses)} paid rollouts ({len(jobs) - len(misses)} of "
            f"{len(jobs)} are cached) and --max-metric-calls is {max_calls}: raise it to "
            f"{len(misses)}, or check on fewer seeds (--split)"
        )
    sender = _Sender(client, workspace, program, policy, check_id, dict(hits))
    gate = asyncio.Semaphore(concurrency)
    client.join(concurrency)
    try:
        await asyncio.gather(*(sender.send(sides[j.side], j, gate) for j in misses))
    finally:
        client.leave()
    out = Measured(scores={name: {} for name in sides}, paid=len(misses))
    out.cached = len(jobs) - len(misses)
    for job in jobs:
        record = sender.done.get(job.key)
        if record is not None and record.reward is not None:
            out.scores[job.side][job.seed] = record.reward
        else:
            out.errors.setdefault(job.side, {})[job.seed] = sender.failed.get(job.key, "no reward")
    return out


@dataclass
class _Sender:
    """Sends the misses of one check and commits each scored rollout to the cache."""

    client: ContainerClient
    workspace: Workspace
    program: Program
    policy: Policy
    check_id: str
    done: dict[str, RolloutRecord]  # cache key -> scored rollout (hits included)
    failed: dict[str, str] = field(default_factory=dict)  # cache key -> why

    async def send(self, side: Side, job: _Job, gate: asyncio.Semaphore) -> None:
        """One rollout; a failure after its retries is noted, not raised."""
        request = RolloutRequest(
            run_id=self.check_id,
            candidate_id=side.candidate_id,
            candidate=side.components,
            seed=job.seed,
            policy=self.policy,
        )
        async with gate:
            try:
                outcome, _ = await self.client.rollout(
                    request,
                    reward_range=self.program.reward_range,
                    trace_cap_bytes=self.workspace.trace_cap_bytes,
                )
            except (RolloutFailed, InvalidRollout) as exc:
                self.failed[job.key] = str(exc)
                return
        assert outcome is not None
        ids = {
            "cache_key": job.key,
            "run_id": self.check_id,
            "candidate_id": side.candidate_id,
            "candidate_hash": content_hash(side.components),
            "fingerprint": self.program.fingerprint,
            "seed": job.seed,
            "policy": policy_key(self.policy),
            "attempts": outcome.attempts,
        }
        record = scored_record(ids, outcome)
        await self.workspace.record_rollouts([record])
        self.done[job.key] = record
