"""SQL that deletes a run: its row, what cascades from it, and the rollouts only it used.

``candidates``, ``events``, ``frontier`` and ``trials`` reference ``runs`` with ``ON DELETE
CASCADE``. The ``rollouts`` table is also the cache shared by every run of the workspace,
so a rollout the run paid for is deleted only when no other run's trial uses it (by id, or
as a cache hit by key): deleting one run never changes what another run shows or resumes.
"""

from __future__ import annotations

import time

from schemas.exceptions import RunLeased
from workspace.conn import Conn
from workspace.lease import fetch_lease, leased_message, stale_reason
from workspace.runs import require_run

__all__ = ["delete_run_rows", "delete_unheld_run"]

# SQLite plans NOT IN over a subquery with a temporary index (no index on trials.cache_key).
_ORPHANED_ROLLOUTS = """
DELETE FROM rollouts
 WHERE run_id = ?
   AND id NOT IN (SELECT rollout_id FROM trials WHERE rollout_id IS NOT NULL)
   AND cache_key NOT IN (SELECT cache_key FROM trials)
"""
# PostgreSQL hashes a NOT IN subquery only while it fits work_mem (else it rescans it per
# row); NOT EXISTS is an anti-join at any size. Same rows: neither column holds NULLs here.
_ORPHANED_ROLLOUTS_PG = """
DELETE FROM rollouts AS r
 WHERE r.run_id = ?
   AND NOT EXISTS (SELECT 1 FROM trials AS t WHERE t.rollout_id = r.id)
   AND NOT EXISTS (SELECT 1 FROM trials AS t WHERE t.cache_key = r.cache_key)
"""


async def delete_run_rows(conn: Conn, run_id: str) -> dict[str, int]:
    """Delete ``run_id`` and its rows (in the caller's transaction); counts of what went."""
    counts = {}
    for table in ("candidates", "events", "frontier", "trials"):
        rows = await conn.fetchall(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,))
        counts[table] = int(rows[0][0])
    # The run first: its trials cascade away, so the rollouts they pinned become deletable.
    await conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    orphaned = _ORPHANED_ROLLOUTS_PG if conn.dialect.postgres else _ORPHANED_ROLLOUTS
    counts["rollouts"] = await conn.execute(orphaned, (run_id,))
    return counts


async def delete_unheld_run(conn: Conn, run_id: str, where: str) -> dict[str, int]:
    """:func:`delete_run_rows` of a run no live process holds (its lease); else ``RunLeased``.
    An unknown run is a ``UserError``."""
    await require_run(conn, run_id, where, lock=True)
    holder = await fetch_lease(conn, run_id)
    if holder is not None and stale_reason(holder, now=time.time()) is None:
        raise RunLeased(leased_message(holder))
    return await delete_run_rows(conn, run_id)
