"""The dry-run's sample rollouts: the baseline on a few train seeds, sent as a run sends them.

Some mistakes only show when the target runs: a row the template cannot render, a row with
no label under a verifier that needs one, a target that returns the wrong type (the SDK
answers 422 for each, on every attempt), or a target that crashes (500 on every retry).
Sending the baseline on a few train seeds through the real container, with the run's token,
policy and client, shows them before any budget is spent. Nothing is stored and nothing is
counted: a dry-run makes no run, so these rollouts fill no cache and spend no budget (the
student model is called, which is the point).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from optimizer.checks.findings import Finding
from optimizer.runtime.client import ContainerClient, RetryPolicy
from schemas import (
    Policy,
    Program,
    ProtocolViolation,
    RolloutFailed,
    RolloutRequest,
    RunConfig,
    UserError,
)

__all__ = ["SampleOutcome", "sample_findings", "sample_rollouts", "sample_seeds"]

DRY_RUN_ID = "dry-run"
UNAVAILABLE = frozenset({None, 408, 425, 429, 502, 503, 504})  # None: timeout, lost connection
Verdict = Literal["scored", "refused", "crashed", "unavailable"]
FIXES: dict[Verdict, str] = {
    "refused": "a run would stop at the first such rollout (a refusal or an answer outside "
    "the protocol is not retried): fix what the message names, then run the dry-run again",
    "crashed": "a run would retry it, then count it as an errored rollout (and stop past "
    "--max-error-rate): the container's log has the traceback",
    "unavailable": "a run retries this with backoff; if it persists, check the container's "
    "log and its student model's rate limits",
}


@dataclass(frozen=True)
class SampleOutcome:
    """One sample rollout: its reward, or what went wrong and how a run would take it."""

    seed: str
    verdict: Verdict
    reward: float | None = None
    problem: str = ""


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
) -> list[SampleOutcome]:
    """The baseline on ``count`` train seeds of ``program`` at ``url``, concurrently."""
    client = ContainerClient(
        [url],
        token=token,
        http=http,
        policy=RetryPolicy(
            max_retries=2, base_delay_s=0.2, max_delay_s=5.0, timeout_s=config.rollout_timeout_s
        ),
    )
    policy = Policy(model=config.task_model)
    seeds = sample_seeds(program.seeds.train, count)
    return list(await asyncio.gather(*(_one(client, program, seed, policy) for seed in seeds)))


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
    findings = []
    scored = [o for o in outcomes if o.verdict == "scored"]
    if scored:
        rewards = ", ".join(f"{o.reward:g} ({o.seed})" for o in scored)
        findings.append(
            Finding(
                "baseline rollouts",
                True,
                f"{len(scored)} of {len(outcomes)} train seeds scored: {rewards}; "
                "not stored, no budget spent",
            )
        )
    for outcome, seeds in _distinct_problems(outcomes):
        also = f" (also seeds {', '.join(seeds[1:])})" if len(seeds) > 1 else ""
        warning = outcome.verdict == "unavailable"
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


async def _one(
    client: ContainerClient, program: Program, seed: str, policy: Policy
) -> SampleOutcome:
    request = RolloutRequest(
        run_id=DRY_RUN_ID,
        candidate_id="baseline",
        candidate=program.baseline(),
        seed=seed,
        policy=policy,
        return_trace=False,
    )
    try:
        outcome, _ = await client.rollout(request)
    except (ProtocolViolation, UserError) as exc:  # a 4xx, a malformed answer, a refused token
        return SampleOutcome(seed, "refused", problem=str(exc))
    except RolloutFailed as exc:
        verdict: Verdict = "unavailable" if exc.status in UNAVAILABLE else "crashed"
        return SampleOutcome(seed, verdict, problem=str(exc))
    assert outcome is not None  # the client returns an outcome or raises
    return SampleOutcome(seed, "scored", reward=outcome.response.reward)


def _distinct_problems(outcomes: list[SampleOutcome]) -> list[tuple[SampleOutcome, list[str]]]:
    """Failed outcomes grouped by their message (seed names aside), first seen first."""
    groups: dict[str, tuple[SampleOutcome, list[str]]] = {}
    for outcome in outcomes:
        if outcome.verdict == "scored":
            continue
        key = outcome.problem.replace(repr(outcome.seed), "").replace(outcome.seed, "")
        groups.setdefault(key, (outcome, []))[1].append(outcome.seed)
    return list(groups.values())
