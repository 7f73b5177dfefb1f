"""A run's events as Server-Sent Events, resumable with ``Last-Event-ID``.

Each runner event is one SSE message ``id: <seq>`` with the event as JSON in ``data`` (its
``type`` inside, so a client sees every type, including ones added later). Two named
events come from the service itself:

- ``heartbeat`` every few seconds: ``{"time", "last_event_at", "status", "phase", "active",
  "quiet_after_s"}`` so a client can tell a quiet runner from a dead connection;
- ``end`` once the run is finished (``completed``, ``failed``, ``cancelled``) and every one
  of its events was sent, when it is deleted (``deleted``), or when the service stops; the
  stream then closes.

A reconnecting ``EventSource`` sends the last ``id`` it saw as ``Last-Event-ID`` and gets the
events after it (``events_since(seq)``); ``?after=N`` does the same for other clients.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from optimizer.service.manager import TERMINAL, RunManager
from schemas import Event, UserError

__all__ = ["StreamSettings", "event_stream", "format_sse"]

PAGE = 500
POLL_S = 1.0  # also catches events written by another process (a CLI run in the workspace)
SETTLE_S = 1.0  # a run finished elsewhere logs its last event right after its status


@dataclass(frozen=True)
class StreamSettings:
    """Timing of the stream."""

    heartbeat_s: float = 5.0
    quiet_after_s: float = 30.0


def format_sse(data: Any, *, event: str | None = None, id: int | None = None) -> bytes:
    """One SSE message; ``data`` is sent as compact JSON on one line."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), default=str))
    return ("\n".join(lines) + "\n\n").encode()


def _message(event: Event) -> bytes:
    return format_sse(event.model_dump(mode="json"), id=event.seq)


async def event_stream(
    manager: RunManager, run_id: str, after: int, settings: StreamSettings
) -> AsyncIterator[bytes]:
    """Replay the run's events after ``after``, then follow them live until the run ends."""
    workspace = manager.workspace
    digest = await manager.digests.get(run_id)
    last_event_at = digest.last_event_at
    yield b"retry: 2000\n\n"
    next_beat = 0.0
    while True:
        events = await workspace.events_since(run_id, after, PAGE)
        for event in events:
            after, last_event_at = event.seq, event.ts
            yield _message(event)
        if len(events) == PAGE:
            continue
        try:
            record = await workspace.get_run(run_id)
        except UserError:  # deleted while followed (DELETE /api/runs/{id})
            yield format_sse(
                {"status": "deleted", "phase": None, "error": f"run {run_id} was deleted"},
                event="end",
            )
            return
        now = time.time()
        if manager.closing.is_set():
            yield format_sse(
                {"status": record.status, "reason": "the service is stopping"}, event="end"
            )
            return
        finished = record.status in TERMINAL and not manager.is_active(run_id)
        if finished and (now - record.updated_at > SETTLE_S or _is_last(events)):
            for event in await workspace.events_since(run_id, after, PAGE):
                after = event.seq
                yield _message(event)
            yield format_sse(
                {"status": record.status, "phase": record.phase, "error": record.error or None},
                event="end",
            )
            return
        if now >= next_beat:
            next_beat = now + settings.heartbeat_s
            yield format_sse(
                {
                    "time": now,
                    "last_event_at": last_event_at,
                    "status": record.status,
                    "phase": record.phase,
                    "active": manager.is_active(run_id),
                    "quiet_after_s": settings.quiet_after_s,
                },
                event="heartbeat",
            )
        await manager.wait_for_news(run_id, min(POLL_S, max(0.05, next_beat - time.time())))


def _is_last(events: list[Event]) -> bool:
    """Whether the batch ends with the event a finished run logs last."""
    if not events:
        return False
    last = events[-1]
    return (last.type == "phase" and last.data.get("phase") in ("completed", "failed")) or (
        last.type == "status" and last.data.get("status") == "cancelled"
    )
