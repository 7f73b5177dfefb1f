"""A run taking in a person's actions as its execution reads them (``RunSteering``).

The pause, the pin, the notes and a stop are read where they apply (the rollout queue and the
search's parts hold on ``steering.hold()`` or read ``steering.state``). A rejection changes the
run's search state: the candidate leaves the frontier and the ranking
(``SearchState.reject``), so whatever the method, it is never a parent, merged or promoted;
the new frontier is saved and announced, and what the end of the run still needs recomputed
(its best may have changed). Each action taken in is logged as an ``action_applied`` event
(``action_seq``: the action's own event), the timeline's sign that the run acted on it.
"""

from __future__ import annotations

from collections.abc import Callable

from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.search.deps import announce_frontier
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.steering import RunSteering, Steering
from schemas import Event
from workspace import Workspace

__all__ = ["APPLIED", "SteeredRun"]

APPLIED = "action_applied"


class SteeredRun:
    """Applies the actions ``steering`` reads to one execution of ``run_id``."""

    def __init__(
        self, steering: RunSteering, workspace: Workspace, events: EventSink, run_id: str
    ) -> None:
        self.steering = steering
        self._workspace = workspace
        self._events = events
        self._run_id = run_id
        self._state: SearchState | None = None
        self.refresh_reserve: Callable[[], None] = lambda: None
        steering.subscribe(self._take)

    def attach(self, state: SearchState) -> None:
        """The run's search state from now on, with the rejections logged so far applied."""
        self._state = state
        for cid, reason in self.steering.state.rejected.items():
            state.reject(cid, reason)

    async def _take(self, event: Event, steering: Steering) -> None:
        data = event.data
        cid = data.get("candidate_id")
        state = self._state
        if data.get("action") == "reject" and state is not None and cid in steering.rejected:
            previous = set(state.frontier.members())
            state.reject(str(cid), steering.rejected[str(cid)])
            self.refresh_reserve()
            if state.train:
                await announce_frontier(
                    self._workspace, self._events, self._run_id, state, previous
                )
        await self._events.emit(
            APPLIED,
            {
                "action_seq": event.seq,
                "action": data.get("action"),
                "source": data.get("source"),
                "candidate_id": cid,
                "paused": steering.paused,
            },
        )
