"""GEPA's own data in a run's checkpoint: the log of its iterations.

Every iteration's outcome is logged under a key (the iteration, or the iteration and a suffix
for a stack, a rebase or a text merge): the candidate it made, or ``None``. A resumed run
replays the log from the workspace (stored candidates, cached rollouts) instead of asking the
reflection model again. The log lives in the run state's ``extra["gepa"]``, which the runtime
stores with every checkpoint as the method's own data, beside ``notes``: for each of a
person's notes (by its event's seq), the candidates written with it
(:mod:`optimizer.gepa.notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GepaState"]


@dataclass
class GepaState:
    """The iteration log (key -> candidate id, or ``None`` when the iteration made none),
    and the candidates written with each of a person's notes (note seq -> candidate ids)."""

    proposals: dict[str, str | None] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def within(cls, extra: dict[str, Any]) -> GepaState:
        """The state kept in a run state's ``extra``, installed there so that every
        checkpoint stores it (a checkpoint of an older run held the log at ``proposals``)."""
        stored = extra.get("gepa") or {}
        log = stored.get("proposals", extra.pop("proposals", {}))
        notes = stored.get("notes") or {}
        state = cls(
            {str(k): v for k, v in log.items()}, {str(k): list(v) for k, v in notes.items()}
        )
        extra["gepa"] = {"proposals": state.proposals, "notes": state.notes}
        return state
