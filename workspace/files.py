"""A run's files (evidence packet, copied inputs, the service's owner file) and where they live.

- SQLite: in the run folder ``<workspace>/runs/<run_id>/`` (:class:`FolderFiles`), beside
  ``workspace.sqlite``: the folder is the record.
- PostgreSQL: in the database, table ``run_files`` (:class:`DatabaseFiles`). Every process
  that shares the store, on any host, reads the same packet and input copies with nothing
  else to share (CI runners have no common disk; many Kubernetes clusters offer no
  ReadWriteMany volume). They are small (a packet is kilobytes, inputs a few megabytes;
  traces are rollout rows already). Whatever needs a real path gets a local copy under the
  run-files folder (``GEPA_RUN_FILES``, default ``./.gepa``): each write is copied there, and
  :meth:`DatabaseFiles.checkout` copies a run's files there before its inputs are loaded on
  another host. The local folder is a cache; the database is the record.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Protocol

import workspace.runs as runs
from schemas.exceptions import UserError, WorkspaceError
from workspace.conn import Conn, Engine
from workspace.runfolder import RunFolder

__all__ = ["DatabaseFiles", "Engine", "FolderFiles", "RunFiles"]


class RunFiles(Protocol):
    """The files of each run, by relative name (``report.md``, ``inputs/dataset.jsonl``)."""

    def path(self, run_id: str) -> Path:
        """The run's local folder (its files are there after a write or a checkout)."""
        ...

    async def write(self, run_id: str, name: str, content: bytes) -> Path:
        """Store one file of an existing run, atomically; its local path."""
        ...

    async def read(self, run_id: str, name: str) -> bytes:
        """One file's bytes; a missing file is a ``UserError``."""
        ...

    async def list(self, run_id: str) -> list[str]:
        """The run's file names, sorted."""
        ...

    async def checkout(self, run_id: str) -> Path:
        """Make every file of the run present in its local folder; the folder."""
        ...

    async def remove(self, run_id: str) -> None:
        """Remove the run's local folder (its stored rows went with the run)."""
        ...


class FolderFiles:
    """The SQLite store's files: the run folder is the record."""

    def __init__(self, root: Path, db: Engine, where: str) -> None:
        self._folder = RunFolder(root)
        self._db = db
        self._where = where

    def path(self, run_id: str) -> Path:
        """The run's folder."""
        return self._folder.path(run_id)

    async def write(self, run_id: str, name: str, content: bytes) -> Path:
        """Write atomically into the run's folder (the run must exist)."""
        self._folder.target(run_id, name)
        async with self._db.read() as conn:
            await runs.require_run(conn, run_id, self._where)
        return await _to_folder(self._folder, run_id, name, content)

    async def read(self, run_id: str, name: str) -> bytes:
        """The file's bytes from the folder."""
        return await asyncio.to_thread(self._folder.read, run_id, name)

    async def list(self, run_id: str) -> list[str]:
        """The folder's files."""
        return await asyncio.to_thread(self._folder.list, run_id)

    async def checkout(self, run_id: str) -> Path:
        """The folder already holds them."""
        return self.path(run_id)

    async def remove(self, run_id: str) -> None:
        """Delete the folder."""
        await asyncio.to_thread(self._folder.remove, run_id)


class DatabaseFiles:
    """The PostgreSQL store's files: rows of ``run_files``, copied to a local folder."""

    def __init__(self, root: Path, db: Engine, where: str) -> None:
        self._folder = RunFolder(root)
        self._db = db
        self._where = where

    def path(self, run_id: str) -> Path:
        """The run's local folder under the run-files folder."""
        return self._folder.path(run_id)

    async def write(self, run_id: str, name: str, content: bytes) -> Path:
        """Store the file (insert or replace), then copy it to the local folder."""
        self._folder.target(run_id, name)

        async def store(conn: Conn) -> None:
            await runs.require_run(conn, run_id, self._where)
            await conn.execute(
                "INSERT INTO run_files (run_id, name, content, updated_at) VALUES (?,?,?,?) "
                "ON CONFLICT (run_id, name) DO UPDATE "
                "SET content = excluded.content, updated_at = excluded.updated_at",
                (run_id, name, content, time.time()),
            )

        await self._db.at_once(store)
        return await _to_folder(self._folder, run_id, name, content)

    async def read(self, run_id: str, name: str) -> bytes:
        """The stored bytes."""
        self._folder.target(run_id, name)
        async with self._db.read() as conn:
            rows = await conn.fetchall(
                "SELECT content FROM run_files WHERE run_id = ? AND name = ?", (run_id, name)
            )
        if not rows:
            raise UserError(f"no file {name!r} in run {run_id!r} of {self._where}")
        return bytes(rows[0][0])

    async def list(self, run_id: str) -> list[str]:
        """The stored names."""
        async with self._db.read() as conn:
            rows = await conn.fetchall(
                "SELECT name FROM run_files WHERE run_id = ? ORDER BY name", (run_id,)
            )
        return [row[0] for row in rows]

    async def checkout(self, run_id: str) -> Path:
        """Copy every stored file of the run to its local folder."""
        async with self._db.read() as conn:
            rows = await conn.fetchall(
                "SELECT name, content FROM run_files WHERE run_id = ? ORDER BY name", (run_id,)
            )
        for name, content in rows:
            await _to_folder(self._folder, run_id, name, bytes(content))
        return self.path(run_id)

    async def remove(self, run_id: str) -> None:
        """Delete the local copies."""
        await asyncio.to_thread(self._folder.remove, run_id)


async def _to_folder(folder: RunFolder, run_id: str, name: str, content: bytes) -> Path:
    try:
        return await asyncio.to_thread(folder.write, run_id, name, content)
    except OSError as exc:
        raise WorkspaceError(f"cannot write {name!r} for run {run_id!r}: {exc}") from exc
