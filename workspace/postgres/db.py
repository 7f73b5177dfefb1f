"""The PostgreSQL store's connections: one bounded psycopg pool, its reads and transactions.

Opening connects once on its own, to name a bad URL, password, database or a server that
is down (:mod:`workspace.postgres.errors`) and to migrate the schema under the migration
lock (:mod:`workspace.postgres.schema`); only then is the pool opened, so no worker ever
sees an old schema. The pool holds at most ``pool_size`` connections, in autocommit mode:
a read is one statement on any of them, a write is an explicit ``BEGIN ... COMMIT``.

Durability: a ``COMMIT`` returns once the server has flushed it to its WAL (PostgreSQL's
default ``synchronous_commit = on``), so a killed client loses nothing it was told is
stored, and a transaction cut off by the kill is rolled back by the server. As in
:mod:`workspace.db`, the ``COMMIT`` is shielded: once sent it completes, and the connection
goes back to the pool, even if the caller is cancelled.

A server that restarts or fails over under a run is ridden out (:mod:`workspace.postgres.retry`,
:mod:`workspace.postgres.pool`): once the server answers again the pool is replaced, a read's
statement runs again, a transaction (:meth:`PostgresDatabase.at_once`) runs again whole unless
the server says it committed; past the outage limit, ``StoreUnreachable``.

Several processes write at once here, unlike SQLite. The SQL that reads before it writes
locks what it reads (see :mod:`workspace.conn`); the rollout cache and the event log have
their own rules (:mod:`workspace.rollouts`, :mod:`workspace.events`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, TypeVar

import psycopg
from psycopg.rows import RowMaker
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from schemas.exceptions import WorkspaceError
from workspace.conn import POSTGRES, Conn, Row
from workspace.location import mask_url
from workspace.postgres.errors import bad_url, connect_failed, server_of
from workspace.postgres.pool import Connections
from workspace.postgres.retry import OUTAGE_LIMIT_S, Outage, is_conflict, is_lost
from workspace.postgres.schema import PG_SCHEMA_VERSION, check_version, migrate, needs_migration

T = TypeVar("T")

__all__ = ["PgConn", "PostgresDatabase"]

_CONNECT_TIMEOUT_S = 10
MAX_CONFLICTS = 5  # deadlocks in a row a transaction is run again after
_Conn: TypeAlias = "psycopg.AsyncConnection[Any]"


class _Row(tuple[Any, ...]):
    """A row by index, by column name (like ``sqlite3.Row``), or unpacked."""

    __slots__ = ()
    names: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)


@functools.lru_cache(maxsize=256)
def _row_class(names: tuple[str, ...]) -> type[_Row]:
    return type("Row", (_Row,), {"__slots__": (), "names": {n: i for i, n in enumerate(names)}})


def _rows(cursor: Any) -> RowMaker[Any]:
    description = cursor.description
    if description is None:
        return tuple  # a statement without result columns
    return _row_class(tuple(column.name for column in description))


@functools.lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    """The SQL modules' ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgConn:
    """:class:`workspace.conn.Conn` over one pooled psycopg connection."""

    dialect = POSTGRES

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.raw = conn

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one statement."""
        cursor = await self.raw.execute(_pg(sql), params)  # type: ignore[arg-type]
        return await cursor.fetchall() if cursor.description is not None else []

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        cursor = await self.raw.execute(_pg(sql), params)  # type: ignore[arg-type]
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row (pipelined: one round trip)."""
        batch = list(rows)
        if batch:
            async with self.raw.cursor() as cursor:
                await cursor.executemany(_pg(sql), batch)  # type: ignore[arg-type]

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[list[Row]]:
        """Run one statement (``... RETURNING``) once per parameter row; each run's rows."""
        if not rows:
            return []
        found: list[list[Row]] = []
        async with self.raw.cursor() as cursor:
            await cursor.executemany(_pg(sql), rows, returning=True)  # type: ignore[arg-type]
            async for result in cursor.results():
                found.append(await result.fetchall())
        return found


class PostgresDatabase:
    """Owner of the pool of one PostgreSQL store; opens, migrates, runs transactions."""

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        readonly: bool = False,
        pool_size: int = 8,
        timeout_s: float = 30.0,
        outage_limit_s: float = OUTAGE_LIMIT_S,
    ) -> None:
        self.url = url
        self.where = mask_url(url)
        self.readonly = readonly
        self.pool_size = pool_size
        self.timeout_s = timeout_s
        self._outage = Outage(self.where, outage_limit_s)
        self._conns = Connections(
            url, {}, size=pool_size, timeout_s=timeout_s, readonly=readonly,
            outage=self._outage,
        )  # fmt: skip

    @property
    def reachable(self) -> bool:
        """Whether the server answers (``False`` from a lost statement until one succeeds)."""
        return self._outage.since is None

    def _kwargs(self) -> dict[str, Any]:
        try:
            given = psycopg.conninfo.conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as exc:
            raise bad_url(self.url, exc) from exc
        extra: dict[str, Any] = {"autocommit": True, "row_factory": _rows}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = _CONNECT_TIMEOUT_S
        if "application_name" not in given:
            extra["application_name"] = "gepa-runtime"
        return extra

    async def open(self) -> None:
        """Check the server and the schema (migrating it, as a writer), then open the pool."""
        if self._conns.pool is not None:
            return
        self._conns.kwargs = self._kwargs()
        try:
            first = await psycopg.AsyncConnection.connect(self.url, **self._conns.kwargs)
        except psycopg.Error as exc:
            raise connect_failed(self.url, exc) from exc
        try:
            await self._schema(first)
        except psycopg.errors.InsufficientPrivilege as exc:
            s = server_of(self.url)
            raise WorkspaceError(
                f"user {s['user']!r} may not create the store's tables in database "
                f"{s['dbname']!r} at {s['host']}:{s['port']} ({exc}): make it the database's "
                "owner, or GRANT CREATE ON SCHEMA public TO it"
            ) from exc
        except psycopg.Error as exc:
            raise WorkspaceError(f"cannot open the store at {self.where}: {exc}") from exc
        finally:
            await first.close()
        await self._conns.open(self.where)

    async def _schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if not self.readonly:
            await migrate(conn, self.where)
            return
        # As with SQLite: wait out a writer that is upgrading the schema (no store at all
        # is said at once, as a missing workspace.sqlite is).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while (version := await check_version(conn, self.where)) < PG_SCHEMA_VERSION:
            if version == 0 or loop.time() > deadline:
                raise needs_migration(self.where, version)
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Close the pool (waits for connections in use to come back). Safe to call twice."""
        await self._conns.close()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Conn]:
        """A pooled connection for reads: each statement sees what is committed, and one that
        the server's going away cut off runs again on a new connection (reads change nothing)."""
        pool, raw = await self._conns.get(self.where, "reading")
        conn = _ReadConn(self, pool, raw)
        try:
            yield conn
        except psycopg.Error as exc:
            raise WorkspaceError(f"reading {self.where} failed: {exc}") from exc
        finally:
            await asyncio.shield(self._conns.put(conn.pool, conn.raw))

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Conn]:
        """One ``BEGIN ... COMMIT`` transaction on a pooled connection; durable on exit.

        Any exception rolls it back. The ``COMMIT`` (or ``ROLLBACK``) and the connection's
        return to the pool are shielded from the caller's cancellation. Not retried: the
        store's own writes go through :meth:`at_once`, which is.
        """
        self._writer()
        pool, conn = await self._conns.get(self.where, "writing")
        try:
            await conn.execute("BEGIN")
            yield PgConn(conn)
        except psycopg.Error as exc:
            await asyncio.shield(self._end(pool, conn, "ROLLBACK"))
            raise WorkspaceError(f"writing {self.where} failed: {exc}") from exc
        except BaseException:
            await asyncio.shield(self._end(pool, conn, "ROLLBACK"))
            raise
        try:
            await asyncio.shield(self._end(pool, conn, "COMMIT"))
        except psycopg.Error as exc:
            raise WorkspaceError(f"writing {self.where} failed: {exc}") from exc

    async def at_once(self, body: Callable[[Conn], Awaitable[T]]) -> T:
        """``body`` in one ``BEGIN ... COMMIT`` transaction, run again whole when the server
        went away before it committed, or rolled it back to break a deadlock (``body`` must do
        nothing but its statements).

        The transaction id is read with ``BEGIN`` (the same round trip): when the connection
        drops while ``COMMIT`` is on its way, the server says whether it committed, and a
        committed body is not run twice. Gives up with ``StoreUnreachable`` past the outage
        limit.
        """
        self._writer()
        conflicts = 0
        while True:
            attempt = _Attempt()
            try:
                result = await self._transaction(body, attempt)
            except (psycopg.Error, PoolTimeout) as exc:
                if is_conflict(exc) and conflicts < MAX_CONFLICTS:
                    conflicts += 1
                    continue
                if not attempt.lost:
                    raise WorkspaceError(f"writing {self.where} failed: {exc}") from exc
                if attempt.committing and await self._committed(attempt.xid):
                    self._outage.ok()
                    return attempt.result  # type: ignore[return-value]
                await self._conns.lost(exc, "writing")
                continue
            self._outage.ok()
            return result

    async def _transaction(self, body: Callable[[Conn], Awaitable[T]], attempt: _Attempt) -> T:
        pool, conn = await self._conns.get(self.where, "writing")
        try:
            cursor = await conn.execute("BEGIN; SELECT txid_current()")
            cursor.nextset()
            row = await cursor.fetchone()
            attempt.xid = int(row[0]) if row else None
            attempt.result = await body(PgConn(conn))
            attempt.committing = True
        except BaseException as exc:
            attempt.lost = is_lost(exc, conn)
            await asyncio.shield(self._end(pool, conn, "ROLLBACK"))
            raise
        try:
            await asyncio.shield(self._end(pool, conn, "COMMIT"))
        except psycopg.Error as exc:
            attempt.lost = is_lost(exc, conn)
            raise
        return attempt.result  # type: ignore[no-any-return]

    async def _committed(self, xid: int | None) -> bool:
        """Whether transaction ``xid``, cut off while committing, committed (asked until the
        server answers, within the outage limit)."""
        if xid is None:
            return False
        while True:
            pool, conn = await self._conns.get(self.where, "writing")
            try:
                cursor = await conn.execute("SELECT txid_status(%s)", (xid,))
                row = await cursor.fetchone()
            except psycopg.Error as exc:
                if not is_lost(exc, conn):
                    raise
                await self._conns.lost(exc, "writing")
                continue
            finally:
                await asyncio.shield(self._conns.put(pool, conn))
            status = row[0] if row else None
            if status != "in progress":
                return bool(status == "committed")
            await asyncio.sleep(0.05)

    def _writer(self) -> None:
        if self.readonly:
            raise WorkspaceError(
                f"workspace {self.where} is opened read-only; writes go through the "
                "process that runs the optimizer"
            )
        self._conns.opened(self.where)

    @staticmethod
    async def _end(pool: AsyncConnectionPool[Any], conn: _Conn, sql: str) -> None:
        try:
            if sql == "COMMIT":
                await conn.execute("COMMIT")
            elif not conn.closed:
                # A broken connection cannot roll back; the server drops its transaction.
                with contextlib.suppress(psycopg.OperationalError):
                    await conn.execute("ROLLBACK")
        finally:
            await Connections.put(pool, conn)


@dataclass
class _Attempt:
    """How far one try of :meth:`PostgresDatabase.at_once` got."""

    xid: int | None = None
    result: object = None
    committing: bool = False  # the body finished: COMMIT was (about to be) sent
    lost: bool = False  # it failed because the server went away


class _ReadConn(PgConn):
    """A read connection whose statements run again on a new connection when the server
    went away (each is its own implicit transaction: running it again is safe)."""

    def __init__(self, db: PostgresDatabase, pool: AsyncConnectionPool[Any], conn: _Conn) -> None:
        super().__init__(conn)
        self._db, self.pool = db, pool

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one statement."""
        while True:
            try:
                rows = await super().fetchall(sql, params)
            except psycopg.Error as exc:
                await self._again(exc)
                continue
            self._db._outage.ok()
            return rows

    async def _again(self, exc: psycopg.Error) -> None:
        if not is_lost(exc, self.raw):
            raise exc
        await asyncio.shield(Connections.put(self.pool, self.raw))
        await self._db._conns.lost(exc, "reading")
        self.pool, self.raw = await self._db._conns.get(self._db.where, "reading")
