"""A person's action on a run, as the REST API takes it and the event log stores it.

Every action is an event of type ``action`` in the run's log; its data is
:meth:`Action.event_data`: ``{"action", "source", ...}`` with the fields that action uses.

==========  ===============================  ============================================
action      fields                           what the run does
==========  ===============================  ============================================
``pause``   -                                sends no new rollout, starts no reflection
``resume``  -                                goes on where it was
``reject``  ``candidate_id``, ``reason``     never a parent, merged or promoted again
``pin``     ``candidate_id``                 the next proposals start from it
``unpin``   -                                the candidate selector chooses again
``note``    ``text``, ``candidate_id``       shown to the reflection model (see below)
            (or null), ``keep``
``stop``    ``reason`` (optional)            stops searching and promotes the best so far
==========  ===============================  ============================================

``source`` says where it came from: ``console``, ``rest`` or ``cli``. A note is shown to the
proposals asked after it (only those whose parent is ``candidate_id`` or descends from it,
when it names one) until a candidate written with it is accepted on train; ``keep`` shows it
to every later proposal.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ACTIONS", "SOURCES", "Action", "ActionName", "ActionSource"]

ActionName = Literal["pause", "resume", "reject", "pin", "unpin", "note", "stop"]
ActionSource = Literal["console", "rest", "cli"]
ACTIONS: tuple[str, ...] = ("pause", "resume", "reject", "pin", "unpin", "note", "stop")
SOURCES: tuple[str, ...] = ("console", "rest", "cli")

# The fields each action stores besides ``action`` and ``source``.
_FIELDS: dict[str, tuple[str, ...]] = {
    "pause": (),
    "resume": (),
    "reject": ("candidate_id", "reason"),
    "pin": ("candidate_id",),
    "unpin": (),
    "note": ("text", "candidate_id", "keep"),
    "stop": ("reason",),
}


class Action(BaseModel):
    """Body of ``POST /api/runs/{run_id}/actions``; fields an action does not use are ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: ActionName
    source: ActionSource = "rest"
    candidate_id: str | None = Field(default=None, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)
    text: str | None = Field(default=None, max_length=8000)
    keep: bool = False

    def event_data(self) -> dict[str, Any]:
        """The data of the ``action`` event that records it."""
        data: dict[str, Any] = {"action": self.action, "source": self.source}
        for name in _FIELDS[self.action]:
            data[name] = getattr(self, name)
        return data
