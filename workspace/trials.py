"""SQL of the ``trials`` table: a run's use of each rollout, paid or served from the cache.

It is the run's trials feed (the console lists it) and the source of its rollout counts.
A run may hold a million trials, and the console asks for its counts and for its newest
page every few seconds, so neither scans the run: ``trial_counts`` keeps each run's counts,
updated in the transaction that appends the trials, and each trial has its position in the
run (``pos``, 0, 1, 2, ... in order), so a page at any offset is an index range. The counts
row is also the run's append lock: on PostgreSQL the upsert holds it until the commit, so
two transactions appending to one run number their trials one after the other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from schemas.records import RolloutRecord, Trial, TrialView
from workspace.codec import loads
from workspace.conn import Conn, Row

__all__ = ["count_trials", "insert_trials", "list_trials", "paid_trials"]

_COUNT = (
    "INSERT INTO trial_counts (run_id, trials, paid, cached, errors) VALUES (?,?,?,?,?) "
    "ON CONFLICT (run_id) DO UPDATE SET trials = trial_counts.trials + excluded.trials, "
    "paid = trial_counts.paid + excluded.paid, cached = trial_counts.cached + excluded.cached, "
    "errors = trial_counts.errors + excluded.errors RETURNING trials"
)


def paid_trials(run_id: str, records: Sequence[RolloutRecord], ids: Sequence[int]) -> list[Trial]:
    """The run's paid uses of the rollouts ``records``, stored with row ids ``ids``."""
    return [
        Trial(
            run_id=run_id,
            candidate_id=r.candidate_id,
            seed=r.seed,
            cache_key=r.cache_key,
            cached=False,
            status=r.status,
            rollout_id=i,
        )
        for r, i in zip(records, ids, strict=True)
    ]


async def insert_trials(conn: Conn, run_id: str, trials: Sequence[Trial]) -> None:
    """Append ``trials`` to the run's feed, in order, and count them."""
    if not trials:
        return
    paid = sum(1 for t in trials if t.status == "ok" and not t.cached)
    cached = sum(1 for t in trials if t.cached)
    errors = sum(1 for t in trials if t.status == "error")
    rows = await conn.fetchall(_COUNT, (run_id, len(trials), paid, cached, errors))
    first = int(rows[0][0]) - len(trials)
    now = time.time()
    await conn.executemany(
        "INSERT INTO trials (run_id, candidate_id, seed, cache_key, cached, status, rollout_id,"
        " created_at, pos) VALUES (?,?,?,?,?,?,?,?,?)",
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
                first + i,
            )
            for i, t in enumerate(trials)
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
        " WHERE t.run_id = ? AND t.pos >= ? ORDER BY t.pos LIMIT ?",
        (run_id, max(0, offset), max(0, limit)),
    )
    return [_to_view(row) for row in rows]


async def count_trials(conn: Conn, run_id: str) -> dict[str, int]:
    """``{"paid", "cached", "errors"}``: a partition of the run's trials.

    ``paid`` are successful container calls, ``cached`` were served from the cache (always
    successful), ``errors`` are rollouts that failed after their retries (paid, not scored).
    """
    rows = await conn.fetchall(
        "SELECT paid, cached, errors FROM trial_counts WHERE run_id = ?", (run_id,)
    )
    paid, cached, errors = rows[0] if rows else (0, 0, 0)
    return {"paid": int(paid), "cached": int(cached), "errors": int(errors)}
