"""Run leases: the one process executing a run, so that two never execute it at once.

A process that executes a run holds the run's row in ``leases``: its host, pid, when it took
the lease, the timeout it promised to beat within (``LEASE_TIMEOUT_S`` unless the store was
opened with another: ``GEPA_LEASE_TIMEOUT``) and a heartbeat it renews every sixth of that
(``HEARTBEAT_S`` for the default). Another process that wants to execute the same run is
refused while the holder is live, and told who holds it. A lease is stale, and taken over,
when its holder is a pid that no longer runs on this host, or when its heartbeat is older
than the holder's timeout (a holder on another host that died, a frozen process, a pid
reused by another program). Each lease carries its own timeout, so processes that share a
PostgreSQL store judge a holder by what it promised, whatever their own setting. A holder whose lease was taken over that
way finds out at its next heartbeat (its token no longer matches) and stops.

A random token, not (host, pid), names the holder: one process may execute several runs
(the service) and must still be refused a run that another of its own tasks executes.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from schemas.exceptions import RunLeased
from workspace.conn import Conn
from workspace.runs import require_run
from workspace.seconds import seconds_setting

__all__ = [
    "HEARTBEAT_S",
    "LEASE_TIMEOUT_S",
    "Lease",
    "Takeover",
    "drop_lease",
    "fetch_lease",
    "holder_gone",
    "lease_timeout",
    "leased_message",
    "new_lease",
    "pid_alive",
    "put_lease",
    "renew_lease",
    "stale_reason",
    "take_lease",
    "this_host",
]

HEARTBEAT_S = 10.0
LEASE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Lease:
    """Who executes a run: a process (``host``, ``pid``) under a random ``token``."""

    run_id: str
    token: str
    host: str
    pid: int
    acquired_at: float
    heartbeat_at: float
    timeout_s: float = LEASE_TIMEOUT_S  # the holder beats at least this often

    @property
    def every_s(self) -> float:
        """How often the holder renews the heartbeat: a sixth of its timeout, 10 s at most."""
        return min(HEARTBEAT_S, self.timeout_s / 6)

    def describe(self, now: float | None = None) -> str:
        """``pid 123 on host h since 2026-01-02 10:00:00 (last heartbeat 3 s ago)``."""
        now = time.time() if now is None else now
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.acquired_at))
        age = max(0.0, now - self.heartbeat_at)
        return f"pid {self.pid} on host {self.host} since {since} (last heartbeat {age:.0f} s ago)"


@dataclass(frozen=True)
class Takeover:
    """A stale lease that a new holder replaced, and why it was stale."""

    previous: Lease
    reason: str


def this_host() -> str:
    """The name this machine's leases carry."""
    return socket.gethostname()


def new_lease(run_id: str, now: float | None = None, timeout_s: float = LEASE_TIMEOUT_S) -> Lease:
    """A lease of ``run_id`` for this process that promises a heartbeat within ``timeout_s``."""
    now = time.time() if now is None else now
    return Lease(run_id, secrets.token_hex(8), this_host(), os.getpid(), now, now, timeout_s)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process here (a zombie, killed but not reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        # The state letter follows the ")" that closes the command name.
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): trust kill(0)


def stale_reason(lease: Lease, *, now: float, timeout_s: float | None = None) -> str | None:
    """Why ``lease`` may be taken over, or ``None`` while its holder is live.

    ``timeout_s`` overrides the holder's own timeout (a stricter judge, e.g. in a test).
    """
    timeout_s = lease.timeout_s if timeout_s is None else timeout_s
    return holder_gone(lease.host, lease.pid, lease.heartbeat_at, timeout_s, now=now)


def holder_gone(
    host: str, pid: int, heartbeat_at: float, timeout_s: float, *, now: float
) -> str | None:
    """Why a holder (of a lease, a claim, a share of a limit) counts as gone, or ``None``:
    its pid no longer runs on this host, or its heartbeat is older than ``timeout_s``."""
    if host == this_host() and not pid_alive(pid):
        return f"pid {pid} is no longer running on {host}"
    age = now - heartbeat_at
    if age > timeout_s:
        return f"no heartbeat for {age:.0f} s (the limit is {timeout_s:.0f} s)"
    return None


def lease_timeout(given: float | None, env: Mapping[str, str] | None = None) -> float:
    """The timeout a process's leases promise: ``given``, else ``$GEPA_LEASE_TIMEOUT``
    (seconds), else ``LEASE_TIMEOUT_S``; outside 1 s to a day is a ``UserError``."""
    return seconds_setting(
        given, env, variable="GEPA_LEASE_TIMEOUT", field="lease_timeout_s",
        default=LEASE_TIMEOUT_S,
        meaning="the seconds after which a run whose process stopped beating is taken over",
    )  # fmt: skip


def leased_message(
    holder: Lease, *, now: float | None = None, timeout_s: float | None = None
) -> str:
    """Why a run cannot be executed here: who holds it and what to do."""
    where = "" if holder.host == this_host() else f" on {holder.host}"
    timeout_s = holder.timeout_s if timeout_s is None else timeout_s
    return (
        f"run {holder.run_id} is being run by {holder.describe(now)}; wait for it to finish "
        f"(follow it with `gepa-runtime runs show {holder.run_id}`), or stop it (kill "
        f"{holder.pid}{where}: the run ends cancelled and resumable) and run this again. "
        f"A holder without a heartbeat for {timeout_s:.0f} s is taken over."
    )


_COLUMNS = "run_id, token, host, pid, acquired_at, heartbeat_at, timeout_s"


async def fetch_lease(conn: Conn, run_id: str) -> Lease | None:
    """The run's lease row, live or stale, or ``None``."""
    rows = await conn.fetchall(f"SELECT {_COLUMNS} FROM leases WHERE run_id = ?", (run_id,))
    if not rows:
        return None
    row = rows[0]
    timeout_s = LEASE_TIMEOUT_S if row["timeout_s"] is None else float(row["timeout_s"])
    return Lease(
        row["run_id"], row["token"], row["host"], int(row["pid"]),
        float(row["acquired_at"]), float(row["heartbeat_at"]), timeout_s,
    )  # fmt: skip


async def put_lease(conn: Conn, lease: Lease) -> None:
    """Store ``lease`` as the run's lease, replacing any other."""
    await conn.execute(
        f"INSERT INTO leases ({_COLUMNS}) VALUES (?,?,?,?,?,?,?) ON CONFLICT (run_id) DO UPDATE "
        "SET token = excluded.token, host = excluded.host, pid = excluded.pid, "
        "acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at, "
        "timeout_s = excluded.timeout_s",
        (
            lease.run_id,
            lease.token,
            lease.host,
            lease.pid,
            lease.acquired_at,
            lease.heartbeat_at,
            lease.timeout_s,
        ),  # fmt: skip
    )


async def renew_lease(conn: Conn, lease: Lease, now: float) -> bool:
    """Move the heartbeat of ``lease`` to ``now``; ``False`` when it is no longer held."""
    changed = await conn.execute(
        "UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND token = ?",
        (now, lease.run_id, lease.token),
    )
    return changed == 1


async def drop_lease(conn: Conn, lease: Lease) -> None:
    """Remove ``lease`` if it is still the run's lease (a newer holder's stays)."""
    await conn.execute(
        "DELETE FROM leases WHERE run_id = ? AND token = ?", (lease.run_id, lease.token)
    )


async def take_lease(
    conn: Conn, run_id: str, where: str, *, now: float, timeout_s: float | None, promise_s: float
) -> tuple[Lease, Takeover | None]:
    """Put a new lease of this process on ``run_id`` (of the store ``where``; unknown is a
    ``UserError``); the stale lease it replaced, if any. A live lease of another holder, judged
    by its own timeout unless ``timeout_s`` is given, is ``RunLeased``. The new lease promises
    a heartbeat within ``promise_s``."""
    # Locked: two processes that both find the lease stale must not both take it.
    await require_run(conn, run_id, where, lock=True)
    current = await fetch_lease(conn, run_id)
    takeover = None
    if current is not None:
        reason = stale_reason(current, now=now, timeout_s=timeout_s)
        if reason is None:
            raise RunLeased(leased_message(current, now=now, timeout_s=timeout_s))
        takeover = Takeover(current, reason)
    lease = new_lease(run_id, now, promise_s)
    await put_lease(conn, lease)
    return lease, takeover
