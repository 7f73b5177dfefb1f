"""Riding out a PostgreSQL restart or failover: which errors mean the server went away, and
how long a process waits for it to come back.

A server that restarts (``pg_ctl restart -m fast``, an upgrade, a managed service's
maintenance window, a failover) ends every connection (``terminating connection due to
administrator command``) and refuses new ones for a few seconds (``the database system is
starting up``). Such an error is *lost*: the statement or transaction it cut off did not
happen, or (only when the connection dropped while ``COMMIT`` was on its way) may have
happened, which the caller settles by asking the server for the fate of the transaction id.
Every other error (a constraint, a syntax error, a permission) is the caller's and is raised
at once.

An :class:`Outage` is the wait of one store: it starts at the first lost error, retries
with a backoff that grows to ``MAX_BACKOFF_S``, ends at the first statement that succeeds,
and gives up with :class:`schemas.StoreUnreachable` once the server has been out of reach
for longer than the limit (``GEPA_DB_OUTAGE_LIMIT`` seconds, default ``OUTAGE_LIMIT_S``). The
limit counts from the start of the outage, for every caller at once: once it is passed, each
new statement fails after one try instead of waiting the limit again.

An outage is said once on the ``gepa.workspace`` logger when it starts and once when the server
answers again (stderr, where nothing else is configured); the pool's own messages about each
failed reconnection are left out (:func:`quiet_pool`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from schemas.exceptions import StoreUnreachable
from workspace.seconds import seconds_setting

__all__ = [
    "MAX_BACKOFF_S",
    "OUTAGE_LIMIT_S",
    "Outage",
    "is_conflict",
    "is_lost",
    "outage_limit",
    "quiet_pool",
]

logger = logging.getLogger("gepa.workspace")

OUTAGE_LIMIT_S = 120.0
MAX_BACKOFF_S = 2.0
# Connection exceptions (08...) and the server shutting down or starting (57P01-57P05): each
# leaves nothing done (but a COMMIT on its way), so running it again is safe.
_LOST_STATES = frozenset({"57P01", "57P02", "57P03", "57P04", "57P05"})
# A transaction the server rolled back to break a deadlock or a serialization conflict: the
# server is there, and the transaction runs again at once.
_CONFLICT_STATES = frozenset({"40001", "40P01"})


def is_lost(exc: BaseException, conn: psycopg.AsyncConnection[Any] | None = None) -> bool:
    """Whether ``exc`` means the server went away (see the module docstring)."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    if conn is not None and (conn.closed or conn.broken):
        return True
    state = exc.sqlstate
    if state is None:  # no answer at all: refused, reset, closed by the server
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith("08") or state in _LOST_STATES


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a transaction the server rolled back for a deadlock or a
    serialization conflict (nothing of it happened; run it again)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in _CONFLICT_STATES


def outage_limit(given: float | None, env: Mapping[str, str] | None = None) -> float:
    """Seconds a process waits for its store to come back: ``given``, else
    ``$GEPA_DB_OUTAGE_LIMIT``, else ``OUTAGE_LIMIT_S``; outside 1 s to a day is a
    ``UserError``."""
    return seconds_setting(
        given, env, variable="GEPA_DB_OUTAGE_LIMIT", field="outage_limit_s",
        default=OUTAGE_LIMIT_S, meaning="the seconds a run waits for its PostgreSQL store to come back",
    )  # fmt: skip


class Outage:
    """One store's wait for its server (see the module docstring)."""

    def __init__(self, where: str, limit_s: float) -> None:
        self.where = where
        self.limit_s = limit_s
        self.since: float | None = None  # loop time of the first lost error of this outage
        self.error: BaseException | None = None  # its last lost error
        self.lost = 0  # lost errors in this outage

    def remaining(self) -> float:
        """Seconds left before the limit (the whole limit when the server answers)."""
        if self.since is None:
            return self.limit_s
        return max(0.0, self.limit_s - (asyncio.get_running_loop().time() - self.since))

    def ok(self) -> None:
        """A statement succeeded: the server answers (again)."""
        if self.since is not None:
            down = asyncio.get_running_loop().time() - self.since
            logger.warning(
                "the PostgreSQL store at %s answers again after %.1f s", self.where, down,
            )  # fmt: skip
        self.since, self.error, self.lost = None, None, 0

    def begin(self, exc: BaseException) -> None:
        """The lost error ``exc`` happened: the outage starts, unless it is under way."""
        self.error = exc
        if self.since is None:
            self.since = asyncio.get_running_loop().time()
            logger.warning(
                "the PostgreSQL store at %s went away (%s); waiting up to %g s for it "
                "(GEPA_DB_OUTAGE_LIMIT)", self.where, _first_line(exc), self.limit_s,
            )  # fmt: skip

    async def wait(self, exc: BaseException, doing: str) -> None:
        """After the lost error ``exc``: sleep before the next try, or raise
        ``StoreUnreachable`` once the server has been out of reach past the limit."""
        loop = asyncio.get_running_loop()
        self.begin(exc)
        self.lost += 1
        down = loop.time() - (self.since or loop.time())
        if down >= self.limit_s:
            first = _first_line(exc)
            raise StoreUnreachable(
                f"{doing} {self.where} failed: PostgreSQL has been out of reach for {down:.0f} s,"
                f" past the limit of {self.limit_s:g} s (GEPA_DB_OUTAGE_LIMIT); last error: "
                f"{first}. Nothing committed is lost: once the server answers again, resume the "
                "run by id (gepa-runtime optimize run RUN_ID)."
            ) from exc
        backoff = min(MAX_BACKOFF_S, 0.05 * 2 ** min(self.lost, 6))
        await asyncio.sleep(min(backoff, self.remaining()))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def quiet_pool() -> None:
    """Leave out the pool's warning per failed reconnection (an outage is said once, here),
    unless the application set the level of the ``psycopg.pool`` logger itself."""
    pool_logger = logging.getLogger("psycopg.pool")
    if pool_logger.level == logging.NOTSET:
        pool_logger.setLevel(logging.ERROR)
