"""SQL of the ``trials`` table: a run's use of each rollout, paid or served from the cache.

It is the run's trials feed (the console lists it) and the source of its rollout counts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from schemas.records import Trial, TrialView
from workspace.codec import loads
from workspace.conn import Conn, Row

__all__ = ["count_trials", "insert_trials", "list_trials"]


async def insert_trials(conn: Conn, run_id: str, trials: Sequence[Trial]) -> None:
    """Append ``trials`` to the run's feed, in order."""
    now = time.time()
    await conn.executemany(
        "INSERT INTO trials (run_id, candidate_id, seed, cache_key, cached, status, rollout_id,"
        " created_at) VALUES (?,?,?,?,?,?,?,?)",
        [
            (
                run_id,
                t.candidate_id,
                t.seed,
                t.cache_key,
                int(t.cached),
                t.status,
                t.rollout_id,
                now,
            )
            for t in trials
        ],
    )


def _to_view(row: Row) -> TrialView:
    return TrialView(
        seq=row["seq"],
        run_id=row["run_id"],
        candidate_id=row["candidate_id"],
        seed=row["seed"],
        cache_key=row["cache_key"],
        cached=bool(row["cached"]),
        status=row["status"],
        rollout_id=row["rollout_id"],
        reward=row["reward"],
        objectives=loads(row["objectives"], {}),
        output=loads(row["output"]),
        feedback=row["feedback"] or "",
        error=row["error"],
        latency_ms=row["latency_ms"] or 0.0,
        trace_id=row["trace_id"],
        created_at=row["created_at"],
    )


async def list_trials(
    conn: Conn, run_id: str, *, offset: int = 0, limit: int = 100
) -> list[TrialView]:
    """A page of the run's trials in order, each with its rollout's results (no trace)."""
    rows = await conn.fetchall(
        "SELECT t.seq, t.run_id, t.candidate_id, t.seed, t.cache_key, t.cached, t.status,"
        " t.rollout_id, t.created_at, r.reward, r.objectives, r.output, r.feedback, r.error,"
        " r.latency_ms, r.trace_id FROM trials AS t LEFT JOIN rollouts AS r ON r.id = t.rollout_id"
        " WHERE t.run_id = ? ORDER BY t.seq LIMIT ? OFFSET ?",
        (run_id, max(0, limit), max(0, offset)),
    )
    return [_to_view(row) for row in rows]


async def count_trials(conn: Conn, run_id: str) -> dict[str, int]:
    """``{"paid", "cached", "errors"}``: a partition of the run's trials.

    ``paid`` are successful container calls, ``cached`` were served from the cache (always
    successful), ``errors`` are rollouts that failed after their retries (paid, not scored).
    """
    rows = await conn.fetchall(
        "SELECT COALESCE(SUM(CASE WHEN status = 'ok' AND cached = 0 THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN cached = 1 THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END), 0)"
        " FROM trials WHERE run_id = ?",
        (run_id,),
    )
    paid, cached, errors = rows[0]
    return {"paid": int(paid), "cached": int(cached), "errors": int(errors)}
