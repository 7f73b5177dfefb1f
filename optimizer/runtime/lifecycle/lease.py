"""Holding a run's lease while this process executes the run (see :mod:`workspace.lease`).

``hold_lease`` takes the lease (``RunLeased``, naming the holder, while another live process
has it), renews its heartbeat in the background and gives it up at the end. If another
process takes the lease over anyway (this one's heartbeat stalled past the timeout: a
suspended laptop, a stopped process), the next heartbeat notices, records by whom in
``HeldLease.lost`` and cancels the task holding the lease, so the run stops here instead of
being executed by two processes.

    async with hold_lease(workspace, run_id) as held:
        ...   # execute the run; held.takeover says whose stale lease was replaced
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from schemas import WorkspaceError
from workspace import HEARTBEAT_S, Lease, Takeover, Workspace

__all__ = ["HeldLease", "hold_lease"]


@dataclass
class HeldLease:
    """The lease this process holds, whose stale lease it replaced, and whether it lost it."""

    lease: Lease
    takeover: Takeover | None
    lost: str | None = None  # who took it over, once another process did


@asynccontextmanager
async def hold_lease(
    workspace: Workspace,
    run_id: str,
    *,
    every_s: float | None = None,
    timeout_s: float | None = None,
) -> AsyncIterator[HeldLease]:
    """Hold the lease of ``run_id`` for the body; the calling task is cancelled if it is lost.

    The lease promises a heartbeat within the workspace's ``lease_timeout_s`` and beats
    every sixth of it (``HEARTBEAT_S`` at most) unless ``every_s`` is given; ``timeout_s``
    judges a current holder more strictly than its own timeout.
    """
    lease, takeover = await workspace.acquire_lease(run_id, timeout_s=timeout_s)
    every_s = min(HEARTBEAT_S, lease.every_s) if every_s is None else every_s
    held = HeldLease(lease, takeover)
    owner = asyncio.current_task()
    assert owner is not None  # called from a coroutine
    beat = asyncio.create_task(
        _heartbeat(workspace, held, owner, every_s, timeout_s), name=f"lease:{run_id}"
    )
    try:
        yield held
    finally:
        beat.cancel()
        if held.lost is None:
            await asyncio.shield(workspace.release_lease(lease))


async def _heartbeat(
    workspace: Workspace,
    held: HeldLease,
    owner: asyncio.Task[object],
    every_s: float,
    timeout_s: float | None,
) -> None:
    while True:
        await asyncio.sleep(every_s)
        try:
            kept = await workspace.renew_lease(held.lease)
        except WorkspaceError:
            # A busy or full database: the run's own writes report that; beat again later.
            continue
        if kept:
            continue
        holder = await workspace.lease_holder(held.lease.run_id, timeout_s=timeout_s)
        held.lost = holder.describe() if holder is not None else "another process"
        owner.cancel()
        return
