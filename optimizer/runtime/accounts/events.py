"""The run's event sink: every event is appended to the workspace log, then fanned out.

The log (with its monotonic ``seq``) is the source of truth for live feeds and SSE
resumption; in-process subscribers (the progress bar, the service) get the same events
without polling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas import Event
from workspace import Workspace

__all__ = ["EventSink", "Listener"]

Listener = Callable[[Event], None]


class EventSink:
    """Appends a run's events to the workspace and calls the listeners (which must not block)."""

    def __init__(self, workspace: Workspace, run_id: str) -> None:
        self._workspace = workspace
        self._run_id = run_id
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` with every event from now on."""
        self._listeners.append(listener)

    async def emit(self, type: str, data: dict[str, Any] | None = None) -> Event:
        """Persist one event, then notify listeners."""
        event = await self._workspace.append_event(self._run_id, type, data or {})
        for listener in self._listeners:
            listener(event)
        return event
