"""One adaptive limit per container endpoint, kept in the store for every runner that calls it.

Two tables. ``endpoint_limits`` holds, per endpoint URL, the state of its limit as JSON: what
it holds is the runtime's business (:mod:`optimizer.runtime.rollouts.shared_limits`); this
module stores it and makes each change one transaction. ``endpoint_members`` holds the
runners (processes) calling the endpoint now: their share of workers (``ceiling``), how many
rollouts they want to send (``demand``) and a heartbeat. A member is gone, and dropped, when
its pid no longer runs on this host or its heartbeat is older than its timeout, as a run
lease is (:func:`workspace.lease.holder_gone`).

:meth:`LimitStore.sync` is a member's periodic visit: in one transaction, with the endpoint's
row locked (PostgreSQL) or under the one writer lock (SQLite), it renews the member, drops
the gone ones, and replaces the state by ``decide(state, members)``, so that the changes of
several runners apply one after the other, never over each other.

An endpoint is stored by its URL without credentials (``http://user:pw@host:8000`` is
``http://host:8000``): the limit is the server's, whoever logs in, and a password never
reaches the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from workspace.conn import Conn, Engine
from workspace.lease import holder_gone

__all__ = ["Decide", "LimitStore", "Member", "endpoint_key"]


def endpoint_key(url: str) -> str:
    """``url`` as the store keeps an endpoint: without its user and password."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


@dataclass(frozen=True)
class Member:
    """One runner calling an endpoint."""

    member: str  # a random token, one per process and endpoint
    host: str
    pid: int
    ceiling: int  # its workers on this endpoint: the most it may ever send at once
    demand: int  # rollouts it is sending or waiting to send now
    heartbeat_at: float
    timeout_s: float


# (stored state, {} for a new endpoint; live members, the caller's included; now) -> new state
Decide = Callable[[dict[str, Any], list[Member], float], dict[str, Any]]

_MEMBER_COLUMNS = "url, member, host, pid, ceiling, demand, heartbeat_at, timeout_s"


class LimitStore:
    """The shared endpoint limits of one store (``Workspace.endpoint_limits``)."""

    def __init__(self, db: Engine) -> None:
        self._db = db

    async def sync(self, url: str, me: Member, decide: Decide) -> dict[str, Any]:
        """Renew ``me`` on ``url``, drop gone members, store ``decide(...)``; the new state."""
        key = endpoint_key(url)
        return await self._db.at_once(lambda conn: _sync(conn, key, me, decide, time.time()))

    async def leave(self, url: str, member: str) -> None:
        """``member`` stops calling ``url`` (its share goes to the others at their next sync)."""
        key = endpoint_key(url)
        await self._db.at_once(
            lambda conn: conn.execute(
                "DELETE FROM endpoint_members WHERE url = ? AND member = ?", (key, member)
            )
        )

    async def state(self, url: str) -> tuple[dict[str, Any], list[Member]]:
        """The stored state of ``url`` ({} when none) and its members, gone ones included."""
        key = endpoint_key(url)
        async with self._db.read() as conn:
            rows = await conn.fetchall("SELECT state FROM endpoint_limits WHERE url = ?", (key,))
            members = await _members(conn, key)
        return (json.loads(rows[0][0]) if rows else {}), members


async def _members(conn: Conn, url: str) -> list[Member]:
    rows = await conn.fetchall(
        f"SELECT {_MEMBER_COLUMNS} FROM endpoint_members WHERE url = ? ORDER BY member", (url,)
    )
    return [
        Member(
            row["member"],
            row["host"],
            int(row["pid"]),
            int(row["ceiling"]),
            int(row["demand"]),
            float(row["heartbeat_at"]),
            float(row["timeout_s"]),
        )  # fmt: skip
        for row in rows
    ]


async def _sync(conn: Conn, url: str, me: Member, decide: Decide, now: float) -> dict[str, Any]:
    await conn.execute(
        "INSERT INTO endpoint_limits (url, state, updated_at) VALUES (?, '{}', ?) "
        "ON CONFLICT (url) DO NOTHING",
        (url, now),
    )
    rows = await conn.fetchall(
        f"SELECT state FROM endpoint_limits WHERE url = ?{conn.dialect.lock_rows}", (url,)
    )
    await conn.execute(
        f"INSERT INTO endpoint_members ({_MEMBER_COLUMNS}) VALUES (?,?,?,?,?,?,?,?) "
        "ON CONFLICT (url, member) DO UPDATE SET ceiling = excluded.ceiling, "
        "demand = excluded.demand, heartbeat_at = excluded.heartbeat_at, "
        "timeout_s = excluded.timeout_s",
        (url, me.member, me.host, me.pid, me.ceiling, me.demand, now, me.timeout_s),
    )
    members = []
    for member in await _members(conn, url):
        gone = holder_gone(member.host, member.pid, member.heartbeat_at, member.timeout_s, now=now)
        if gone is None or member.member == me.member:
            members.append(member)
        else:
            await conn.execute(
                "DELETE FROM endpoint_members WHERE url = ? AND member = ?", (url, member.member)
            )
    state = decide(json.loads(rows[0][0]), members, now)
    await conn.execute(
        "UPDATE endpoint_limits SET state = ?, updated_at = ? WHERE url = ?",
        (json.dumps(state), now, url),
    )
    return state
