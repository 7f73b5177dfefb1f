"""SQL of the ``events`` table: the append-only event log behind live feeds and SSE.

``seq`` is strictly increasing over the whole workspace and never reused, so a client that
saw ``seq = n`` resumes with ``after_seq=n``. That needs more than a sequence: a reader must
never see ``seq = n + 1`` before ``n`` is committed, or it would skip ``n`` for good. SQLite
has one writer at a time, so numbers are committed in order. PostgreSQL hands out sequence
numbers to concurrent transactions that may commit in another order, so each append first
takes a transaction-scoped advisory lock: appends (from every process) then commit one after
the other, in ``seq`` order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from schemas.records import Event
from workspace.codec import dumps, loads
from workspace.conn import Conn

__all__ = ["EVENT_LOCK", "append_event", "events_since"]

# The advisory lock key that orders appends on PostgreSQL ("GEPAevnt" as a 64-bit number).
EVENT_LOCK = 0x4745_5041_6576_6E74


async def append_event(
    conn: Conn, run_id: str, type: str, data: dict[str, Any], text: str | None = None
) -> Event:
    """Append one event (``data`` already scrubbed; ``text``, its JSON, if made already)
    and return it with its ``seq``."""
    if text is None:
        text = dumps(data, what=f"event {type!r} data")
    if conn.dialect.postgres:
        await conn.fetchall("SELECT pg_advisory_xact_lock(?)", (EVENT_LOCK,))
    ts = time.time()
    rows = await conn.fetchall(
        "INSERT INTO events (run_id, type, data, ts) VALUES (?,?,?,?) RETURNING seq",
        (run_id, type, text, ts),
    )
    return Event(seq=rows[0][0], run_id=run_id, type=type, data=data, ts=ts)


async def events_since(
    conn: Conn,
    run_id: str | None,
    after_seq: int,
    limit: int,
    types: Sequence[str] | None = None,
) -> list[Event]:
    """Events with ``seq > after_seq`` in order, of one run (or all runs for ``None``);
    with ``types``, only events of those types."""
    clauses: list[str] = ["seq > ?"]
    params: list[object] = [after_seq]
    if run_id is not None:
        clauses.insert(0, "run_id = ?")
        params.insert(0, run_id)
    if types is not None:
        if not types:
            return []
        clauses.append(f"type IN ({','.join('?' * len(types))})")
        params.extend(types)
    rows = await conn.fetchall(
        f"SELECT seq, run_id, type, data, ts FROM events WHERE {' AND '.join(clauses)} "
        "ORDER BY seq LIMIT ?",
        (*params, max(0, limit)),
    )
    return [
        Event(seq=row[0], run_id=row[1], type=row[2], data=loads(row[3], {}), ts=row[4])
        for row in rows
    ]
