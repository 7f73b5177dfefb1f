"""The SSE generator: heartbeats with the last runner event's time, live events, the end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from optimizer.service import RunManager, StreamSettings
from optimizer.service.sse import event_stream
from schemas import RunConfig
from workspace import Workspace


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[RunManager]:
    async with Workspace(tmp_path / "ws") as ws:
        yield RunManager(ws)


def _parse(chunk: bytes) -> tuple[str | None, dict[str, object] | None]:
    text = chunk.decode()
    name = next((line[6:].strip() for line in text.splitlines() if line.startswith("event:")), None)
    data = next((line[5:].strip() for line in text.splitlines() if line.startswith("data:")), None)
    return name, json.loads(data) if data else None


async def _next(
    stream: AsyncIterator[bytes], timeout: float = 3.0
) -> tuple[str | None, dict[str, object] | None]:
    return _parse(await asyncio.wait_for(anext(stream), timeout))


async def test_heartbeats_carry_the_last_runner_event_and_new_events_arrive(
    manager: RunManager,
) -> None:
    run = await manager.create(RunConfig(containers=["http://127.0.0.1:9"], reflection_model="m"))
    stream = event_stream(manager, run.run_id, 0, StreamSettings(heartbeat_s=0.05, quiet_after_s=7))
    assert await asyncio.wait_for(anext(stream), 3) == b"retry: 2000\n\n"
    name, beat = await _next(stream)
    assert name == "heartbeat" and beat is not None
    assert (
        beat["last_event_at"] is None and beat["status"] == "created" and beat["quiet_after_s"] == 7
    )
    assert beat["active"] is False
    # Written as another process would (no in-process wake-up): picked up by polling.
    event = await manager.workspace.append_event(run.run_id, "phase", {"phase": "searching"})
    seen = []
    while True:
        name, data = await _next(stream)
        seen.append((name, data))
        if name is None:
            break
    assert seen[-1][1] == event.model_dump(mode="json")
    name, beat = await _next(stream)
    while name != "heartbeat":
        name, beat = await _next(stream)
    assert beat is not None and beat["last_event_at"] == event.ts
    await stream.aclose()


async def test_stream_ends_once_a_run_finished_elsewhere_logged_its_last_event(
    manager: RunManager,
) -> None:
    run = await manager.create(RunConfig(containers=["http://127.0.0.1:9"], reflection_model="m"))
    stream = event_stream(manager, run.run_id, 0, StreamSettings(heartbeat_s=10))
    await anext(stream)
    await manager.workspace.update_run(run.run_id, status="completed", phase="completed")
    await manager.workspace.append_event(run.run_id, "phase", {"phase": "completed"})
    messages = [_parse(chunk) async for chunk in stream]
    assert messages[-1] == ("end", {"status": "completed", "phase": "completed", "error": None})
    runner = [data for name, data in messages if name is None]
    assert runner and runner[-1] is not None and runner[-1]["data"] == {"phase": "completed"}


async def test_service_shutdown_ends_open_streams_with_a_reason(manager: RunManager) -> None:
    run = await manager.create(RunConfig(containers=["http://127.0.0.1:9"], reflection_model="m"))
    stream = event_stream(manager, run.run_id, 0, StreamSettings(heartbeat_s=10))
    await anext(stream)
    await _next(stream)  # the first heartbeat
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)
    await manager.shutdown()
    name, data = _parse(await asyncio.wait_for(pending, 3))
    assert name == "end" and data is not None and "stopping" in str(data["reason"])
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
