"""The claims of a rollout queue: runners that share a store pay for each rollout once.

Within one process, a (candidate, seed) in flight is shared by the queue's callers. Across
processes (several runners on one PostgreSQL or SQLite store: a sweep, a branch of a run, a
CI check beside a nightly run), the queue claims each rollout's cache key in the store before
it sends it (:mod:`workspace.claims`), and :meth:`ClaimBook.dispatch` routes each job of a
batch by what the claim found:

- claimed: sent (and its claim let go of in the transaction that stores it, errors too);
- stored by another runner meanwhile: served from the cache, free;
- held by another live runner: waited for. Every ``poll_s`` the book looks at the keys it
  waits for: one stored is served; one let go of (its rollout errored) or whose holder went
  stale (a dead pid on this host, a heartbeat older than its timeout: a runner killed with
  ``kill -9``, a host that went away) is claimed and sent here. No wait is unbounded: a key
  still held after ``max_wait_s`` (the holder's rollout timeout and retries, plus the lease)
  is taken over anyway.

The book renews the heartbeat of all its claims every sixth of the lease timeout (one
statement) and lets go of them all when the queue closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from optimizer.runtime.rollouts.retries import RetryPolicy
from schemas import RolloutRecord, WorkspaceError
from workspace import Workspace
from workspace.claims import ClaimSplit, new_claimant

__all__ = ["POLL_S", "ClaimBook", "Keyed", "claim_wait_s"]

POLL_S = 0.2


def claim_wait_s(policy: RetryPolicy, lease_timeout_s: float) -> float:
    """How long a rollout waits on another runner's claim at most: what that runner's own
    tries may take (timeouts, backoffs, the rate-limit wait), plus its lease."""
    tries = (policy.timeout_s + policy.max_delay_s) * (policy.max_retries + 1)
    return tries + policy.rate_limit_wait_s + lease_timeout_s


class Keyed(Protocol):
    """A job of the queue, as the book sees it: its cache key."""

    @property
    def key(self) -> str:
        """The rollout's cache key."""
        ...


J = TypeVar("J", bound=Keyed)
# What the queue does with a job: send it, or count the record another runner stored for it.
Send = Callable[[J], None]
Serve = Callable[[J, RolloutRecord], Awaitable[None]]
Told = Callable[[dict[str, object]], Awaitable[object]]


class ClaimBook:
    """The claims of one rollout queue (see the module docstring). Run ``run()`` as a task."""

    def __init__(
        self,
        workspace: Workspace,
        run_id: str,
        *,
        max_wait_s: float,
        poll_s: float = POLL_S,
        on_takeover: Told | None = None,
    ) -> None:
        self._workspace = workspace
        self.claimant = new_claimant(run_id, workspace.lease_timeout_s)
        self._max_wait_s = max_wait_s
        self._poll_s = poll_s
        self._on_takeover = on_takeover
        self._waiting: dict[str, tuple[asyncio.Future[RolloutRecord | None], float]] = {}
        self._abandoned: set[str] = set()  # claimed, then not sent: to let go of
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()

    async def dispatch(
        self,
        jobs: Sequence[J],
        futures: Mapping[str, asyncio.Future[RolloutRecord]],
        send: Send[J],
        serve: Serve[J],
    ) -> None:
        """Claim the jobs' keys and route each job (see the module docstring): ``send`` it,
        or ``serve`` it another runner's record, which then settles its future (by key). A job
        that waits on another runner is routed by a task of its own once the key is settled."""
        split = await self._workspace.claims.take(self.claimant, [job.key for job in jobs])
        await self._told(split)
        stored = await self._workspace.lookup_many(split.stored)
        for job in jobs:
            if job.key in split.held:
                task = asyncio.create_task(self._route_later(job, futures[job.key], send, serve))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif job.key in stored:
                await _served(job, stored[job.key], futures[job.key], serve)
            else:
                send(job)

    async def _route_later(
        self, job: J, future: asyncio.Future[RolloutRecord], send: Send[J], serve: Serve[J]
    ) -> None:
        try:
            record = await self._wait_for(job.key)
            if record is None:
                send(job)
            else:
                await _served(job, record, future, serve)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the waiting caller, not swallowed
            if not future.done():
                future.set_exception(exc)

    def _wait_for(self, key: str) -> asyncio.Future[RolloutRecord | None]:
        """Settled with the key's record once stored, or ``None`` once claimed here."""
        future = asyncio.get_running_loop().create_future()
        self._waiting[key] = (future, asyncio.get_running_loop().time())
        self._wake.set()
        return future

    def abandon(self, keys: Sequence[str]) -> None:
        """The queue no longer needs ``keys`` (their caller is done or cancelled): stop
        waiting for them, and let go of any of them still claimed here."""
        for key in keys:
            waiting = self._waiting.pop(key, None)
            if waiting is not None and not waiting[0].done():
                waiting[0].cancel()
        if keys:
            self._abandoned.update(keys)
            self._wake.set()

    async def run(self) -> None:
        """Renew the claims, look at the keys waited for, let go of abandoned ones."""
        loop = asyncio.get_running_loop()
        every = self.claimant.timeout_s / 6
        next_beat = loop.time() + every
        while True:
            wait = self._poll_s if self._waiting else max(0.0, next_beat - loop.time())
            # asyncio.wait, not wait_for: 3.11's wait_for can swallow a cancellation that
            # arrives as the event is set, and the queue's exit would wait on this forever.
            woken = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait([woken], timeout=wait)
            finally:
                woken.cancel()
            self._wake.clear()
            if self._abandoned:
                await self._let_go()
            if loop.time() >= next_beat:
                next_beat = loop.time() + every
                # A busy or restarting store: the next beat comes well within the timeout.
                with contextlib.suppress(WorkspaceError):
                    await self._workspace.claims.renew(self.claimant)
            if self._waiting:
                await self._poll()

    async def _let_go(self) -> None:
        keys, self._abandoned = sorted(self._abandoned), set()
        try:
            await self._workspace.claims.release(self.claimant, keys)
        except WorkspaceError:
            self._abandoned.update(keys)  # tried again at the next wake; else they expire

    async def _poll(self) -> None:
        """Settle the keys waited for that are stored, free, stale, or waited on too long."""
        loop = asyncio.get_running_loop()
        keys = list(self._waiting)
        try:
            status = await self._workspace.claims.status(keys)
            overdue = [
                k for k in status.held if loop.time() - self._waiting[k][1] > self._max_wait_s
            ]
            taken = await self._workspace.claims.take(self.claimant, status.mine)
            forced = await self._workspace.claims.take(self.claimant, overdue, force=True)
            await self._told(taken)
            await self._told(forced)
            stored = [*status.stored, *taken.stored, *forced.stored]
            records = await self._workspace.lookup_many(stored)
        except WorkspaceError as exc:
            for key in keys:
                future, _ = self._waiting.pop(key)
                if not future.done():
                    future.set_exception(exc)
            return
        for key in [*taken.mine, *forced.mine]:
            self._settle(key, None)
        for key in stored:
            if key in records:
                self._settle(key, records[key])

    def _settle(self, key: str, value: RolloutRecord | None) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is None or waiting[0].done():
            if value is None:  # claimed for a caller that is gone: let go of it
                self._abandoned.add(key)
            return
        waiting[0].set_result(value)

    async def _told(self, split: ClaimSplit) -> None:
        """Tell the run whose claims were taken over here, and why (one event per holder)."""
        if not split.taken_over or self._on_takeover is None:
            return
        by_holder: dict[str, int] = {}
        for why in split.taken_over.values():
            by_holder[why] = by_holder.get(why, 0) + 1
        for why, count in by_holder.items():
            await self._on_takeover({"taken_over": count, "from": why})

    async def close(self) -> None:
        """Stop waiting and let go of every claim of this queue."""
        for task in list(self._tasks):
            task.cancel()
        for future, _ in self._waiting.values():
            future.cancel()
        self._waiting.clear()
        with contextlib.suppress(WorkspaceError):
            await self._workspace.claims.release(self.claimant)


async def _served(
    job: J, record: RolloutRecord, future: asyncio.Future[RolloutRecord], serve: Serve[J]
) -> None:
    """``job`` is served ``record``: counted by the queue, then its future settled."""
    await serve(job, record)
    if not future.done():
        future.set_result(record)
