"""SQL that deletes a run: its row, what cascades from it, and the rollouts only it used.

``candidates``, ``events``, ``frontier`` and ``trials`` reference ``runs`` with ``ON DELETE
CASCADE``. The ``rollouts`` table is also the cache shared by every run of the workspace,
so a rollout the run paid for is deleted only when no other run's trial uses it (by id, or
as a cache hit by key): deleting one run never changes what another run shows or resumes.
"""

from __future__ import annotations

from workspace.conn import Conn

__all__ = ["delete_run_rows"]

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
