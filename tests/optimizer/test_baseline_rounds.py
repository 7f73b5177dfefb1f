"""Several writers start on the baseline's first round of train rollouts (``optimizer.runtime.
baseline``): the rest is scored behind them, and no child is judged before it is in.

The rule container of ``tests/fakes/scripted.py`` is served by an async handler that holds
the baseline's rollouts after its first round until the test lets them go; the queue, cache,
budget, search and workspace are the real ones.
"""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.runtime.lifecycle.run import RunResult
from optimizer.searches import run_optimization
from schemas import ContainerError, Event, RunConfig
from tests.fakes.scripted import (
    BASELINE,
    SEARCH_SETTINGS,
    RuleContainer,
    ScriptedProposer,
    program,
)

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]  # 12 train seeds, two per label
ROUND = 4  # the run's concurrency: the baseline's first round


class HeldBaseline:
    """The container, with the baseline's train rollouts after its first ``ROUND`` held
    until ``release`` is set (or ``patience`` seconds have passed)."""

    def __init__(self, container: RuleContainer, patience: float = 3.0) -> None:
        self.container = container
        self.patience = patience
        self.release = asyncio.Event()
        self.released_by_timeout = False
        self.served: list[str] = []  # baseline train seeds served, in order
        self.train = set(container.program["seeds"]["train"])
        self.baseline = container.program["components"][0]["text"]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rollout":
            body = json.loads(request.content)
            if body["candidate"]["system_prompt"] == self.baseline and body["seed"] in self.train:
                if len(self.served) >= ROUND:
                    await self._wait()
                self.served.append(body["seed"])
        return self.container(request)

    async def _wait(self) -> None:
        try:
            await asyncio.wait_for(self.release.wait(), self.patience)
        except TimeoutError:
            self.released_by_timeout = True
            self.release.set()


async def _run(
    held: HeldBaseline, proposer: ScriptedProposer, events: list[Event], tmp_path: Path, **cfg: Any
) -> RunResult:
    settings: dict[str, Any] = {**SEARCH_SETTINGS, "seed": 0, "concurrency": ROUND, **cfg}
    async with httpx.AsyncClient(transport=httpx.MockTransport(held)) as http:
        return await run_optimization(
            RunConfig(**settings),
            workspace=tmp_path / "ws",
            proposer=proposer,
            http=http,
            on_event=events.append,
        )


async def test_writers_are_asked_on_the_baselines_first_round_while_the_rest_is_scored(
    tmp_path: Path,
) -> None:
    spec = program(LABELS)
    spec["components"][0]["text"] = f"{BASELINE}\n- eel"  # eel's seeds come last, in the rest
    held = HeldBaseline(RuleContainer(spec))
    proposer = ScriptedProposer()
    first, second = proposer.hold(1), proposer.hold(2)

    async def release() -> None:  # once both writers were asked, the rest of the baseline
        while len(proposer.seen) < 2 and not held.release.is_set():
            await asyncio.sleep(0.005)
        held.release.set()
        first.set()
        second.set()

    releaser = asyncio.create_task(release())
    events: list[Event] = []
    result = await _run(held, proposer, events, tmp_path, proposals_in_flight=2)
    await releaser

    assert not held.released_by_timeout  # both were asked while the rest was held
    head = set(held.served[:ROUND])
    for request in proposer.seen[:2]:  # shown only seeds already scored
        shown = {e.seed for e in (*request.evaluations, *request.train_evaluations)}
        assert shown and shown <= head
    baseline = result.evidence["baseline"]["candidate_id"]
    scored = [e for e in events if e.type == "scored" and e.data["candidate_id"] == baseline]
    assert len(scored) == 1 and scored[0].data["mean"] == 2 / 12  # once, on all 12 seeds
    judged = [i for i, e in enumerate(events) if e.type in ("gate", "stack")]
    assert judged and events.index(scored[0]) < judged[0]  # no child judged before it
    # The first wave's stack is the next parent: no writer went back to the baseline for
    # the failures its rest showed while that stack was judged.
    stack = next(e.data["candidate_id"] for e in events if e.type == "stack")
    parents = [e.data.get("parent") for e in events if e.type == "iteration"]
    assert parents[:2] == [baseline, baseline] and parents[2] == stack
    assert result.promoted


async def test_a_first_round_with_fewer_kinds_of_failure_than_writers_waits_for_the_rest(
    tmp_path: Path,
) -> None:
    # The first round (ant-0, ant-1, bee-0, bee-1) fails four times but in two kinds
    # ("expected ant", "expected bee"): a third writer would be shown one of them again.
    held = HeldBaseline(RuleContainer(program(LABELS)), patience=0.5)
    events: list[Event] = []
    await _run(held, ScriptedProposer(), events, tmp_path, proposals_in_flight=3)
    types = [e.type for e in events]
    assert held.released_by_timeout  # nobody let the rest go: the search waited for it
    assert types.index("scored") < types.index("iteration")


class FailingRest(HeldBaseline):
    """The container, answering 500 to the baseline's train rollouts after its first round,
    once they are let go."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rollout":
            body = json.loads(request.content)
            if body["candidate"]["system_prompt"] == self.baseline and body["seed"] in self.train:
                self.served.append(body["seed"])
                if len(self.served) > ROUND:
                    await self._wait()
                    return httpx.Response(500, json={"error": {"message": "down"}})
        return self.container(request)


async def test_the_baselines_rest_failing_ends_the_search_while_every_writer_is_out(
    tmp_path: Path,
) -> None:
    # Both writers are held for good: only the rest's failure can end the run.
    held = FailingRest(RuleContainer(program(LABELS)))
    proposer = ScriptedProposer()
    proposer.hold(1), proposer.hold(2)

    async def release() -> None:  # the rest fails once both writers are out
        while len(proposer.seen) < 2 and not held.release.is_set():
            await asyncio.sleep(0.005)
        held.release.set()

    releaser = asyncio.create_task(release())
    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    events: list[Event] = []
    with pytest.raises(ContainerError, match="rollouts failed"):
        await asyncio.wait_for(
            _run(held, proposer, events, tmp_path, proposals_in_flight=2, max_retries=0), 20
        )
    await releaser
    assert not held.released_by_timeout and len(proposer.seen) == 2  # both were out
    gc.collect()
    await asyncio.sleep(0)
    assert [c.get("future") for c in unretrieved] == []  # "Task exception was never retrieved"
