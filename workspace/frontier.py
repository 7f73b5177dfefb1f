"""SQL of the ``frontier`` table: a run's per-seed Pareto frontier, replaced as a whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workspace.codec import dumps, loads
from workspace.conn import Conn

__all__ = ["load_frontier", "save_frontier"]


async def save_frontier(
    conn: Conn,
    run_id: str,
    frontier: Mapping[str, Sequence[str]],
    scores: Mapping[str, float],
) -> None:
    """Replace the run's frontier: seed -> winning candidate ids, seed -> best score.

    The caller holds the run's row lock (``require_run(lock=True)``) on PostgreSQL, so two
    replacements of one run's frontier never interleave.
    """
    await conn.execute("DELETE FROM frontier WHERE run_id = ?", (run_id,))
    seeds = list(dict.fromkeys([*frontier, *scores]))
    await conn.executemany(
        "INSERT INTO frontier (run_id, seed, candidates, score) VALUES (?,?,?,?)",
        [
            (
                run_id,
                seed,
                dumps(list(frontier[seed])) if seed in frontier else None,
                float(scores[seed]) if seed in scores else None,
            )
            for seed in seeds
        ],
    )


async def load_frontier(conn: Conn, run_id: str) -> tuple[dict[str, list[str]], dict[str, float]]:
    """The run's last saved frontier and scores (empty if never saved), in saved order."""
    rows = await conn.fetchall(
        "SELECT seed, candidates, score FROM frontier WHERE run_id = ? "
        f"ORDER BY {conn.dialect.insertion_order}",
        (run_id,),
    )
    frontier: dict[str, list[str]] = {}
    scores: dict[str, float] = {}
    for seed, candidates, score in rows:
        if candidates is not None:
            frontier[seed] = loads(candidates, [])
        if score is not None:
            scores[seed] = score
    return frontier, scores
