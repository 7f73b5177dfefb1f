"""A run's steering: the person's actions of its event log, folded into one state.

The fold is total: any sequence of ``action`` events folds, in ``seq`` order, and an action
that no longer fits (a second pause, a pin of a candidate rejected since) changes nothing.
What may be recorded is checked before, by :mod:`optimizer.runtime.steering.validate`.

- ``pause`` / ``resume`` set ``paused``; ``stop`` also resumes (a stopped run goes on to
  promotion, which a pause would hold);
- ``reject`` adds to ``rejected`` (candidate -> reason) and unpins that candidate;
- ``pin`` / ``unpin`` set ``pinned``;
- ``note`` appends to ``notes``;
- ``stop`` sets ``stop`` (the first one counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from schemas import Event

__all__ = ["Note", "Steering", "StopRequest", "fold_actions"]


@dataclass(frozen=True)
class Note:
    """A person's note to the reflection model; ``seq`` is its event's (its identity)."""

    text: str
    candidate_id: str | None
    ts: float
    seq: int
    source: str
    keep: bool = False  # shown to every later proposal, not only until one is accepted

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``GET /api/runs/{run_id}/steering``)."""
        return {
            "text": self.text,
            "candidate_id": self.candidate_id,
            "ts": self.ts,
            "seq": self.seq,
            "source": self.source,
            "keep": self.keep,
        }


@dataclass(frozen=True)
class StopRequest:
    """A person asked the search to stop and promote the best so far."""

    reason: str | None
    source: str
    ts: float

    def describe(self) -> str:
        """The stop reason the run reports."""
        why = f": {self.reason}" if self.reason else ""
        return f"stopped by a person ({self.source}){why}"


@dataclass(frozen=True)
class Steering:
    """What a run's actions say so far; ``seq`` is the last action folded in."""

    paused: bool = False
    rejected: Mapping[str, str] = field(default_factory=dict)  # candidate -> reason
    pinned: str | None = None
    notes: tuple[Note, ...] = ()
    stop: StopRequest | None = None
    seq: int = 0

    def apply(self, event: Event) -> Steering:
        """This state with one more ``action`` event (others, and older ones, change nothing)."""
        if event.type != "action" or event.seq <= self.seq:
            return self
        data, now = event.data, replace(self, seq=event.seq)
        action, source = data.get("action"), str(data.get("source") or "rest")
        cid = data.get("candidate_id")
        if action == "pause":
            return replace(now, paused=True)
        if action == "resume":
            return replace(now, paused=False)
        if action == "reject" and isinstance(cid, str):
            rejected = {**self.rejected, cid: str(data.get("reason") or "")}
            pinned = None if self.pinned == cid else self.pinned
            return replace(now, rejected=rejected, pinned=pinned)
        if action == "pin" and isinstance(cid, str) and cid not in self.rejected:
            return replace(now, pinned=cid)
        if action == "unpin":
            return replace(now, pinned=None)
        if action == "note" and data.get("text"):
            note = Note(
                str(data["text"]),
                cid if isinstance(cid, str) else None,
                event.ts,
                event.seq,
                source,
                bool(data.get("keep")),
            )
            return replace(now, notes=(*self.notes, note))
        if action == "stop" and self.stop is None:
            stop = StopRequest(data.get("reason") or None, source, event.ts)
            return replace(now, stop=stop, paused=False)
        return now

    @property
    def stop_reason(self) -> str | None:
        """Why a person stopped the search, as the run reports it; ``None`` if nobody did."""
        return self.stop.describe() if self.stop is not None else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``GET /api/runs/{run_id}/steering``)."""
        stop = self.stop
        return {
            "paused": self.paused,
            "rejected": dict(self.rejected),
            "pinned": self.pinned,
            "notes": [n.as_dict() for n in self.notes],
            "stop": None if stop is None else {"reason": stop.reason, "source": stop.source,
                                               "ts": stop.ts},
            "seq": self.seq,
        }  # fmt: skip


def fold_actions(events: Iterable[Event], start: Steering | None = None) -> Steering:
    """The steering of a run's ``action`` events (other events are skipped), from ``start``."""
    steering = start or Steering()
    for event in events:
        steering = steering.apply(event)
    return steering
