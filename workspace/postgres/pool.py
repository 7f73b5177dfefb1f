"""The PostgreSQL store's connections: one bounded psycopg pool, replaced after an outage.

The pool holds at most ``size`` connections, in autocommit mode. While the server answers, a
connection comes from the pool. When it goes away (:func:`workspace.postgres.retry.is_lost`),
the caller waits (:class:`workspace.postgres.retry.Outage`) and, before each new try, this
module asks the server directly whether it answers again (one probe at a time for every
caller). Once it does, the pool is replaced by a new one: the old one's connections all died
with the server, and its own reconnection waits, which double while the server is away,
could hold the run up long after the server is back. The old pool is closed in the
background; connections still out of it are closed when they come back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from schemas.exceptions import WorkspaceError
from workspace.postgres.retry import Outage, quiet_pool

__all__ = ["Connections"]

PROBE_TIMEOUT_S = 5  # libpq's connect_timeout of a probe (whole seconds)
Conn = psycopg.AsyncConnection[Any]


class Connections:
    """The connections of one store (see the module docstring)."""

    def __init__(
        self,
        url: str,
        kwargs: dict[str, Any],
        *,
        size: int,
        timeout_s: float,
        readonly: bool,
        outage: Outage,
    ) -> None:
        self.url, self.kwargs = url, kwargs
        self.size, self.timeout_s, self.readonly = size, timeout_s, readonly
        self.outage = outage
        self.pool: AsyncConnectionPool[Any] | None = None
        self._probing = asyncio.Lock()
        self._renewing = asyncio.Lock()
        self._renewed_for: float | None = None  # the outage the pool was replaced after
        self._closing: set[asyncio.Task[None]] = set()

    def _new_pool(self) -> AsyncConnectionPool[Any]:
        return AsyncConnectionPool(
            self.url,
            kwargs=self.kwargs,
            min_size=1,
            max_size=self.size,
            open=False,
            timeout=self.timeout_s,
            reconnect_timeout=max(300.0, self.outage.limit_s),
            configure=_read_only if self.readonly else None,
            name="gepa-workspace",
        )

    async def open(self, where: str) -> None:
        """Open the pool, waiting for its first connection."""
        quiet_pool()
        pool = self._new_pool()
        try:
            await pool.open(wait=True, timeout=self.timeout_s)
        except PoolTimeout as exc:
            await pool.close()
            raise WorkspaceError(
                f"PostgreSQL at {where} stopped answering while the store was opened"
            ) from exc
        self.pool = pool

    async def close(self) -> None:
        """Close the pool (waits for connections in use to come back), and any old one."""
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()
        for task in list(self._closing):
            await task

    def opened(self, where: str) -> AsyncConnectionPool[Any]:
        """The current pool; a store not opened is a ``WorkspaceError``."""
        if self.pool is None:
            raise WorkspaceError(
                f"workspace {where} is not open; use `async with Workspace(...)` "
                "or `await workspace.open()`"
            )
        return self.pool

    async def get(self, where: str, doing: str) -> tuple[AsyncConnectionPool[Any], Conn]:
        """A connection and the pool it came from, waiting out an outage: while one is under
        way, nobody waits on the pool before the server answers a probe."""
        while True:
            if self.outage.error is not None:
                await self.lost(self.outage.error, doing)
            pool = self.opened(where)
            try:
                return pool, await pool.getconn(timeout=self.timeout_s)
            except PoolTimeout as exc:
                await self.lost(exc, doing)

    @staticmethod
    async def put(pool: AsyncConnectionPool[Any], conn: Conn) -> None:
        """Give ``conn`` back to ``pool`` (a pool replaced meanwhile closes it)."""
        await pool.putconn(conn)

    async def lost(self, exc: BaseException, doing: str) -> None:
        """A try failed with the lost error ``exc``: return once the server answers again
        (the pool replaced, once per outage), or raise ``StoreUnreachable`` past the limit."""
        self.outage.begin(exc)
        while not await self._answers():
            await self.outage.wait(exc, doing)
        async with self._renewing:
            if self.pool is not None and self._renewed_for != self.outage.since:
                old, new = self.pool, self._new_pool()
                await new.open(wait=False)
                self.pool, self._renewed_for = new, self.outage.since
                task = asyncio.create_task(old.close(timeout=self.timeout_s))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    async def _answers(self) -> bool:
        """Whether the server takes a new connection now (one probe for every caller)."""
        async with self._probing:
            try:
                probe = await psycopg.AsyncConnection.connect(
                    self.url, **{**self.kwargs, "connect_timeout": PROBE_TIMEOUT_S}
                )
            except psycopg.Error:
                return False
            await probe.close()
            return True


async def _read_only(conn: Conn) -> None:
    await conn.execute("SET default_transaction_read_only = on")
