"""Seeds that fail on their own: counted once, and set aside once two candidates failed there.

A rollout that still fails after its retries is an *infrastructure fault* when the container
could not serve it (refused or dropped connections, 429/502/503/504 answers, its rate limit)
and a *seed fault* otherwise: a 500 (the agent or the verifier raised on that row), a timeout,
a 200 that cannot be scored. A row the agent crashes on fails for every candidate; asking it
again costs a rollout per candidate and teaches nothing. So a seed with seed faults for
``ASIDE_AFTER`` different candidates is *set aside*: the queue stops sending it, it leaves every
score table (it is never scored as 0, and every mean is over the seeds that remain), and the
run names it (event ``seed_set_aside``, a warning, the evidence packet, the report, the
console). The error gate (:class:`optimizer.runtime.rollouts.gate.ErrorGate`) counts a failing seed
once however often it failed, and every infrastructure fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schemas import InvalidRollout, RolloutFailed, RolloutRecord

__all__ = ["ASIDE_AFTER", "INFRASTRUCTURE", "SeedFailures", "SetAside", "failure_kind"]

ASIDE_AFTER = 2  # different candidates a seed must fail for before it is set aside
INFRASTRUCTURE = frozenset({"connection", "unavailable", "rate_limit"})
_UNAVAILABLE = frozenset({429, 502, 503, 504})  # the container or what is behind it is busy/down


def failure_kind(exc: RolloutFailed | InvalidRollout) -> str:
    """The gate's name for why a rollout failed: ``invalid``, ``timeout``, ``status`` (a 500 or
    another error answer), or an infrastructure fault (``connection``, ``unavailable``: its last
    answer was 429/502/503/504, ``rate_limit``)."""
    if isinstance(exc, InvalidRollout):
        return "invalid"
    if exc.reason == "status" and exc.status in _UNAVAILABLE:
        return "unavailable"
    return exc.reason


@dataclass(frozen=True)
class SetAside:
    """A seed no longer asked: the candidates it failed for and its last error."""

    seed: str
    candidates: tuple[str, ...]
    kind: str
    error: str

    def describe(self) -> str:
        """One line for warnings and the report."""
        return (
            f"seed {self.seed!r} set aside: it failed for {len(self.candidates)} different "
            f"candidates ({', '.join(self.candidates)}), so it is not asked again and never "
            f"scored; last error: {self.error}"
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON form for events, the checkpoint and the evidence packet."""
        return {
            "seed": self.seed,
            "candidates": list(self.candidates),
            "kind": self.kind,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SetAside:
        """The inverse of ``as_dict``."""
        return cls(
            seed=str(data["seed"]),
            candidates=tuple(str(c) for c in data["candidates"]),
            kind=str(data["kind"]),
            error=str(data["error"]),
        )


@dataclass
class SeedFailures:
    """Which seeds had seed faults, for which candidates (by content hash), and which are
    set aside."""

    after: int = ASIDE_AFTER
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # seed -> hash -> id
    aside: dict[str, SetAside] = field(default_factory=dict)
    repeats: int = 0  # seed faults on seeds that had failed before (not counted again)

    def observe(self, record: RolloutRecord, kind: str) -> SetAside | None:
        """Note one seed fault; the seed's ``SetAside`` when this failure set it aside."""
        by = self.failed.get(record.seed)
        if by is None:
            by = self.failed[record.seed] = {}
        else:
            self.repeats += 1
        by.setdefault(record.candidate_hash, record.candidate_id)
        if len(by) < self.after or record.seed in self.aside:
            return None
        note = SetAside(record.seed, tuple(by.values()), kind, (record.error or "")[:300])
        self.aside[record.seed] = note
        return note

    def snapshot(self) -> dict[str, Any]:
        """JSON form, for the run's checkpoint (a resumed run sets the same seeds aside)."""
        return {
            "failed": {seed: dict(by) for seed, by in self.failed.items()},
            "aside": [note.as_dict() for note in self.aside.values()],
            "repeats": self.repeats,
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Take a ``snapshot`` back."""
        self.failed = {
            str(s): {str(h): str(c) for h, c in by.items()}
            for s, by in data.get("failed", {}).items()
        }
        self.aside = {n["seed"]: SetAside.from_dict(n) for n in data.get("aside", [])}
        self.repeats = int(data.get("repeats", 0))
