"""SQL of the ``runs`` table. Callers pass an already-scrubbed config and state."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite

from schemas.exceptions import UserError
from schemas.records import RunRecord
from workspace.codec import dumps, loads

__all__ = ["fetch_run", "insert_run", "list_runs", "replace_run", "require_run", "unknown_run"]

_COLUMNS = (
    "run_id, config, status, phase, program_id, fingerprint, error, state, created_at, updated_at"
)


def unknown_run(run_id: str, root: Path) -> UserError:
    """The error for a run id that is not in the workspace at ``root``."""
    return UserError(
        f"unknown run {run_id!r} in {root}; list runs with: "
        f"gepa-runtime runs list --workspace {root}"
    )


def _to_record(row: sqlite3.Row) -> RunRecord:
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


async def insert_run(conn: aiosqlite.Connection, run: RunRecord, root: Path) -> None:
    """Insert a new run; an existing id is a ``UserError``."""
    existing = await conn.execute_fetchall("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,))
    if list(existing):
        raise UserError(f"run {run.run_id!r} already exists in {root}; pick another run id")
    await conn.execute(f"INSERT INTO runs ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", _params(run))


async def fetch_run(conn: aiosqlite.Connection, run_id: str, root: Path) -> RunRecord:
    """The run ``run_id``; unknown is a ``UserError`` that says how to list runs."""
    rows = list(
        await conn.execute_fetchall(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))
    )
    if not rows:
        raise unknown_run(run_id, root)
    return _to_record(rows[0])


async def require_run(conn: aiosqlite.Connection, run_id: str, root: Path) -> None:
    """Raise the unknown-run ``UserError`` unless ``run_id`` exists."""
    if not list(await conn.execute_fetchall("SELECT 1 FROM runs WHERE run_id = ?", (run_id,))):
        raise unknown_run(run_id, root)


async def list_runs(conn: aiosqlite.Connection) -> list[RunRecord]:
    """Every run, newest first."""
    rows = await conn.execute_fetchall(
        f"SELECT {_COLUMNS} FROM runs ORDER BY created_at DESC, rowid DESC"
    )
    return [_to_record(row) for row in rows]


async def replace_run(conn: aiosqlite.Connection, run: RunRecord) -> None:
    """Overwrite every column of an existing run with ``run``."""
    params = _params(run)
    await conn.execute(
        "UPDATE runs SET config = ?, status = ?, phase = ?, program_id = ?, fingerprint = ?, "
        "error = ?, state = ?, created_at = ?, updated_at = ? WHERE run_id = ?",
        (*params[1:], params[0]),
    )
