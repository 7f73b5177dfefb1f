"""Recording actions in a workspace, and a running run reading them (``RunSteering``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from optimizer.runtime.steering import (
    RunSteering,
    Steering,
    read_steering,
    record_action,
)
from schemas import Action, ActionRefused, CandidateRecord, Event, RunConfig
from workspace import Workspace

CONFIG = RunConfig(containers=["http://127.0.0.1:9"])


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with Workspace(tmp_path / "ws") as workspace:
        yield workspace


async def _run_with_candidates(ws: Workspace) -> tuple[str, str, str]:
    """A run with a baseline and one child; their ids."""
    run_id = (await ws.create_run(CONFIG)).run_id
    ids = []
    for text, origin in (("base", "seed"), ("child", "mutation")):
        cid = (text * 16)[:16]
        await ws.add_candidate(
            CandidateRecord(
                run_id=run_id,
                candidate_id=cid,
                content_hash=cid * 4,
                components={"p": text},
                origin=origin,  # type: ignore[arg-type]
            )
        )
        ids.append(cid)
    return run_id, ids[0], ids[1]


async def test_an_action_is_checked_stored_and_folded(ws: Workspace) -> None:
    run_id, base, child = await _run_with_candidates(ws)
    event, steering = await record_action(
        ws, run_id, Action(action="reject", candidate_id=child[:6], reason="bad", source="cli")
    )
    assert event.type == "action" and event.run_id == run_id
    assert event.data == {"action": "reject", "source": "cli", "candidate_id": child,
                          "reason": "bad"}  # fmt: skip
    assert steering.rejected == {child: "bad"} and steering.seq == event.seq
    assert await read_steering(ws, run_id) == steering
    with pytest.raises(ActionRefused) as caught:
        await record_action(ws, run_id, Action(action="reject", candidate_id=base, reason="x"))
    assert caught.value.kind == "conflict"
    assert len(await ws.events_since(run_id)) == 1  # nothing written for a refusal


async def test_an_unknown_run_is_unknown_naming_how_to_list_runs(ws: Workspace) -> None:
    for call in (
        record_action(ws, "run-nope", Action(action="pause")),
        read_steering(ws, "run-nope"),
    ):
        with pytest.raises(ActionRefused) as caught:
            await call
        assert caught.value.kind == "unknown"
        assert "unknown run 'run-nope'" in str(caught.value)
        assert "gepa-runtime runs list" in str(caught.value)


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_running_run_reads_new_actions_holds_while_paused_and_counts_the_pause(
    ws: Workspace,
) -> None:
    run_id, _, child = await _run_with_candidates(ws)
    await record_action(ws, run_id, Action(action="pause"))
    clock, heard = Clock(), []

    async def listener(event: Event, steering: Steering) -> None:
        heard.append((event.data["action"], steering.paused))

    live = RunSteering(ws, run_id, poll_s=0.01, clock=clock)
    live.subscribe(listener)
    await live.load()  # a resumed run starts as its actions left it: paused
    assert live.paused and heard == [("pause", True)]
    held = asyncio.create_task(live.hold())
    await asyncio.sleep(0.05)
    assert not held.done()
    clock.now += 30
    assert live.paused_s == 30

    watch = asyncio.create_task(live.watch())
    await record_action(ws, run_id, Action(action="pin", candidate_id=child))
    await record_action(ws, run_id, Action(action="resume"))
    await asyncio.wait_for(held, 2)
    watch.cancel()
    assert heard[1:] == [("pin", True), ("resume", False)]
    assert live.state.pinned == child and not live.paused
    clock.now += 100  # not paused any more: the count stays
    assert live.paused_s == 30
    await asyncio.wait_for(live.hold(), 0.1)  # returns at once


async def test_a_run_nobody_steers_never_holds() -> None:
    live = RunSteering()
    assert await live.load() == Steering() and await live.refresh() == []
    await asyncio.wait_for(live.hold(), 0.1)
    assert live.paused_s == 0.0


async def test_a_failed_read_is_handed_to_stop(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    await ws.open()
    run_id = (await ws.create_run(CONFIG)).run_id
    await ws.close()  # every later read fails
    stopped: list[Exception] = []
    live = RunSteering(ws, run_id, poll_s=0.01)
    await asyncio.wait_for(live.watch(stopped.append), 2)
    assert len(stopped) == 1
