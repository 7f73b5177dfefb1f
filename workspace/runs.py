"""SQL of the ``runs`` table. Callers pass an already-scrubbed config and state."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from schemas.exceptions import UserError
from schemas.records import RunRecord
from workspace.codec import dumps, loads
from workspace.conn import Conn, Row

__all__ = [
    "fetch_run",
    "insert_run",
    "list_runs",
    "replace_run",
    "require_run",
    "unknown_run",
    "update_run",
]

_COLUMNS = (
    "run_id, config, status, phase, program_id, fingerprint, error, state, created_at, updated_at"
)


def unknown_run(run_id: str, where: str) -> UserError:
    """The error for a run id that is not in the workspace ``where`` (a folder or a URL)."""
    return UserError(
        f"unknown run {run_id!r} in {where}; list runs with: "
        f"gepa-runtime runs list --workspace {where}"
    )


def _to_record(row: Row) -> RunRecord:
    return RunRecord(
        run_id=row["run_id"],
        config=loads(row["config"], {}),
        status=row["status"],
        phase=row["phase"],
        program_id=row["program_id"],
        fingerprint=row["fingerprint"],
        error=row["error"],
        state=loads(row["state"], {}),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _params(run: RunRecord) -> tuple[object, ...]:
    return (
        run.run_id,
        dumps(run.config, what="run config"),
        run.status,
        run.phase,
        run.program_id,
        run.fingerprint,
        run.error,
        dumps(run.state, what="run state"),
        run.created_at,
        run.updated_at,
    )


async def insert_run(conn: Conn, run: RunRecord, where: str) -> None:
    """Insert a new run; an existing id is a ``UserError`` (also when another process won)."""
    inserted = await conn.execute(
        f"INSERT INTO runs ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT (run_id) DO NOTHING",
        _params(run),
    )
    if not inserted:
        raise UserError(f"run {run.run_id!r} already exists in {where}; pick another run id")


async def fetch_run(conn: Conn, run_id: str, where: str, *, lock: bool = False) -> RunRecord:
    """The run ``run_id``; unknown is a ``UserError`` that says how to list runs.

    ``lock`` holds the row until the transaction ends (PostgreSQL), for a read-modify-write.
    """
    suffix = conn.dialect.lock_rows if lock else ""
    rows = await conn.fetchall(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?{suffix}", (run_id,))
    if not rows:
        raise unknown_run(run_id, where)
    return _to_record(rows[0])


async def require_run(conn: Conn, run_id: str, where: str, *, lock: bool = False) -> None:
    """Raise the unknown-run ``UserError`` unless ``run_id`` exists.

    ``lock`` holds the run's row until the transaction ends (PostgreSQL), so that writers of
    one run's rows that read before they write (lease, frontier, trials) take turns.
    """
    suffix = conn.dialect.lock_rows if lock else ""
    if not await conn.fetchall(f"SELECT 1 FROM runs WHERE run_id = ?{suffix}", (run_id,)):
        raise unknown_run(run_id, where)


async def list_runs(conn: Conn) -> list[RunRecord]:
    """Every run, newest first."""
    rows = await conn.fetchall(
        f"SELECT {_COLUMNS} FROM runs ORDER BY created_at DESC, {conn.dialect.insertion_order} DESC"
    )
    return [_to_record(row) for row in rows]


async def replace_run(conn: Conn, run: RunRecord) -> None:
    """Overwrite every column of an existing run with ``run``."""
    params = _params(run)
    await conn.execute(
        "UPDATE runs SET config = ?, status = ?, phase = ?, program_id = ?, fingerprint = ?, "
        "error = ?, state = ?, created_at = ?, updated_at = ? WHERE run_id = ?",
        (*params[1:], params[0]),
    )


async def update_run(conn: Conn, run_id: str, where: str, changes: Mapping[str, Any]) -> RunRecord:
    """Set the fields of ``changes`` that are not ``None``, under the run's row lock; the run
    as it is now."""
    current = await fetch_run(conn, run_id, where, lock=True)
    data = current.model_dump()
    data.update({k: v for k, v in changes.items() if v is not None})
    data["updated_at"] = time.time()
    updated = RunRecord.model_validate(data)
    await replace_run(conn, updated)
    return updated
