"""Claims: a rollout one runner is paying for, so that runners sharing a store pay for it once.

Before a rollout queue sends a (candidate, seed), it claims the rollout's cache key in the
table ``claims``, in one transaction that also checks the cache: a key another runner already
stored is not claimed but reported stored (a hit), a key another live runner holds is
reported held (the caller waits for its result instead of paying), and a key that is free,
or whose holder is stale, becomes the caller's. The holder stores the rollout and deletes its
claim in the same transaction (:meth:`workspace.store.Workspace.record_paid_trials`), errors
included: an errored rollout frees its key for the next runner that needs it.

A claim is held by a :class:`Claimant`, one per rollout queue: a random token, its run, host
and pid, and the timeout within which it promises to renew its claims' heartbeat (the store's
lease timeout). A claim is stale as a run lease is (:func:`workspace.lease.holder_gone`): its
pid no longer runs on this host, or its heartbeat is older than its timeout (a holder on
another host that died). Deciding and taking happen in one transaction with the claims' rows
locked (PostgreSQL) or under the one writer lock (SQLite), so two runners never both take a
key.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from workspace.conn import Conn, Engine, Row
from workspace.lease import holder_gone, this_host
from workspace.rollouts import chunks, ok_ids

__all__ = [
    "ClaimSplit",
    "ClaimStore",
    "Claimant",
    "Holder",
    "claim_status",
    "new_claimant",
    "release_claims",
    "renew_claims",
    "take_claims",
]

_COLUMNS = "cache_key, token, run_id, host, pid, claimed_at, heartbeat_at, timeout_s"


@dataclass(frozen=True)
class Claimant:
    """Who claims: one rollout queue of one process, under a random ``token``."""

    token: str
    run_id: str
    host: str
    pid: int
    timeout_s: float  # the claims' heartbeat is renewed well within this


def new_claimant(run_id: str, timeout_s: float) -> Claimant:
    """A claimant for a rollout queue of ``run_id`` in this process."""
    return Claimant(secrets.token_hex(8), run_id, this_host(), os.getpid(), timeout_s)


@dataclass(frozen=True)
class Holder:
    """Another runner's live claim on a key."""

    token: str
    run_id: str
    host: str
    pid: int
    heartbeat_at: float
    timeout_s: float

    def describe(self) -> str:
        """``run r on pid 12 on host h``."""
        return f"run {self.run_id} (pid {self.pid} on host {self.host})"


@dataclass(frozen=True)
class ClaimSplit:
    """What claiming (or looking at) keys found: each key is in exactly one part."""

    mine: list[str] = field(default_factory=list)  # the caller's now: it pays for them
    stored: list[str] = field(default_factory=list)  # an ok rollout exists: nothing to pay
    held: dict[str, Holder] = field(default_factory=dict)  # another live runner pays for them
    taken_over: dict[str, str] = field(default_factory=dict)  # key -> why its holder was stale


def _holder(row: Row) -> Holder:
    return Holder(
        row["token"], row["run_id"], row["host"], int(row["pid"]), float(row["heartbeat_at"]),
        float(row["timeout_s"]),
    )  # fmt: skip


def _stale(holder: Holder, now: float) -> str | None:
    return holder_gone(holder.host, holder.pid, holder.heartbeat_at, holder.timeout_s, now=now)


async def _claims(conn: Conn, keys: Sequence[str], *, lock: bool) -> dict[str, Holder]:
    """The claim rows of ``keys`` (locked for the transaction when ``lock``)."""
    found: dict[str, Holder] = {}
    suffix = conn.dialect.lock_rows if lock else ""
    for part in chunks(list(keys)):
        marks = ",".join("?" * len(part))
        rows = await conn.fetchall(
            f"SELECT {_COLUMNS} FROM claims WHERE cache_key IN ({marks}){suffix}", part
        )
        found.update((row["cache_key"], _holder(row)) for row in rows)
    return found


async def take_claims(
    conn: Conn, claimant: Claimant, keys: Sequence[str], *, now: float, force: bool = False
) -> ClaimSplit:
    """Claim ``keys`` for ``claimant`` inside a write transaction (see the module docstring).

    ``force`` takes keys from live holders too (a waiter that waited past its bound).
    """
    # Sorted: runners that claim overlapping keys lock them in one order (no deadlock).
    keys = sorted(set(keys))
    current = await _claims(conn, keys, lock=True)
    split = ClaimSplit()
    fresh = [key for key in keys if key not in current]
    for key, holder in current.items():
        if holder.token == claimant.token:
            split.mine.append(key)
            continue
        why = "waited past its bound" if force else _stale(holder, now)
        if why is None:
            split.held[key] = holder
            continue
        changed = await conn.execute(
            "UPDATE claims SET token = ?, run_id = ?, host = ?, pid = ?, claimed_at = ?, "
            "heartbeat_at = ?, timeout_s = ? WHERE cache_key = ? AND token = ?",
            (*_claim_values(claimant, now), key, holder.token),
        )
        if changed == 1:
            split.mine.append(key)
            split.taken_over[key] = f"{holder.describe()}: {why}"
        else:  # released meanwhile (PostgreSQL): claimed fresh below
            fresh.append(key)
    if fresh:
        rows = [(key, *_claim_values(claimant, now)) for key in fresh]
        inserted = await conn.fetch_each(
            f"INSERT INTO claims ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?) "
            "ON CONFLICT (cache_key) DO NOTHING RETURNING cache_key",
            rows,
        )
        lost = [key for key, got in zip(fresh, inserted, strict=True) if not got]
        split.mine.extend(key for key, got in zip(fresh, inserted, strict=True) if got)
        if lost:  # another process inserted first (PostgreSQL): it holds them
            split.held.update(await _claims(conn, lost, lock=False))
    # Read after claiming: a holder that stored its rollout and let go of the key just
    # before our claim committed is seen here, and nobody pays for it again.
    stored = set(await ok_ids(conn, split.mine)) if split.mine else set()
    if stored:
        await release_claims(conn, claimant.token, sorted(stored))
        split.mine[:] = [key for key in split.mine if key not in stored]
        split.stored.extend(key for key in keys if key in stored)
    return split


def _claim_values(claimant: Claimant, now: float) -> tuple[object, ...]:
    return (
        claimant.token, claimant.run_id, claimant.host, claimant.pid, now, now,
        claimant.timeout_s,
    )  # fmt: skip


async def claim_status(conn: Conn, keys: Sequence[str], *, now: float) -> ClaimSplit:
    """Which of ``keys`` are stored and which another live runner holds, read without
    claiming anything (``mine`` lists the keys that are free or whose holder is stale)."""
    keys = list(dict.fromkeys(keys))
    stored = set(await ok_ids(conn, keys))
    current = await _claims(conn, [key for key in keys if key not in stored], lock=False)
    split = ClaimSplit(stored=[key for key in keys if key in stored])
    for key in keys:
        if key in stored:
            continue
        holder = current.get(key)
        if holder is not None and _stale(holder, now) is None:
            split.held[key] = holder
        else:
            split.mine.append(key)
    return split


async def renew_claims(conn: Conn, claimant: Claimant, now: float | None = None) -> int:
    """Move the heartbeat of every claim ``claimant`` holds to ``now``; how many it holds."""
    now = time.time() if now is None else now
    return await conn.execute(
        "UPDATE claims SET heartbeat_at = ? WHERE token = ?", (now, claimant.token)
    )


async def release_claims(conn: Conn, token: str, keys: Sequence[str] | None = None) -> int:
    """Delete the claims of ``token`` on ``keys`` (all of them when ``None``); how many.
    A claim another runner took over is left to it."""
    if keys is None:
        return await conn.execute("DELETE FROM claims WHERE token = ?", (token,))
    released = 0
    for part in chunks(list(keys)):
        marks = ",".join("?" * len(part))
        released += await conn.execute(
            f"DELETE FROM claims WHERE token = ? AND cache_key IN ({marks})", (token, *part)
        )
    return released


class ClaimStore:
    """The claims of one store (``Workspace.claims``); each call is one transaction."""

    def __init__(self, db: Engine) -> None:
        self._db = db

    async def take(
        self, claimant: Claimant, keys: Sequence[str], *, force: bool = False
    ) -> ClaimSplit:
        """Claim ``keys`` (see :func:`take_claims`)."""
        if not keys:
            return ClaimSplit()
        return await self._db.at_once(
            lambda conn: take_claims(conn, claimant, keys, now=time.time(), force=force)
        )

    async def status(self, keys: Sequence[str]) -> ClaimSplit:
        """Which of ``keys`` are stored, held by a live runner, or free (a read)."""
        if not keys:
            return ClaimSplit()
        async with self._db.read() as conn:
            return await claim_status(conn, keys, now=time.time())

    async def renew(self, claimant: Claimant) -> int:
        """Renew the heartbeat of every claim ``claimant`` holds; how many it holds."""
        return await self._db.at_once(lambda conn: renew_claims(conn, claimant))

    async def release(self, claimant: Claimant, keys: Sequence[str] | None = None) -> int:
        """Let go of ``claimant``'s claims on ``keys`` (all when ``None``); how many."""
        if keys is not None and not keys:
            return 0
        return await self._db.at_once(lambda conn: release_claims(conn, claimant.token, keys))

    async def held_by(self, run_id: str | None = None) -> dict[str, Holder]:
        """Every claim (of ``run_id``'s runners only, when given), live or stale, by key."""
        where, params = ("WHERE run_id = ?", (run_id,)) if run_id is not None else ("", ())
        async with self._db.read() as conn:
            rows = await conn.fetchall(f"SELECT {_COLUMNS} FROM claims {where}", params)
        return {row["cache_key"]: _holder(row) for row in rows}
