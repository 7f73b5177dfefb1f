"""SQL that deletes a run: its row, what cascades from it, and the rollouts only it used.

``candidates``, ``events``, ``frontier`` and ``trials`` reference ``runs`` with ``ON DELETE
CASCADE``. The ``rollouts`` table is also the cache shared by every run of the workspace,
so a rollout the run paid for is deleted only when no other run's trial uses it (by id, or
as a cache hit by key): deleting one run never changes what another run shows or resumes.
"""

from __future__ import annotations

import aiosqlite

__all__ = ["delete_run_rows"]

_ORPHANED_ROLLOUTS = """
DELETE FROM rollouts
 WHERE run_id = ?
   AND id NOT IN (SELECT rollout_id FROM trials WHERE rollout_id IS NOT NULL)
   AND cache_key NOT IN (SELECT cache_key FROM trials)
"""


async def delete_run_rows(conn: aiosqlite.Connection, run_id: str) -> dict[str, int]:
    """Delete ``run_id`` and its rows (in the caller's transaction); counts of what went."""
    counts = {}
    for table in ("candidates", "events", "frontier", "trials"):
        rows = list(
            await conn.execute_fetchall(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,))
        )
        counts[table] = int(rows[0][0])
    # The run first: its trials cascade away, so the rollouts they pinned become deletable.
    await conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    cursor = await conn.execute(_ORPHANED_ROLLOUTS, (run_id,))
    counts["rollouts"] = cursor.rowcount
    return counts
