"""The run lifecycle in one process: the lease held and lost, cancellation, resume checks.

A rule container behind ``httpx.MockTransport`` and a scripted proposer
(``tests/fakes/scripted.py``); a real workspace file.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from optimizer.runtime.lifecycle import lease as lease_module
from optimizer.runtime.lifecycle.lease import hold_lease
from optimizer.searches import run_optimization
from schemas import Event, RunConfig, RunLeased, UserError
from tests.fakes.scripted import SEARCH_SETTINGS, RuleContainer, ScriptedProposer, program
from workspace import Workspace

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]


def _config(**extra: Any) -> RunConfig:
    return RunConfig(**{**SEARCH_SETTINGS, **extra})


async def _start(
    root: Path, container: RuleContainer, proposer: ScriptedProposer, **kwargs: Any
) -> asyncio.Task[Any]:
    """The run as a task; returns once the first proposal is being written (mid-search).

    One proposal in flight: the held one is the search's only writer, so the run cannot
    finish while the test acts on it (other writers could reach full marks meanwhile).
    """
    hold = proposer.hold(1)
    asked = asyncio.Event()
    http = container.client()

    def listen(event: Event) -> None:
        if event.type == "phase" and event.data.get("phase") == "searching":
            asked.set()

    async def run() -> Any:
        async with http:
            return await run_optimization(
                _config(proposals_in_flight=1),
                workspace=root,
                proposer=proposer,
                http=http,
                on_event=listen,
                **kwargs,
            )

    task = asyncio.create_task(run())
    await asyncio.wait_for(asked.wait(), 30)
    while len(proposer.seen) < 1:
        await asyncio.sleep(0.01)
    assert not hold.is_set()
    return task


async def test_the_lease_is_held_while_a_run_executes_and_renewed(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        run_id = (await ws.create_run(_config())).run_id
        async with hold_lease(ws, run_id, every_s=0.02) as held:
            first = held.lease.heartbeat_at
            await asyncio.sleep(0.2)
            holder = await ws.lease_holder(run_id)
            assert holder is not None and holder.pid == os.getpid()
            assert holder.heartbeat_at > first  # renewed in the background
        assert await ws.lease_holder(run_id) is None  # given up at the end


async def test_a_running_run_refuses_a_second_execution(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    task = await _start(tmp_path / "ws", container, proposer)
    async with Workspace(tmp_path / "ws") as ws:
        (record,) = await ws.list_runs()
        with pytest.raises(RunLeased, match=f"is being run by pid {os.getpid()}"):
            await run_optimization(workspace=ws, run_id=record.run_id, proposer=proposer)
        assert (await ws.get_run(record.run_id)).status == "running"  # untouched
    proposer.hold(1).set()
    result = await task
    assert result.status == "completed"


async def test_a_run_whose_lease_is_taken_over_stops_and_leaves_the_run_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease_module, "HEARTBEAT_S", 0.02)
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    task = await _start(tmp_path / "ws", container, proposer)
    async with Workspace(tmp_path / "ws") as ws:
        (record,) = await ws.list_runs()
        # Another process decides this one's heartbeat is too old and takes the run over.
        thief, takeover = await ws.acquire_lease(record.run_id, timeout_s=0)
        assert takeover is not None
        with pytest.raises(RunLeased, match="was taken over by pid"):
            await asyncio.wait_for(task, 10)
        after = await ws.get_run(record.run_id)
        assert after.status == "running" and after.error is None  # the new holder's to set
        assert await ws.lease_holder(record.run_id) == thief  # not released by the loser


async def test_a_cancelled_run_is_recorded_cancelled_and_resumes(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    task = await _start(tmp_path / "ws", container, proposer)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with Workspace(tmp_path / "ws") as ws:
        (record,) = await ws.list_runs()
        assert record.status == "cancelled"
        assert f"gepa-runtime optimize run {record.run_id}" in (record.error or "")
        assert await ws.lease_holder(record.run_id) is None
        committed = {
            (r.candidate_hash, r.seed)
            for c in await ws.list_candidates(record.run_id)
            for r in await ws.rollouts_for_candidate(record.run_id, c.candidate_id)
            if r.status == "ok"
        }
        before = Counter(container.calls)
        async with container.client() as http:
            result = await run_optimization(
                workspace=ws, run_id=record.run_id, proposer=ScriptedProposer(), http=http
            )
    assert result.status == "completed"
    resumed = container.calls - before
    assert committed and resumed
    assert not committed & set(resumed), "the resumed run paid again for committed rollouts"


async def test_resume_refuses_a_program_with_other_components(tmp_path: Path) -> None:
    container = RuleContainer(program(LABELS))
    task = await _start(tmp_path / "ws", container, ScriptedProposer())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    other = program(LABELS)  # same program id, another surface
    other["components"] = [{"name": "router_prompt", "kind": "prompt", "text": "Route."}]
    impostor = RuleContainer(other)
    async with Workspace(tmp_path / "ws") as ws:
        (record,) = await ws.list_runs()
        async with impostor.client() as http:
            with pytest.raises(UserError) as refused:
                await run_optimization(workspace=ws, run_id=record.run_id, http=http)
        candidates = await ws.list_candidates(record.run_id)
    message = str(refused.value)
    assert "started on program 'rules' (components system_prompt)" in message
    assert "serves 'rules' (components router_prompt)" in message
    assert not impostor.calls  # no rollout reached it
    assert all("system_prompt" in c.components for c in candidates)  # nothing mixed in


# Each was accepted before: NaN passes no comparison constraint, infinity passes ``gt=0``.
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_holdout_improvement", math.nan),
        ("min_holdout_improvement", -math.inf),
        ("max_cost_usd", math.inf),
        ("rollout_timeout_s", math.inf),
        ("retry_base_delay_s", math.inf),
    ],
)
def test_the_config_refuses_non_finite_numbers(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        RunConfig(**{field: value})
