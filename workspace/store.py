"""``Workspace``: the store's one interface, over SQLite (a folder) or PostgreSQL (a URL).

Everything the runtime persists goes through this class; nothing else writes SQL or the
run files. Each method is one read or one write transaction, on either engine: SQLite's
``workspace.sqlite`` in a folder (:mod:`workspace.db`, the default) or a PostgreSQL
database that several processes on several hosts share (:mod:`workspace.postgres`). The
SQL of each table lives in its own module, written once for both (:mod:`workspace.conn`);
a run's files live beside ``workspace.sqlite`` or in the database (:mod:`workspace.files`).
Credentials are scrubbed (:mod:`workspace.redact`) before anything is written.

    async with Workspace(resolve_workspace(args.workspace)) as ws:
        run = await ws.create_run(config)
        ids = await ws.record_rollouts(records)   # durable once this returns
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import workspace.candidates as candidates
import workspace.events as events
import workspace.frontier as frontier
import workspace.removal as removal
import workspace.rollouts as rollouts
import workspace.runs as runs
import workspace.trials as trials
from schemas.config import RunConfig
from schemas.exceptions import UserError, WorkspaceError
from schemas.records import (
    CandidateRecord,
    Event,
    Phase,
    RolloutRecord,
    RunRecord,
    RunStatus,
    Trial,
    TrialView,
)
from workspace.backends import backend_for
from workspace.claims import Claimant, ClaimStore, release_claims
from workspace.codec import MIN_TRACE_CAP, dumps, strict_json
from workspace.conn import Conn
from workspace.db import Database
from workspace.endpoint_limits import LimitStore
from workspace.lease import (
    Lease,
    Takeover,
    drop_lease,
    fetch_lease,
    lease_timeout,
    renew_lease,
    stale_reason,
    take_lease,
)
from workspace.location import DEFAULT_WORKSPACE, DatabaseURL, resolve_workspace, workspace_target
from workspace.redact import Scrubber
from workspace.runfolder import check_run_id

__all__ = ["DEFAULT_WORKSPACE", "Workspace", "resolve_workspace"]

T = TypeVar("T")


class Workspace:
    """The store: runs, candidates, the rollout cache, trials, frontier, events, leases, files.

    ``root`` is a folder (SQLite: ``<root>/workspace.sqlite`` and ``<root>/runs/<run_id>/``)
    or a ``postgresql://`` URL (a :class:`DatabaseURL` or its text). With PostgreSQL,
    ``root`` becomes the local run-files folder: ``run_files``, else ``$GEPA_RUN_FILES``,
    else ``./.gepa`` (see :mod:`workspace.files`); ``pool_size`` bounds its connections.
    ``lease_timeout_s`` (else ``$GEPA_LEASE_TIMEOUT``, else 60) is how long a run this
    process executes, or a rollout it claimed, may go without a heartbeat before another
    process takes it over. ``outage_limit_s`` (else ``$GEPA_DB_OUTAGE_LIMIT``, else 120) is
    how long a PostgreSQL store is waited for (a restart) before ``StoreUnreachable``.
    ``readonly=True`` opens an existing store for another process (the console); every
    write then raises ``WorkspaceError``. Always close it (``async with``): the SQLite
    connection's worker thread or the PostgreSQL pool would keep the process alive.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | DatabaseURL,
        *,
        trace_cap_bytes: int = 262144,
        readonly: bool = False,
        busy_timeout_s: float = 10.0,
        run_files: str | os.PathLike[str] | None = None,
        pool_size: int = 8,
        lease_timeout_s: float | None = None,
        outage_limit_s: float | None = None,
    ) -> None:
        if trace_cap_bytes < MIN_TRACE_CAP:
            raise UserError(
                f"trace_cap_bytes must be at least {MIN_TRACE_CAP}, got {trace_cap_bytes}"
            )
        self.trace_cap_bytes = trace_cap_bytes
        self.readonly = readonly
        self.lease_timeout_s = lease_timeout(lease_timeout_s)
        backend = backend_for(
            workspace_target(root), readonly=readonly, busy_timeout_s=busy_timeout_s,
            run_files=run_files, pool_size=pool_size, outage_limit_s=outage_limit_s,
        )  # fmt: skip
        self.backend = backend.name
        self.root, self.location, self.db_path = backend.root, backend.location, backend.db_path
        self._db = backend.db
        self._files = backend.files
        # Everything written goes through it; a run adds the keys it knows (scrubber.add).
        self.scrubber = Scrubber()
        self.claims = ClaimStore(self._db)  # what runners sharing it coordinate through
        self.endpoint_limits = LimitStore(self._db)

    # lifecycle

    async def open(self) -> Workspace:
        """Create the folder and database if needed, migrate, and return ``self``."""
        if not self.readonly and self.backend == "sqlite":
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WorkspaceError(f"cannot create workspace folder {self.root}: {exc}") from exc
        await self._db.open()
        return self

    async def close(self) -> None:
        """Close the connection. Safe to call twice."""
        await self._db.close()

    @property
    def reachable(self) -> bool:
        """Whether the store answers (``False`` while a PostgreSQL server is out of reach)."""
        return self._db.reachable

    async def __aenter__(self) -> Workspace:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # runs

    async def create_run(self, config: RunConfig, run_id: str | None = None) -> RunRecord:
        """Store a new run with ``config.redacted()``; the id defaults to ``run-<10 hex>``."""
        run_id = check_run_id(run_id) if run_id is not None else f"run-{secrets.token_hex(5)}"
        record = RunRecord(run_id=run_id, config=self.scrubber.value(config.redacted()))
        await self._db.at_once(lambda conn: runs.insert_run(conn, record, self.location))
        return record

    async def get_run(self, run_id: str) -> RunRecord:
        """The run ``run_id``; unknown is a ``UserError`` naming the command that lists runs."""
        async with self._db.read() as conn:
            return await runs.fetch_run(conn, run_id, self.location)

    async def list_runs(self) -> list[RunRecord]:
        """Every run, newest first."""
        async with self._db.read() as conn:
            return await runs.list_runs(conn)

    async def update_run(
        self,
        run_id: str,
        *,
        status: RunStatus | None = None,
        phase: Phase | None = None,
        program_id: str | None = None,
        fingerprint: str | None = None,
        error: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Change the given fields (``None`` keeps a field; ``state`` replaces the whole state)."""
        changes: dict[str, Any] = {
            "status": status, "phase": phase, "program_id": program_id,
            "fingerprint": fingerprint,
            "error": self.scrubber.text(error) if error is not None else None,
            "state": self.scrubber.value(state) if state is not None else None,
        }  # fmt: skip

        return await self._db.at_once(lambda c: runs.update_run(c, run_id, self.location, changes))

    async def delete_run(self, run_id: str) -> dict[str, int]:
        """Delete the run, its rows and its folder; counts of the rows deleted by table.

        Rollouts another run used stay (see :mod:`workspace.removal`). The rows go first, in
        one transaction: a folder that cannot be removed then is named in the error. A run a
        live process holds (its lease) is ``RunLeased``.
        """
        counts = await self._db.at_once(
            lambda c: removal.delete_unheld_run(c, run_id, self.location)
        )
        try:
            await self._files.remove(run_id)
        except OSError as exc:
            raise WorkspaceError(
                f"deleted run {run_id!r} from {self.db_path or self.location} but not its "
                f"folder {self._files.path(run_id)} ({exc}); remove that folder by hand"
            ) from exc
        return counts

    # leases: the one process executing a run (see workspace.lease)

    async def acquire_lease(
        self, run_id: str, *, timeout_s: float | None = None
    ) -> tuple[Lease, Takeover | None]:
        """Take the run's lease for this process; the stale lease it replaced, if any.

        A live lease of another holder is ``RunLeased``, naming it (pid, host, since when).
        The holder is judged by its own timeout (``timeout_s`` overrides it); the new lease
        promises a heartbeat within :attr:`lease_timeout_s`.
        """
        promise = self.lease_timeout_s
        return await self._db.at_once(
            lambda conn: take_lease(
                conn, run_id, self.location, now=time.time(), timeout_s=timeout_s, promise_s=promise
            )
        )

    async def renew_lease(self, lease: Lease) -> bool:
        """Renew the heartbeat; ``False`` when another process has taken the lease over."""
        return await self._db.at_once(lambda conn: renew_lease(conn, lease, time.time()))

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease up (a lease another process took over is left to it)."""
        await self._db.at_once(lambda conn: drop_lease(conn, lease))

    async def lease_holder(self, run_id: str, *, timeout_s: float | None = None) -> Lease | None:
        """The live lease of ``run_id`` (``None`` when free or stale by its own timeout)."""
        async with self._db.read() as conn:
            current = await fetch_lease(conn, run_id)
        if current is None or stale_reason(current, now=time.time(), timeout_s=timeout_s):
            return None
        return current

    async def _write_to_run(self, run_id: str, body: Callable[[Conn], Awaitable[T]]) -> T:
        """``body``, a write of rows that belong to run ``run_id`` (candidates, trials,
        events), whose foreign keys reject a run that does not exist, run whole in one round
        trip (``Database.at_once``).

        The run is looked up only when the write fails, to report an unknown run as the
        unknown-run ``UserError``; any other failure is raised as it is. Asking first would
        cost one more statement per write, on the rollout queue's and the event log's hot
        paths.
        """
        try:
            return await self._db.at_once(body)
        except Exception:
            async with self._db.read() as conn:
                await runs.require_run(conn, run_id, self.location)
            raise

    # candidates

    async def add_candidate(self, record: CandidateRecord) -> bool:
        """Store a candidate; ``False`` if ``(run_id, candidate_id)`` was already there."""
        return await self._write_to_run(
            record.run_id, lambda conn: candidates.insert_candidate(conn, record)
        )

    async def get_candidate(self, run_id: str, candidate_id: str) -> CandidateRecord:
        """One candidate of a run; unknown is a ``UserError``."""
        async with self._db.read() as conn:
            return await candidates.fetch_candidate(conn, run_id, candidate_id)

    async def list_candidates(self, run_id: str) -> list[CandidateRecord]:
        """The run's candidates in creation order."""
        async with self._db.read() as conn:
            return await candidates.list_candidates(conn, run_id)

    # rollouts and the cache

    async def lookup(self, key: str) -> RolloutRecord | None:
        """The cached successful rollout for ``key``, or ``None``. Errors are never served."""
        return (await self.lookup_many([key])).get(key)

    async def lookup_many(self, keys: Sequence[str]) -> dict[str, RolloutRecord]:
        """Cached successful rollouts by key (missing keys are absent); one query per 900."""
        if not keys:
            return {}
        async with self._db.read() as conn:
            return await rollouts.lookup_many(conn, keys)

    async def stored_ok(self, keys: Sequence[str]) -> set[str]:
        """The keys among ``keys`` that have a cached successful rollout, read without
        decoding the rollouts (what counting the misses of an evaluation needs)."""
        if not keys:
            return set()
        async with self._db.read() as conn:
            return set(await rollouts.ok_ids(conn, keys))

    async def record_rollouts(self, records: Sequence[RolloutRecord]) -> list[int]:
        """Store finished rollouts in one transaction; their row ids, in order.

        Committed (durable across a process crash) when it returns. An ``ok`` record for a
        key that already has an ``ok`` row is not stored again: the first wins and its id
        is returned. Traces are scrubbed, compressed and capped at ``trace_cap_bytes``.
        """
        if not records:
            return []
        if self.readonly:
            raise WorkspaceError(f"workspace {self.location} is opened read-only")
        rows = await asyncio.to_thread(self._encode, records)
        return await self._db.at_once(lambda conn: rollouts.insert_rollouts(conn, records, rows))

    async def record_paid_trials(
        self, run_id: str, records: Sequence[RolloutRecord], claimant: Claimant | None = None
    ) -> list[int]:
        """``record_rollouts`` and ``link_trials`` (as paid) in one transaction; the row ids.

        The rollout queue's hot path: one round trip to SQLite's connection thread per batch
        (``Database.at_once``), where the records are also encoded, off the event loop. The
        same transaction lets go of the records' keys that ``claimant`` claimed
        (:mod:`workspace.claims`), stored or errored.
        """
        if not records:
            return []
        if self.readonly:
            raise WorkspaceError(f"workspace {self.location} is opened read-only")
        # A body run at once on SQLite runs on its connection's thread, off the event loop, and
        # encodes there (a scrubbed, compressed trace can take milliseconds); else a worker does.
        on_sqlite = isinstance(self._db, Database)
        ready = None if on_sqlite else await asyncio.to_thread(self._encode, records)

        async def write(conn: Conn) -> list[int]:
            rows = ready if ready is not None else self._encode(records)
            ids = await rollouts.insert_rollouts(conn, records, rows)
            await trials.insert_trials(conn, run_id, trials.paid_trials(run_id, records, ids))
            if claimant is not None:
                await release_claims(conn, claimant.token, [r.cache_key for r in records])
            return ids

        return await self._write_to_run(run_id, write)

    def _encode(self, records: Sequence[RolloutRecord]) -> list[tuple[object, ...]]:
        return rollouts.encode_rollouts(records, self.scrubber, self.trace_cap_bytes)

    async def get_rollout(self, rollout_id: int) -> RolloutRecord:
        """One rollout row with its trace decompressed; unknown is a ``UserError``."""
        async with self._db.read() as conn:
            return await rollouts.fetch_rollout(conn, rollout_id)

    async def get_run_rollout(self, run_id: str, rollout_id: int) -> RolloutRecord:
        """One rollout the run paid or reused, with its trace; any other id is a ``UserError``."""
        async with self._db.read() as conn:
            return await rollouts.fetch_run_rollout(conn, run_id, rollout_id)

    async def rollouts_for_candidate(self, run_id: str, candidate_id: str) -> list[RolloutRecord]:
        """Every rollout the run paid or reused for the candidate, errors included, oldest first."""
        async with self._db.read() as conn:
            return await rollouts.rollouts_for_candidate(conn, run_id, candidate_id)

    # trials: a run's use of rollouts

    async def link_trials(self, run_id: str, trials_: Sequence[Trial]) -> None:
        """Append the run's uses of rollouts (paid or cached) to its trials feed."""
        wrong = [t for t in trials_ if t.run_id != run_id]
        if wrong:
            raise WorkspaceError(f"link_trials({run_id!r}) got a trial of run {wrong[0].run_id!r}")
        if not trials_:
            return
        await self._write_to_run(run_id, lambda conn: trials.insert_trials(conn, run_id, trials_))

    async def list_trials(
        self, run_id: str, *, offset: int = 0, limit: int = 100
    ) -> list[TrialView]:
        """A page of the run's trials, in order, with their rollouts' results."""
        async with self._db.read() as conn:
            return await trials.list_trials(conn, run_id, offset=offset, limit=limit)

    async def count_trials(self, run_id: str) -> dict[str, int]:
        """``{"paid": n, "cached": n, "errors": n}``, a partition of the run's trials."""
        async with self._db.read() as conn:
            return await trials.count_trials(conn, run_id)

    # frontier

    async def save_frontier(
        self, run_id: str, frontier_: Mapping[str, Sequence[str]], scores: Mapping[str, float]
    ) -> None:
        """Replace the run's frontier: seed -> winning candidate ids, seed -> best score."""

        async def write(conn: Conn) -> None:
            await runs.require_run(conn, run_id, self.location, lock=True)
            await frontier.save_frontier(conn, run_id, frontier_, scores)

        await self._db.at_once(write)

    async def load_frontier(self, run_id: str) -> tuple[dict[str, list[str]], dict[str, float]]:
        """The run's last saved frontier and scores (both empty if never saved)."""
        async with self._db.read() as conn:
            return await frontier.load_frontier(conn, run_id)

    # events

    async def append_event(
        self, run_id: str, type: str, data: dict[str, Any] | None = None
    ) -> Event:
        """Append to the event log; the returned event carries its monotonic ``seq``.

        The data is walked for secrets only when its JSON text may hold one (as traces are):
        most events hold none, and walking every string of a batch of trials cost more CPU
        than storing it.
        """
        clean = data or {}
        text = dumps(clean, what=f"event {type!r} data")
        if self.scrubber.may_hold_secret(text):
            clean = self.scrubber.value(clean)
            text = dumps(clean, what=f"event {type!r} data")
        return await self._write_to_run(
            run_id, lambda conn: events.append_event(conn, run_id, type, clean, text)
        )

    async def events_since(
        self,
        run_id: str | None,
        after_seq: int = 0,
        limit: int = 1000,
        *,
        types: Sequence[str] | None = None,
    ) -> list[Event]:
        """Events after ``after_seq`` in order (of every run when ``run_id`` is ``None``);
        with ``types``, only events of those types (``limit`` counts those)."""
        async with self._db.read() as conn:
            return await events.events_since(conn, run_id, after_seq, limit, types)

    # the run's files (see workspace.files)

    def run_dir(self, run_id: str) -> Path:
        """The run's local folder ``<root>/runs/<run_id>`` (created on first write).

        With PostgreSQL it holds the files this process wrote or checked out (the
        database holds them all: see :meth:`checkout_files`).
        """
        return self._files.path(run_id)

    async def write_file(self, run_id: str, name: str, content: str | bytes) -> Path:
        """Store a file of the run atomically; ``name`` must stay inside its folder."""
        if self.readonly:
            raise WorkspaceError(f"workspace {self.location} is opened read-only")
        data = content.encode() if isinstance(content, str) else bytes(content)
        return await self._files.write(run_id, name, data)

    async def write_json(self, run_id: str, name: str, data: Any) -> Path:
        """``write_file`` of ``data`` as strict JSON: a NaN or infinity is written as ``null``."""
        return await self.write_file(run_id, name, strict_json(data))

    async def read_file(self, run_id: str, name: str) -> bytes:
        """The bytes of a file of the run; a missing file is a ``UserError``."""
        return await self._files.read(run_id, name)

    async def list_files(self, run_id: str) -> list[str]:
        """Relative names of the run's files, sorted."""
        return await self._files.list(run_id)

    async def checkout_files(self, run_id: str) -> Path:
        """Make the run's files (its copied inputs among them) present in :meth:`run_dir`.

        A no-op with SQLite, where the folder is the record; with PostgreSQL, another
        host's run gets its files copied from the database. Returns the folder.
        """
        return await self._files.checkout(run_id)
