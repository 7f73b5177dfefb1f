"""How one execution of a run ends when it does not complete: failed, cancelled, taken over.

``RunGuard.run(execute)`` awaits the run's phases and records any other end in the workspace:
``failed`` with the error (and a ``phase`` event) for a ``GepaError``, an ``OSError`` or an
HTTP error; ``cancelled`` with the command that resumes it (Ctrl-C, SIGTERM, the service's
cancel); nothing for ``RunLeased``, since the process that took the run over owns its status
now. A background task stops the execution with ``halt(error)`` (its container changed under
it), and a lease lost to another process turns the cancellation it causes into ``RunLeased``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.lifecycle.lease import HeldLease
from schemas import GepaError, RunLeased
from workspace import Workspace

__all__ = ["RunGuard"]

T = TypeVar("T")


class RunGuard:
    """The end states of one execution of ``run_id`` (``held``: the lease it runs under)."""

    def __init__(
        self, run_id: str, workspace: Workspace, events: EventSink, held: HeldLease | None
    ) -> None:
        self._run_id = run_id
        self._workspace = workspace
        self._events = events
        self._held = held
        self._halted: GepaError | None = None
        self._owner: asyncio.Task[Any] | None = None

    def halt(self, error: GepaError) -> None:
        """Stop the execution from a background task: ``run`` raises ``error``."""
        if self._halted is None and self._owner is not None:
            self._halted = error
            self._owner.cancel()

    async def run(self, execute: Callable[[], Awaitable[T]]) -> T:
        """``execute()``, recording how it ended: failed, cancelled, or taken over."""
        owner = self._owner = asyncio.current_task()
        try:
            try:
                return await execute()
            except asyncio.CancelledError:
                reason = self._stop_reason()
                if reason is None or owner is None:
                    raise
                owner.uncancel()  # the cancellation was ours, a way to deliver ``reason``
                raise reason from None
        except RunLeased:
            raise  # the process that took the run over owns its status now
        except (GepaError, OSError, httpx.HTTPError) as exc:
            await self._workspace.update_run(
                self._run_id, status="failed", phase="failed", error=str(exc)
            )
            await self._events.emit("phase", {"phase": "failed", "error": str(exc)})
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._cancelled())
            raise

    def _stop_reason(self) -> GepaError | None:
        if self._held is not None and self._held.lost is not None:
            return RunLeased(
                f"run {self._run_id} was taken over by {self._held.lost}, because this "
                "process's lease heartbeat stalled; this process stopped and leaves the run "
                "to it"
            )
        return self._halted

    async def _cancelled(self) -> None:
        # No event: the service follows with its own (a shutdown leaves the run "running").
        await self._workspace.update_run(
            self._run_id,
            status="cancelled",
            error=f"cancelled; resume it with `gepa-runtime optimize run {self._run_id} "
            f"--workspace {self._workspace.root}`",
        )
