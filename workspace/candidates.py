"""SQL of the ``candidates`` table: a run's candidates with lineage, in creation order."""

from __future__ import annotations

from schemas.exceptions import UserError
from schemas.records import CandidateRecord
from schemas.usage import ModelUsage
from workspace.codec import dumps, loads
from workspace.conn import Conn, Row

__all__ = ["fetch_candidate", "insert_candidate", "list_candidates"]

_COLUMNS = (
    "run_id, candidate_id, content_hash, components, parents, origin, rationale, diffs, "
    "proposer_usage, created_at"
)


def _to_record(row: Row) -> CandidateRecord:
    return CandidateRecord(
        run_id=row["run_id"],
        candidate_id=row["candidate_id"],
        content_hash=row["content_hash"],
        components=loads(row["components"], {}),
        parents=loads(row["parents"], []),
        origin=row["origin"],
        rationale=row["rationale"],
        diffs=loads(row["diffs"], {}),
        proposer_usage=ModelUsage.model_validate(loads(row["proposer_usage"], {})),
        created_at=row["created_at"],
    )


async def insert_candidate(conn: Conn, record: CandidateRecord) -> bool:
    """Insert ``record`` unless ``(run_id, candidate_id)`` exists; whether it was inserted."""
    inserted = await conn.execute(
        f"INSERT INTO candidates ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT (run_id, candidate_id) DO NOTHING",
        (
            record.run_id,
            record.candidate_id,
            record.content_hash,
            dumps(record.components, what="candidate components"),
            dumps(record.parents),
            record.origin,
            record.rationale,
            dumps(record.diffs, what="candidate diffs"),
            record.proposer_usage.model_dump_json(),
            record.created_at,
        ),
    )
    return inserted == 1


async def fetch_candidate(conn: Conn, run_id: str, candidate_id: str) -> CandidateRecord:
    """One candidate of a run; unknown is a ``UserError``."""
    rows = await conn.fetchall(
        f"SELECT {_COLUMNS} FROM candidates WHERE run_id = ? AND candidate_id = ?",
        (run_id, candidate_id),
    )
    if not rows:
        raise UserError(
            f"unknown candidate {candidate_id!r} in run {run_id!r}; a candidate id is the "
            "first 16 hex digits of its content hash (see the run's candidates list)"
        )
    return _to_record(rows[0])


async def list_candidates(conn: Conn, run_id: str) -> list[CandidateRecord]:
    """The run's candidates in creation order."""
    rows = await conn.fetchall(
        f"SELECT {_COLUMNS} FROM candidates WHERE run_id = ? ORDER BY seq", (run_id,)
    )
    return [_to_record(row) for row in rows]
