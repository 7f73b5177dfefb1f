"""The connection the SQL modules are written against, the same for SQLite and PostgreSQL.

Each table's module (``runs``, ``rollouts``, ``trials``, ...) takes a :class:`Conn` and
writes its SQL once, with ``?`` placeholders; the PostgreSQL connection translates them.
Rows answer by index, by column name and unpack as tuples on both. The few statements
that differ between the engines ask ``conn.dialect``: how rows are ordered by insertion
where a table has no sequence column, how a transaction locks a row it will change, and
the PostgreSQL-only steps (an advisory lock that orders the event log).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import aiosqlite

__all__ = ["POSTGRES", "SQLITE", "Conn", "Dialect", "Engine", "Row", "SqliteConn"]

T = TypeVar("T")

# sqlite3.Row, or the PostgreSQL row (workspace.postgres.db): row[0], row["name"], unpacking.
Row: TypeAlias = Any


@dataclass(frozen=True)
class Dialect:
    """What a statement may need to know about the engine it runs on."""

    name: str
    insertion_order: str  # the column that orders a table's rows as they were inserted
    lock_rows: str  # suffix of a SELECT that locks its rows until the transaction ends

    @property
    def postgres(self) -> bool:
        """Whether this is PostgreSQL (several processes may write at once)."""
        return self.name == "postgres"


# SQLite has one writer at a time (BEGIN IMMEDIATE): a transaction's reads are already locked.
# PostgreSQL's NO KEY UPDATE makes read-modify-writes of one run take turns without holding
# up the inserts that only reference the run (trials, events: their foreign key checks).
SQLITE = Dialect("sqlite", insertion_order="rowid", lock_rows="")
POSTGRES = Dialect("postgres", insertion_order="seq", lock_rows=" FOR NO KEY UPDATE")


class Conn(Protocol):
    """One connection inside a read or a write transaction of the store."""

    dialect: Dialect

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one statement."""
        ...

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        ...

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[list[Row]]:
        """Run one statement (``... RETURNING``) once per parameter row; each run's rows."""
        ...


class Engine(Protocol):
    """What the table modules need of a database (``workspace.db``, ``workspace.postgres``):
    reads, and write transactions run whole (again, on PostgreSQL, after a restart)."""

    def read(self) -> AbstractAsyncContextManager[Conn]:
        """A connection for reads."""
        ...

    async def at_once(self, body: Callable[[Conn], Awaitable[T]]) -> T:
        """``body`` in one write transaction; its result once committed."""
        ...


class SqliteConn:
    """:class:`Conn` over an aiosqlite connection (its ``row_factory`` is ``sqlite3.Row``)."""

    dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.raw = conn

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one statement."""
        return list(await self.raw.execute_fetchall(sql, params))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        cursor = await self.raw.execute(sql, params)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        await self.raw.executemany(sql, rows)

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[list[Row]]:
        """Run one statement (``... RETURNING``) once per parameter row; each run's rows."""
        return [await self.fetchall(sql, params) for params in rows]
