"""A run's steering as its execution sees it: read from the workspace as actions arrive.

The process executing a run reads the ``action`` events of its log every ``POLL_S`` seconds
(an action may come from the service, the CLI in another process, or another host sharing a
PostgreSQL workspace), folds them, and tells the parts:

- a pause holds the rollout queue before it dispatches a rollout and the search before it
  starts a reflection call (both ``await steering.hold()``); what is in flight finishes;
- a rejection reaches the search state through the listeners (``subscribe``), which the run
  registers (``SearchState.reject``);
- the pin, the notes and a stop are read by the search's parts when they need them
  (``steering.state``).

A run resumed by id folds its whole log first (``load``), so one paused before a restart
starts paused. ``paused_s`` counts the time paused, which the search's timeout leaves out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from optimizer.runtime.steering.record import action_events
from optimizer.runtime.steering.state import Steering
from schemas import Event, GepaError
from workspace import Workspace

__all__ = ["POLL_S", "RunSteering", "SteeringListener"]

POLL_S = 0.5

SteeringListener = Callable[[Event, Steering], Awaitable[None]]


class RunSteering:
    """The steering of the run ``run_id`` of ``workspace``; without a workspace, a run no
    person steers (the default of a search built without a run: tests, the Python API)."""

    def __init__(
        self,
        workspace: Workspace | None = None,
        run_id: str = "",
        *,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._workspace = workspace
        self._run_id = run_id
        self._poll_s = poll_s
        self._clock = clock
        self.state = Steering()
        self._running = asyncio.Event()
        self._running.set()
        self._listeners: list[SteeringListener] = []
        self._watchers: list[Callable[[Steering], object]] = []
        self._paused_at: float | None = None
        self._paused_total = 0.0

    def subscribe(self, listener: SteeringListener) -> None:
        """Call ``listener(event, steering)`` after each new action is folded in."""
        self._listeners.append(listener)

    def on_change(self, watcher: Callable[[Steering], object]) -> Callable[[], None]:
        """Call ``watcher(steering)`` at once (before any listener) each time an action is
        folded in, e.g. to stop a search the moment a person says so; returns what removes it."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher)

    async def load(self) -> Steering:
        """Fold every action logged so far (a resumed run starts as its actions left it)."""
        await self.refresh()
        return self.state

    async def watch(self, stop: Callable[[GepaError], None] | None = None) -> None:
        """Read new actions every ``poll_s`` seconds, until cancelled; a failure to read them
        (the store cannot be read) is handed to ``stop``, which ends the run with it."""
        while True:
            await asyncio.sleep(self._poll_s)
            try:
                await self.refresh()
            except GepaError as exc:
                if stop is None:
                    raise
                stop(exc)
                return

    async def refresh(self) -> list[Event]:
        """Fold the actions logged since the last one seen; tell the listeners. The new ones."""
        if self._workspace is None:
            return []
        new = await action_events(self._workspace, self._run_id, self.state.seq)
        for event in new:
            self.take(event)
            for listener in self._listeners:
                await listener(event, self.state)
        return new

    def take(self, event: Event) -> None:
        """Fold one action in, and hold or release the run as it says."""
        self.state = self.state.apply(event)
        if self.state.paused and self._paused_at is None:
            self._paused_at = self._clock()
            self._running.clear()
        elif not self.state.paused and self._paused_at is not None:
            self._paused_total += self._clock() - self._paused_at
            self._paused_at = None
            self._running.set()
        for watcher in list(self._watchers):
            watcher(self.state)

    @property
    def paused(self) -> bool:
        """Whether the run is paused now."""
        return self._paused_at is not None

    @property
    def paused_s(self) -> float:
        """Seconds this execution has been paused, the current pause included."""
        current = self._clock() - self._paused_at if self._paused_at is not None else 0.0
        return self._paused_total + current

    async def hold(self) -> None:
        """Return at once while the run is not paused; else when it is resumed."""
        if not self._running.is_set():
            await self._running.wait()
