"""Claims through the rollout queue: two runners on one store pay for each rollout once.

Each runner is a ``RolloutQueue`` with a ``Workspace`` (a connection) of its own on one store,
SQLite or PostgreSQL, as two processes would be; the container is scripted, counts its calls,
and takes a while per rollout so that the runners ask for the same ones at the same time.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.queue import RolloutQueue
from schemas import Event, Program, RunConfig
from workspace import Workspace
from workspace.claims import new_claimant

SEEDS = [f"s{i}" for i in range(8)]
PROGRAM = Program.model_validate(
    {
        "program_id": "p",
        "fingerprint": "fp-claims",
        "components": [{"name": "system_prompt", "text": "x"}],
        "seeds": {"train": SEEDS, "holdout": []},
    }
)
CANDIDATE = {"system_prompt": "name the label"}


class Container:
    """Answers each rollout after ``delay`` s; ``failing[seed]`` answers 503 that many times."""

    def __init__(self, delay: float = 0.1, failing: dict[str, int] | None = None) -> None:
        self.delay = delay
        self.failing = dict(failing or {})
        self.calls: Counter[str] = Counter()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        seed = json.loads(request.content)["seed"]
        self.calls[seed] += 1
        await asyncio.sleep(self.delay)
        if self.failing.get(seed, 0) > 0:
            self.failing[seed] -= 1
            return httpx.Response(503)
        return httpx.Response(200, json={"reward": 1.0, "feedback": f"ok {seed}"})


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_store_url")
    else:
        yield str(tmp_path / "ws")


@asynccontextmanager
async def runner(
    store: str,
    container: Container,
    tmp_path: Path,
    *,
    policy: RetryPolicy | None = None,
    lease_timeout_s: float | None = None,
    events: list[Event] | None = None,
) -> AsyncIterator[tuple[RolloutQueue, Budget]]:
    """One runner: its own workspace connection, client and queue on ``store``."""
    async with Workspace(
        store, run_files=tmp_path / "files", lease_timeout_s=lease_timeout_s
    ) as ws:
        run = await ws.create_run(RunConfig(containers=["http://c"]))
        http = httpx.AsyncClient(transport=httpx.MockTransport(container))
        client = ContainerClient(
            ["http://c"],
            http=http,
            policy=policy or RetryPolicy(max_retries=1, base_delay_s=0.0),
            rng=random.Random(0),
        )
        budget = Budget(max_calls=100)
        sink = EventSink(ws, run.run_id)
        if events is not None:
            sink.subscribe(events.append)
        queue = RolloutQueue(
            client=client, workspace=ws, run_id=run.run_id, program=PROGRAM, budget=budget,
            events=sink, concurrency=4,
        )  # fmt: skip
        async with queue:
            yield queue, budget
        await http.aclose()


async def test_two_runners_asking_for_the_same_rollouts_at_once_pay_once(
    store: str, tmp_path: Path
) -> None:
    container = Container()
    async with (
        runner(store, container, tmp_path) as (a, paid_a),
        runner(store, container, tmp_path) as (b, paid_b),
    ):
        first, second = await asyncio.gather(
            a.evaluate("c1", CANDIDATE, SEEDS), b.evaluate("c1", CANDIDATE, SEEDS)
        )
    assert container.calls == Counter(dict.fromkeys(SEEDS, 1))  # each rollout paid once
    assert paid_a.paid + paid_b.paid == len(SEEDS)
    for results, budget in ((first, paid_a), (second, paid_b)):
        assert {s: r.reward for s, r in results.items()} == dict.fromkeys(SEEDS, 1.0)
        served = [s for s, r in results.items() if r.cached]
        assert len(served) == budget.cached == len(SEEDS) - budget.paid
        assert budget.booked == 0  # what the other paid was given back to the budget


async def test_an_errored_rollout_lets_go_of_its_claim_for_the_waiter(
    store: str, tmp_path: Path
) -> None:
    container = Container(failing={"s3": 2})  # the first runner's two tries both fail
    async with (
        runner(store, container, tmp_path) as (a, _),
        runner(store, container, tmp_path) as (b, _),
    ):
        first, second = await asyncio.gather(
            a.evaluate("c1", CANDIDATE, ["s3"]), _after(0.05, b.evaluate("c1", CANDIDATE, ["s3"]))
        )
    assert first["s3"].record.status == "error" and not first["s3"].cached
    assert second["s3"].reward == 1.0 and not second["s3"].cached  # paid by the waiter
    assert container.calls["s3"] == 3


async def test_the_claims_of_a_dead_runner_are_taken_over_and_said(
    store: str, tmp_path: Path
) -> None:
    container, events = Container(delay=0.0), []
    async with runner(store, container, tmp_path, events=events) as (queue, budget):
        ws = queue._workspace
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        gone = new_claimant("run-gone", 60.0)
        await ws.claims.take(gone, [queue.key_for(CANDIDATE, "s0"), queue.key_for(CANDIDATE, "s1")])
        await _set_pid(ws, gone.token, dead.pid)
        results = await queue.evaluate("c1", CANDIDATE, ["s0", "s1", "s2"])
    assert [r.reward for r in results.values()] == [1.0, 1.0, 1.0]
    assert budget.paid == 3 and container.calls == Counter({"s0": 1, "s1": 1, "s2": 1})
    said = [e.data for e in events if e.type == "claims"]
    assert said == [
        {"taken_over": 2, "from": f"run run-gone (pid {dead.pid} on host {gone.host}): "
         f"pid {dead.pid} is no longer running on {gone.host}"}
    ]  # fmt: skip


async def test_a_wait_on_a_live_holder_is_bounded(store: str, tmp_path: Path) -> None:
    """A holder that lives but never stores its rollout (stuck): the waiter takes the claim
    over once it waited as long as the holder's tries may take plus the lease."""
    quick = RetryPolicy(max_retries=0, timeout_s=0.2, max_delay_s=0.1, rate_limit_wait_s=0.1)
    container = Container(delay=0.0)
    async with runner(store, container, tmp_path, policy=quick, lease_timeout_s=1.0) as (queue, _):
        stuck = new_claimant("run-stuck", 60.0)
        await queue._workspace.claims.take(stuck, [queue.key_for(CANDIDATE, "s0")])
        started = time.monotonic()
        results = await queue.evaluate("c1", CANDIDATE, ["s0"])
        waited = time.monotonic() - started
    assert results["s0"].reward == 1.0 and container.calls["s0"] == 1
    assert 1.3 <= waited < 5.0  # (0.2 + 0.1) x 1 try + 0.1 + the 1 s lease, then a poll


async def _after(delay: float, coro: object) -> object:
    await asyncio.sleep(delay)
    return await coro  # type: ignore[misc]


async def _set_pid(ws: Workspace, token: str, pid: int) -> None:
    await ws._db.at_once(
        lambda conn: conn.execute("UPDATE claims SET pid = ? WHERE token = ?", (pid, token))
    )
