"""The dry-run's sample rollouts: the baseline on a few train seeds, sent as a run sends them.

Some mistakes only show when the target runs: a row the template cannot render, a row with
no label under a verifier that needs one, a target that returns the wrong type (the SDK
answers 422 for each, on every attempt), or a target that crashes (500 on every retry).
Sending the baseline on a few train seeds through the real container, with the run's token,
policy and client, shows them before any budget is spent. A dry-run makes no run: it stores
nothing and spends no budget (the student model is called, which is the point). ``optimize
create`` sends them as the run will (its run id, the baseline's candidate id, with traces) and
stores the scored ones in the workspace's rollout cache, so the run reads them back instead of
paying for the same (candidate, seed) again.

A check is quick: a container that answers nothing but 429s is waited on for
``CHECK_RATE_LIMIT_WAIT_S`` at most (or ``--rate-limit-wait`` when shorter), not the run's
ten minutes, and reported as a warning: a run waits such a limit out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from optimizer.checks.findings import Finding
from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.records import scored_record
from schemas import (
    InvalidRollout,
    Policy,
    Program,
    ProtocolViolation,
    RolloutFailed,
    RolloutRecord,
    RolloutRequest,
    RunConfig,
    UserError,
    cache_key,
    candidate_id_for,
    content_hash,
    policy_key,
)

__all__ = [
    "SAMPLE_ROLLOUTS",
    "SampleOutcome",
    "findings_of",
    "sample_findings",
    "sample_rollouts",
    "sample_seeds",
]

DRY_RUN_ID = "dry-run"
SAMPLE_ROLLOUTS = 2  # the default of --sample-rollouts (optimize create and dry-run)
CHECK_RATE_LIMIT_WAIT_S = 10.0  # long enough for a burst's Retry-After, short for a check
UNAVAILABLE = frozenset({None, 408, 425, 429, 502, 503, 504})  # None: timeout, lost connection
Verdict = Literal["scored", "refused", "crashed", "unscorable", "unavailable", "rate_limited"]
FIXES: dict[Verdict, str] = {
    "refused": "a run would stop at the first such rollout (a refusal or an answer outside "
    "the protocol is not retried): fix what the message names, then run the dry-run again",
    "crashed": "a run would retry it, then count it as an errored rollout (and stop past "
    "--max-error-rate): the container's log has the traceback",
    "unscorable": "a run counts it as an errored rollout, not retried (and stops past "
    "--max-error-rate): fix what the container returns",
    "unavailable": "a run retries this with backoff; if it persists, check the container's "
    "log and its student model's rate limits",
    "rate_limited": "a run retries this with backoff, waiting up to --rate-limit-wait for the "
    "limit to clear before its rollouts fail: check the student model's rate limits, or give "
    "the container more capacity",
}
WARNINGS = frozenset({"unavailable", "rate_limited"})


@dataclass(frozen=True)
class SampleOutcome:
    """One sample rollout: its reward, or what went wrong and how a run would take it."""

    seed: str
    verdict: Verdict
    reward: float | None = None
    problem: str = ""
    record: RolloutRecord | None = None  # a scored rollout sent for a run: what it stores


def sample_seeds(train: Sequence[str], count: int) -> list[str]:
    """``count`` train seeds spread evenly over the split (the first one always among them)."""
    if count <= 0 or not train:
        return []
    count = min(count, len(train))
    return [train[i * len(train) // count] for i in range(count)]


async def sample_rollouts(
    url: str,
    program: Program,
    config: RunConfig,
    *,
    http: httpx.AsyncClient,
    token: str | None,
    count: int,
    run_id: str | None = None,
    at_once: int | None = None,
) -> list[SampleOutcome]:
    """The baseline on ``count`` train seeds of ``program`` at ``url``, concurrently (at most
    ``at_once`` in flight, the next sent as one returns; None: all at once).

    With ``run_id`` (``optimize create``) they are sent as that run will send them, and each
    scored one carries the ``record`` the run's rollout cache takes.
    """
    client = ContainerClient(
        [url],
        token=token,
        http=http,
        policy=RetryPolicy(
            max_retries=2,
            base_delay_s=0.2,
            max_delay_s=5.0,
            timeout_s=config.rollout_timeout_s,
            rate_limit_wait_s=min(config.rate_limit_wait_s, CHECK_RATE_LIMIT_WAIT_S),
        ),
    )
    sample = _Sample(client, program, Policy(model=config.task_model), run_id)
    seeds = sample_seeds(program.seeds.train, count)
    slots = asyncio.Semaphore(at_once or max(count, 1))

    async def in_slot(seed: str) -> SampleOutcome:
        async with slots:
            return await sample.one(seed)

    return list(await asyncio.gather(*(in_slot(seed) for seed in seeds)))


async def sample_findings(
    url: str,
    program: Program,
    config: RunConfig,
    *,
    http: httpx.AsyncClient,
    token: str | None,
    count: int,
) -> list[Finding]:
    """The sample rollouts as dry-run findings: the scores, then each distinct problem."""
    outcomes = await sample_rollouts(url, program, config, http=http, token=token, count=count)
    return findings_of(outcomes)


def findings_of(outcomes: list[SampleOutcome]) -> list[Finding]:
    """Sample outcomes as findings: the scores (and where they are kept), then each problem."""
    findings = []
    scored = [o for o in outcomes if o.verdict == "scored"]
    if scored:
        rewards = ", ".join(f"{o.reward:g} ({o.seed})" for o in scored)
        kept = (
            "kept in the rollout cache: the run reads them, it does not send them again"
            if any(o.record is not None for o in scored)
            else "not stored, no budget spent"
        )
        findings.append(
            Finding(
                "baseline rollouts",
                True,
                f"{len(scored)} of {len(outcomes)} train seeds scored: {rewards}; {kept}",
            )
        )
    for outcome, seeds in _distinct_problems(outcomes):
        also = f" (also seeds {', '.join(seeds[1:])})" if len(seeds) > 1 else ""
        warning = outcome.verdict in WARNINGS
        findings.append(
            Finding(
                f"baseline rollout {outcome.seed}",
                warning,
                f"{outcome.problem}{also}",
                FIXES[outcome.verdict],
                warning=warning,
            )
        )
    return findings


@dataclass(frozen=True)
class _Sample:
    """How the samples are sent: for a dry-run, or as the run ``run_id`` will send them."""

    client: ContainerClient
    program: Program
    policy: Policy
    run_id: str | None

    async def one(self, seed: str) -> SampleOutcome:
        baseline = self.program.baseline()
        request = RolloutRequest(
            run_id=self.run_id or DRY_RUN_ID,
            candidate_id=candidate_id_for(baseline) if self.run_id else "baseline",
            candidate=baseline,
            seed=seed,
            policy=self.policy,
            return_trace=self.run_id is not None,
        )
        try:
            outcome, retries = await self.client.rollout(
                request, reward_range=self.program.reward_range
            )
        except (ProtocolViolation, UserError) as exc:  # a 4xx, a malformed answer, a bad token
            return SampleOutcome(seed, "refused", problem=str(exc))
        except InvalidRollout as exc:
            return SampleOutcome(seed, "unscorable", problem=str(exc))
        except RolloutFailed as exc:
            if exc.reason == "rate_limit":
                return SampleOutcome(seed, "rate_limited", problem=self._rate_limited(exc))
            verdict: Verdict = "unavailable" if exc.status in UNAVAILABLE else "crashed"
            return SampleOutcome(seed, verdict, problem=str(exc))
        assert outcome is not None  # the client returns an outcome or raises
        record = None
        if self.run_id is not None:
            chash = content_hash(baseline)
            key = policy_key(self.policy)
            ids = {
                "cache_key": cache_key(self.program.fingerprint, chash, seed, key),
                "run_id": self.run_id,
                "candidate_id": request.candidate_id,
                "candidate_hash": chash,
                "fingerprint": self.program.fingerprint,
                "seed": seed,
                "policy": key,
                "attempts": retries + 1,
            }
            record = scored_record(ids, outcome)
        return SampleOutcome(seed, "scored", reward=outcome.response.reward, record=record)

    def _rate_limited(self, exc: RolloutFailed) -> str:
        """What the check met: the container's 429s outlasted the check's short wait."""
        wait = self.client.policy.rate_limit_wait_s
        return f"the container answered only 429 for the check's {wait:g} s wait (last: {exc.last})"


def _distinct_problems(outcomes: list[SampleOutcome]) -> list[tuple[SampleOutcome, list[str]]]:
    """Failed outcomes grouped by their message (seed names aside), first seen first."""
    groups: dict[str, tuple[SampleOutcome, list[str]]] = {}
    for outcome in outcomes:
        if outcome.verdict == "scored":
            continue
        key = outcome.problem.replace(repr(outcome.seed), "").replace(outcome.seed, "")
        groups.setdefault(key, (outcome, []))[1].append(outcome.seed)
    return list(groups.values())
