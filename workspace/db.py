"""The one aiosqlite connection of a workspace, its pragmas, and its transactions.

Durability: the file is in WAL mode with ``synchronous=NORMAL``. A ``COMMIT`` appends the
transaction to the WAL with a write(2) before it returns, so the data is in the operating
system's page cache: a process killed right after (SIGKILL, OOM, a crash) loses nothing
that was committed, and the database is never corrupted. Only an OS crash or power loss
can drop the last transactions (never corrupt the file); ``FULL`` would fsync each commit
to cover that too, at a large cost per rollout. Losing a few cached rollouts on power loss
only means paying for them again, so NORMAL is the defensible choice.

Concurrency: all use of the connection goes through one ``asyncio.Lock``, so a read never
runs inside another coroutine's open transaction (it would see uncommitted rows). Other
processes (the console) open their own read-only connection; WAL lets them read a
consistent snapshot while this one writes.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import aiosqlite

from schemas.exceptions import WorkspaceError
from workspace.conn import SQLITE, Conn, Row, SqliteConn
from workspace.migrations import SCHEMA_VERSION, check_version, migrate, needs_migration

__all__ = ["Database"]

T = TypeVar("T")


class Database:
    """Owner of one connection to ``workspace.sqlite``; opens, migrates, runs transactions."""

    def __init__(self, path: Path, *, readonly: bool = False, busy_timeout_s: float = 10.0) -> None:
        self.path = path
        self.readonly = readonly
        self.busy_timeout_s = busy_timeout_s
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    reachable = True  # a file: nothing to lose touch with

    async def open(self) -> None:
        """Connect, set the pragmas, and migrate (writer) or check the version (reader)."""
        if self._conn is not None:
            return
        if self.readonly and not self.path.is_file():
            raise WorkspaceError(
                f"no workspace database at {self.path}; pass the folder of an existing "
                "workspace with --workspace DIR (or GEPA_WORKSPACE)"
            )
        try:
            self._conn = await self._connect(immutable=False)
        except sqlite3.Error as exc:
            if not (self.readonly and "unable to open" in str(exc) and not self._writable()):
                raise WorkspaceError(self._open_failed(exc)) from exc
            # A reader of a WAL file needs its -shm file, which a read-only folder cannot
            # hold. Nobody can write there either, so the file is read as immutable.
            try:
                self._conn = await self._connect(immutable=True)
            except sqlite3.Error as again:
                raise WorkspaceError(self._open_failed(again)) from again

    async def _connect(self, *, immutable: bool) -> aiosqlite.Connection:
        mode = "ro" if self.readonly else "rwc"
        uri = f"file:{quote(str(self.path.resolve()))}?mode={mode}" + (
            "&immutable=1" if immutable else ""
        )
        conn = await aiosqlite.connect(
            uri, uri=True, isolation_level=None, timeout=self.busy_timeout_s
        )
        conn.row_factory = sqlite3.Row
        try:
            await self._configure_retrying(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    def _writable(self) -> bool:
        folder = self.path.parent
        if not os.access(folder, os.W_OK):
            return False
        return not self.path.exists() or os.access(self.path, os.W_OK)

    def _open_failed(self, exc: sqlite3.Error) -> str:
        if self._writable():
            return f"cannot use {self.path}: {exc}"
        if self.readonly:
            return f"cannot read {self.path}: {exc} (the folder is read-only)"
        return (
            f"cannot use {self.path}: {exc}. The workspace folder {self.path.parent} is "
            "read-only: pass a writable --workspace DIR (or GEPA_WORKSPACE) or make it "
            "writable; `gepa-runtime runs list | show | export` read a read-only workspace."
        )

    async def _configure_retrying(self, conn: aiosqlite.Connection) -> None:
        # Two openers of a brand-new file race to switch it to WAL; SQLite answers the loser
        # SQLITE_BUSY at once (no busy handler for a journal-mode change). Every step of
        # _configure is idempotent, so retry until the busy timeout.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.busy_timeout_s
        while True:
            try:
                return await self._configure(conn)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or loop.time() > deadline:
                    raise
            await asyncio.sleep(0.02)

    async def _configure(self, conn: aiosqlite.Connection) -> None:
        if self.readonly:
            await conn.execute("PRAGMA query_only = ON")
            await self._await_current_schema(conn)
            return
        # Refuse newer or foreign files before changing anything, journal mode included.
        await check_version(conn, self.path)
        rows = list(await conn.execute_fetchall("PRAGMA journal_mode = WAL"))
        if str(rows[0][0]).lower() != "wal":
            raise WorkspaceError(
                f"{self.path}: SQLite could not switch to WAL mode (got {rows[0][0]!r}); "
                "put the workspace on a local filesystem"
            )
        await conn.execute("PRAGMA synchronous = NORMAL")  # see the module docstring
        await conn.execute("PRAGMA foreign_keys = ON")
        await migrate(conn, self.path)

    async def _await_current_schema(self, conn: aiosqlite.Connection) -> None:
        # A reader can open the file in the instant between a writer creating it and
        # migrating it (version 0), or while a writer upgrades it. Migrations take
        # milliseconds, so wait for them up to the busy timeout before calling it old.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.busy_timeout_s
        while (version := await check_version(conn, self.path)) < SCHEMA_VERSION:
            if loop.time() > deadline:
                raise needs_migration(self.path, version)
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Close the connection (a writer's last close checkpoints and removes the WAL)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            async with self._lock:
                await conn.close()

    def _connection(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise WorkspaceError(
                f"workspace {self.path.parent} is not open; use `async with Workspace(...)` "
                "or `await workspace.open()`"
            )
        return self._conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Conn]:
        """The connection, for reads, with SQLite errors turned into ``WorkspaceError``."""
        conn = self._connection()
        async with self._lock:
            try:
                yield SqliteConn(conn)
            except sqlite3.Error as exc:
                raise WorkspaceError(f"reading {self.path} failed: {exc}") from exc

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Conn]:
        """One ``BEGIN IMMEDIATE ... COMMIT`` transaction; committed (durable) on exit.

        Any exception rolls it back. The ``COMMIT`` is shielded: once it is queued it
        completes even if the caller is cancelled, and a cancellation after that point
        does not try to roll back a committed transaction.
        """
        conn = self._writer()
        async with self._lock:
            try:
                await conn.execute("BEGIN IMMEDIATE")
                yield SqliteConn(conn)
            except sqlite3.Error as exc:
                await asyncio.shield(self._rollback(conn))
                raise WorkspaceError(self._write_failed(exc)) from exc
            except BaseException:
                # Also when BEGIN itself was cancelled: it may still run on the worker thread.
                await asyncio.shield(self._rollback(conn))
                raise
            try:
                await asyncio.shield(conn.execute("COMMIT"))
            except sqlite3.Error as exc:
                await asyncio.shield(self._rollback(conn))
                raise WorkspaceError(self._write_failed(exc)) from exc

    async def at_once(self, body: Callable[[Conn], Awaitable[T]]) -> T:
        """``body`` in one ``BEGIN IMMEDIATE ... COMMIT`` transaction run whole on the
        connection's thread: one round trip to it instead of one per statement (each costs
        a thread hop), for the writes on the rollout queue's hot path.

        ``body`` awaits nothing but its connection's statements, which run there at once;
        awaiting anything else is a ``WorkspaceError`` (and rolls the transaction back).
        Committed (durable) when it returns; any exception rolls it back. Once queued it
        runs to its end even if the caller is cancelled.
        """
        conn = self._writer()
        async with self._lock:
            try:
                # aiosqlite's own way to run a function on its thread (``_execute``), with its
                # sqlite3 connection (``_conn``): not public API; tests/workspace/test_at_once.py
                # fails if a release changes them.
                return await asyncio.shield(conn._execute(_whole, conn._conn, body))
            except sqlite3.Error as exc:
                raise WorkspaceError(self._write_failed(exc)) from exc

    def _writer(self) -> aiosqlite.Connection:
        conn = self._connection()
        if self.readonly:
            raise WorkspaceError(
                f"workspace {self.path.parent} is opened read-only; writes go through the "
                "process that runs the optimizer"
            )
        return conn

    def _write_failed(self, exc: sqlite3.Error) -> str:
        hint = ""
        if "locked" in str(exc) or "busy" in str(exc):
            hint = " (another process holds the write lock; is a second optimizer using it?)"
        return f"writing {self.path} failed: {exc}{hint}"

    @staticmethod
    async def _rollback(conn: aiosqlite.Connection) -> None:
        try:
            await conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            # "no transaction is active": SQLite already rolled back (e.g. after SQLITE_FULL).
            if "no transaction" not in str(exc):
                raise


def _whole(raw: sqlite3.Connection, body: Callable[[Conn], Awaitable[T]]) -> T:
    """On the connection's thread: ``body`` between ``BEGIN IMMEDIATE`` and ``COMMIT``."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        result = _drive(body(_ThreadConn(raw)))
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    return result


def _drive(step: Awaitable[T]) -> T:
    """The result of a coroutine that never suspends (its statements run at once)."""
    coro: Coroutine[Any, Any, T] = step  # type: ignore[assignment]
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise WorkspaceError(
        "a transaction run at once (Database.at_once) awaited something besides its "
        "statements; use Database.write() for that"
    )


class _ThreadConn:
    """The connection of :meth:`Database.at_once`, on its thread: each statement runs at once."""

    dialect = SQLITE

    def __init__(self, raw: sqlite3.Connection) -> None:
        self._raw = raw

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one statement."""
        return list(self._raw.execute(sql, params).fetchall())

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        return self._raw.execute(sql, params).rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        self._raw.executemany(sql, rows)

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[list[Row]]:
        """Run one statement (``... RETURNING``) once per parameter row; each run's rows."""
        return [list(self._raw.execute(sql, params).fetchall()) for params in rows]
