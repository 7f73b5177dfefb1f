"""SQL of the ``events`` table: the append-only event log behind live feeds and SSE.

``seq`` is ``INTEGER PRIMARY KEY AUTOINCREMENT``: strictly increasing over the whole
workspace and never reused, so a client that saw ``seq = n`` resumes with ``after_seq=n``.
"""

from __future__ import annotations

import time
from typing import Any

import aiosqlite

from schemas.records import Event
from workspace.codec import dumps, loads

__all__ = ["append_event", "events_since"]


async def append_event(
    conn: aiosqlite.Connection, run_id: str, type: str, data: dict[str, Any]
) -> Event:
    """Append one event (``data`` already scrubbed) and return it with its ``seq``."""
    ts = time.time()
    rows = list(
        await conn.execute_fetchall(
            "INSERT INTO events (run_id, type, data, ts) VALUES (?,?,?,?) RETURNING seq",
            (run_id, type, dumps(data, what=f"event {type!r} data"), ts),
        )
    )
    return Event(seq=rows[0][0], run_id=run_id, type=type, data=data, ts=ts)


async def events_since(
    conn: aiosqlite.Connection, run_id: str | None, after_seq: int, limit: int
) -> list[Event]:
    """Events with ``seq > after_seq`` in order, of one run (or all runs for ``None``)."""
    where, params = (
        ("seq > ?", [after_seq])
        if run_id is None
        else ("run_id = ? AND seq > ?", [run_id, after_seq])
    )
    rows = await conn.execute_fetchall(
        f"SELECT seq, run_id, type, data, ts FROM events WHERE {where} ORDER BY seq LIMIT ?",
        (*params, max(0, limit)),
    )
    return [
        Event(seq=row[0], run_id=row[1], type=row[2], data=loads(row[3], {}), ts=row[4])
        for row in rows
    ]
