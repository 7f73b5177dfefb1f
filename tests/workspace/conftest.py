"""Fixtures of the workspace tests: an open workspace and a rollout factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from schemas import Policy, RolloutRecord, RunConfig, cache_key, content_hash
from workspace import Workspace

RolloutFactory = Callable[..., RolloutRecord]


@pytest.fixture
async def ws(tmp_path) -> AsyncIterator[Workspace]:
    async with Workspace(tmp_path / "ws") as workspace:
        yield workspace


@pytest.fixture
async def run_id(ws: Workspace) -> str:
    return (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id


def make_rollout(
    seed: str = "seed-1",
    *,
    run_id: str = "run-a",
    prompt: str = "You are a classifier.",
    fingerprint: str = "fp-1",
    model: str | None = None,
    status: str = "ok",
    reward: float | None = 1.0,
    trace: dict[str, Any] | None = None,
    **fields: Any,
) -> RolloutRecord:
    """A realistic rollout record; its cache key is derived like the runtime derives it."""
    components = {"system_prompt": prompt}
    policy = Policy(model=model)
    chash = content_hash(components)
    return RolloutRecord(
        cache_key=cache_key(fingerprint, chash, seed, policy),
        run_id=run_id,
        candidate_id=chash[:16],
        candidate_hash=chash,
        fingerprint=fingerprint,
        seed=seed,
        policy=policy.model_dump_json(),
        status=status,
        reward=reward if status == "ok" else None,
        trace=trace if trace is not None else {"messages": [{"role": "user", "content": seed}]},
        error=None if status == "ok" else "HTTP 503 after 5 attempts",
        **fields,
    )


@pytest.fixture
def rollout() -> RolloutFactory:
    return make_rollout
