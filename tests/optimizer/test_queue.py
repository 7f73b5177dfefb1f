"""Rollout queue: cache first, errors recorded but never scored or served, budget all-or-nothing."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.gate import ErrorGate
from optimizer.runtime.rollouts.queue import RolloutQueue
from schemas import BudgetExhausted, ContainerError, Program, RunConfig
from workspace import Workspace

PROGRAM = Program.model_validate(
    {
        "program_id": "p",
        "fingerprint": "fp-1",
        "components": [{"name": "system_prompt", "text": "x"}],
        "seeds": {"train": [f"s{i}" for i in range(20)], "holdout": ["h"]},
    }
)
CANDIDATE = {"system_prompt": "be precise"}


class Container:
    """A scripted container: seeds in ``broken`` always answer 503; counts POSTs per seed."""

    def __init__(self, broken: set[str] | None = None) -> None:
        self.broken = broken or set()
        self.calls: Counter[str] = Counter()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        seed = __import__("json").loads(request.content)["seed"]
        self.calls[seed] += 1
        if seed in self.broken:
            return httpx.Response(503)
        return httpx.Response(
            200, json={"reward": 0.5 if seed.endswith("1") else 1.0, "feedback": f"ok {seed}"}
        )


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with Workspace(tmp_path / "ws") as workspace:
        yield workspace


async def _queue(
    ws: Workspace,
    container: Callable[[httpx.Request], Any],
    budget: Budget,
    gate: ErrorGate | None = None,
) -> RolloutQueue:
    run = await ws.create_run(RunConfig(containers=["http://c"]))
    http = httpx.AsyncClient(transport=httpx.MockTransport(container))
    client = ContainerClient(
        ["http://c"],
        http=http,
        policy=RetryPolicy(max_retries=1, base_delay_s=0.0),
        rng=random.Random(0),
    )
    return RolloutQueue(
        client=client,
        workspace=ws,
        run_id=run.run_id,
        program=PROGRAM,
        budget=budget,
        events=EventSink(ws, run.run_id),
        concurrency=3,
        error_gate=gate,
    )


async def test_second_evaluation_is_served_from_the_cache(ws: Workspace) -> None:
    container, budget = Container(), Budget(max_calls=100)
    async with await _queue(ws, container, budget) as queue:
        first = await queue.evaluate("c1", CANDIDATE, ["s0", "s1", "s2"])
        again = await queue.evaluate("c1", CANDIDATE, ["s0", "s1", "s2"])
    assert {s: r.reward for s, r in first.items()} == {"s0": 1.0, "s1": 0.5, "s2": 1.0}
    assert [r.cached for r in again.values()] == [True, True, True]
    assert {s: r.reward for s, r in again.items()} == {s: r.reward for s, r in first.items()}
    assert sum(container.calls.values()) == 3
    assert (budget.paid, budget.cached) == (3, 3)


async def test_errored_rollouts_are_stored_unscored_and_retried_next_time(ws: Workspace) -> None:
    container, budget = Container(broken={"s3"}), Budget(max_calls=100)
    async with await _queue(ws, container, budget) as queue:
        results = await queue.evaluate("c1", CANDIDATE, ["s2", "s3"])
        assert results["s3"].reward is None and results["s3"].record.status == "error"
        assert "503" in (results["s3"].record.error or "")
        assert results["s3"].record.attempts == 2
        again = await queue.evaluate("c1", CANDIDATE, ["s3"])
    assert again["s3"].cached is False  # an error is never a cache hit
    assert container.calls["s3"] == 4
    assert budget.errors == 2 and budget.retries == 2
    counts = await ws.count_trials(queue._run_id)
    assert counts["errors"] == 2


async def test_budget_is_booked_before_anything_is_sent(ws: Workspace) -> None:
    container, budget = Container(), Budget(max_calls=5)
    async with await _queue(ws, container, budget) as queue:
        with pytest.raises(BudgetExhausted):
            await queue.evaluate("c1", CANDIDATE, [f"s{i}" for i in range(6)])
        assert sum(container.calls.values()) == 0  # not half-evaluated
        await queue.evaluate("c1", CANDIDATE, ["s0", "s2"])
    assert budget.paid == 2 and budget.booked == 0


async def test_components_that_are_not_text_are_refused_before_budget_is_booked(
    ws: Workspace,
) -> None:
    container, budget = Container(), Budget(max_calls=5)
    async with await _queue(ws, container, budget) as queue:
        with pytest.raises(ValidationError, match="candidate"):
            # Before, a worker died on it and the caller waited forever.
            bad = queue.evaluate("c1", {"system_prompt": 3}, ["s0", "s1"])  # type: ignore[dict-item]
            await asyncio.wait_for(bad, 10)
        assert budget.booked == 0 and sum(container.calls.values()) == 0
        await queue.evaluate("c1", CANDIDATE, [f"s{i}" for i in range(5)])  # all 5 still there
    assert budget.paid == 5


async def test_error_gate_stops_a_run_on_noise(ws: Workspace) -> None:
    broken = {f"s{i}" for i in range(12) if i % 2}
    container, budget = Container(broken=broken), Budget(max_calls=100)
    async with await _queue(
        ws, container, budget, ErrorGate(max_rate=0.25, min_attempts=10)
    ) as queue:
        with pytest.raises(ContainerError, match="6 of 12 rollouts failed"):
            await queue.evaluate("c1", CANDIDATE, [f"s{i}" for i in range(12)])


async def test_changed_fingerprint_invalidates_the_cache(ws: Workspace) -> None:
    container = Container()
    async with await _queue(ws, container, Budget()) as queue:
        await queue.evaluate("c1", CANDIDATE, ["s0"])
        key_old = queue.key_for(CANDIDATE, "s0")
    changed = PROGRAM.model_copy(update={"fingerprint": "fp-2"})
    run = await ws.create_run(RunConfig(containers=["http://c"]))
    http = httpx.AsyncClient(transport=httpx.MockTransport(container))
    client = ContainerClient(
        ["http://c"], http=http, policy=RetryPolicy(max_retries=0), rng=random.Random(0)
    )
    async with RolloutQueue(
        client=client,
        workspace=ws,
        run_id=run.run_id,
        program=changed,
        budget=Budget(),
        events=EventSink(ws, run.run_id),
    ) as queue2:
        result = await queue2.evaluate("c1", CANDIDATE, ["s0"])
        assert queue2.key_for(CANDIDATE, "s0") != key_old
    assert result["s0"].cached is False and container.calls["s0"] == 2


async def test_a_rollout_in_flight_is_not_sent_twice(ws: Workspace) -> None:
    # Two proposals that wrote the same text at once: one request per seed, both answered.
    container, budget = Container(), Budget(max_calls=100)
    async with await _queue(ws, container, budget) as queue:
        first, second = await asyncio.gather(
            queue.evaluate("c1", CANDIDATE, ["s0", "s1", "s2"]),
            queue.evaluate("c1", CANDIDATE, ["s1", "s2", "s3"]),
        )
    assert container.calls == {"s0": 1, "s1": 1, "s2": 1, "s3": 1}
    assert budget.paid == 4 and budget.booked == 0
    assert first["s1"].reward == second["s1"].reward == 0.5
    assert not first["s1"].cached and second["s1"].cached  # the second caller paid nothing


async def test_a_rollout_is_not_sent_twice_while_its_caller_records_cache_hits(
    ws: Workspace,
) -> None:
    # The first caller has a seed in the cache: it records that hit (a workspace write)
    # before it sends its misses. A second caller of the same seeds meanwhile waits for the
    # first one's rollouts; it used to find them neither cached nor in flight and send them
    # again.
    container, budget = Container(), Budget(max_calls=100)
    async with await _queue(ws, container, budget) as queue:
        await queue.evaluate("c1", CANDIDATE, ["s0"])
        first, second, third = await asyncio.gather(
            queue.evaluate("c1", CANDIDATE, ["s0", "s1", "s2"]),
            queue.evaluate("c1", CANDIDATE, ["s1", "s2"]),
            queue.evaluate("c1", CANDIDATE, ["s0", "s2", "s3"]),
        )
    assert container.calls == {"s0": 1, "s1": 1, "s2": 1, "s3": 1}
    assert budget.paid == 4 and budget.booked == 0
    assert first["s1"].reward == second["s1"].reward == 0.5
    assert not first["s2"].cached and second["s2"].cached and third["s2"].cached


async def test_cached_reads_count_no_trial(ws: Workspace) -> None:
    container, budget = Container(), Budget(max_calls=100)
    async with await _queue(ws, container, budget) as queue:
        await queue.evaluate("c1", CANDIDATE, ["s0", "s1"])
        cached_before = budget.cached
        found = await queue.cached(CANDIDATE, ["s0", "s1", "s2"])
        assert set(found) == {"s0", "s1"} and budget.cached == cached_before
        assert await queue.misses(CANDIDATE, ["s0", "s1", "s2"]) == ["s2"]


async def test_prebooked_calls_hold_the_budget_before_the_first_await(ws: Workspace) -> None:
    # Work started in the background books its calls up front, so a search that looks at
    # the budget meanwhile cannot spend them; cache hits found later give the booking back.
    container, budget = Container(), Budget(max_calls=10)
    async with await _queue(ws, container, budget) as queue:
        await queue.evaluate("c", CANDIDATE, ["s2"])
        budget.reserve(4, final=True)
        assert budget.search_room() == 10 - 1 - 4
        results = await queue.evaluate(
            "c", CANDIDATE, ["s2", "s3", "s4", "s5"], final=True, prebooked=4
        )
    assert set(results) == {"s2", "s3", "s4", "s5"}
    assert budget.paid == 4 and budget.booked == 0  # s2 was cached: one booking released
    assert sum(container.calls.values()) == 4


async def test_background_rollouts_wait_behind_the_searchs_own(ws: Workspace) -> None:
    # The baseline's holdout runs in the background: a gate asked meanwhile is sent next,
    # not after every holdout rollout already queued.
    release, order = asyncio.Event(), []

    async def container(request: httpx.Request) -> httpx.Response:
        seed = __import__("json").loads(request.content)["seed"]
        order.append(seed)
        await release.wait()
        return httpx.Response(200, json={"reward": 1.0})

    budget = Budget(max_calls=100)
    async with await _queue(ws, container, budget) as queue:
        holdout = [f"s{i}" for i in range(12)]
        background = asyncio.create_task(
            queue.evaluate("base", CANDIDATE, holdout, final=True, background=True)
        )
        while len(order) < 3:  # the three workers hold three holdout rollouts
            await asyncio.sleep(0.01)
        gate = asyncio.create_task(
            queue.evaluate("child", {"system_prompt": "child"}, ["s12", "s13", "s14"])
        )
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(background, gate)
    assert order[:3] == ["s0", "s1", "s2"]
    assert order[3:6] == ["s12", "s13", "s14"]  # before s3..s11, queued earlier
    assert order[6:] == [f"s{i}" for i in range(3, 12)]
