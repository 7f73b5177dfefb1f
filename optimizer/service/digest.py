"""A run's state folded from its event log: phase, budget used, best so far, the verdict.

The event log is the source of truth (it is what the console replays); a digest reads it
incrementally, so asking for a run's summary again only folds the events appended since.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from schemas import Event
from workspace import Workspace

__all__ = ["Digests", "RunDigest"]

PAGE = 1000


@dataclass
class RunDigest:
    """What the events of one run say so far. ``seq`` is the last event folded in."""

    seq: int = 0
    phase: str | None = None
    program: dict[str, Any] | None = None
    budget: dict[str, Any] = field(default_factory=dict)
    best: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None
    candidates: int = 0
    iterations: int = 0
    rejected: int = 0
    coverage: dict[str, float] = field(
        default_factory=dict
    )  # candidate -> share of train seeds won (among the seeds some candidate solved)
    covered: dict[str, int] | None = None  # {"covered": seeds some candidate solved, "seeds": n}
    set_aside: list[dict[str, Any]] = field(default_factory=list)  # seeds no longer asked
    means: dict[str, float | None] = field(default_factory=dict)
    bests: dict[str, float | None] = field(default_factory=dict)  # highest seed reward
    winners: dict[str, list[str]] = field(default_factory=dict)
    promotion: dict[str, Any] | None = None
    concurrency: dict[str, Any] | None = None  # the last concurrency event: limit, max, endpoints
    rate_limit: dict[str, Any] | None = None  # while a URL rate-limits the run: its wait so far
    stop_reason: str | None = None
    error: str | None = None
    evidence_dir: str | None = None
    first_event_at: float | None = None
    last_event_at: float | None = None

    def fold(self, event: Event) -> None:
        """Apply one event (events at or before ``seq`` are ignored, so folding is idempotent)."""
        if event.seq <= self.seq:
            return
        self.seq = event.seq
        self.first_event_at = self.first_event_at or event.ts
        self.last_event_at = event.ts
        data, kind = event.data, event.type
        if kind == "phase":
            self.phase = str(data.get("phase"))
            self.error = data.get("error", self.error)
            self.evidence_dir = data.get("evidence_dir", self.evidence_dir)
        elif kind == "program":
            self.program = {
                k: data.get(k) for k in ("program_id", "fingerprint", "components", "seeds")
            }
            limits = data.get("budget") or {}
            self.budget = {
                **self.budget,
                "limit": limits.get("max_metric_calls"),
                "max_cost_usd": limits.get("max_cost_usd"),
            }
        elif kind == "trials":
            self.budget = {**self.budget, **(data.get("budget") or {})}
        elif kind == "scored" and data.get("split") == "train":
            entry = {"candidate_id": data.get("candidate_id"), "mean": data.get("mean")}
            self.means[str(entry["candidate_id"])] = entry["mean"]
            self.bests[str(entry["candidate_id"])] = data.get("best_seed")
            if self.baseline is None:
                self.baseline = entry
                self.candidates = max(self.candidates, 1)
            if self.best is None and entry["mean"] is not None:
                self.best = entry
        elif kind == "frontier":
            self.coverage = dict(data.get("coverage") or {})
            if "covered" in data:
                self.covered = {"covered": int(data["covered"]), "seeds": int(data["seeds"])}
            self.winners = {str(k): list(v) for k, v in (data.get("winners") or {}).items()}
            if data.get("best"):
                self.best = dict(data["best"])
        elif kind == "seed_set_aside":
            self.set_aside.append(dict(data))
        elif kind == "concurrency":
            self.concurrency = dict(data)
        elif kind == "warning" and isinstance(data.get("rate_limit"), dict):
            wait = data["rate_limit"]
            self.rate_limit = None if wait.get("cleared") else {**wait, "at": event.ts}
        elif kind == "candidate":
            self.candidates += 1
        elif kind == "iteration":
            self.iterations += 1
        elif kind == "proposal_rejected":
            self.rejected += 1
        elif kind == "search_stopped":
            self.stop_reason = data.get("reason")
        elif kind == "promotion":
            self.promotion = dict(data)

    def seeds_won(self) -> dict[str, int]:
        """Train seeds each frontier candidate wins (ties count for every winner)."""
        won: dict[str, int] = {}
        for winners in self.winners.values():
            for candidate_id in winners:
                won[candidate_id] = won.get(candidate_id, 0) + 1
        return won

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the API (without the per-candidate tables)."""
        data = asdict(self)
        del data["means"], data["bests"], data["winners"]
        return data


class Digests:
    """Per-run digests of one workspace, brought up to date on demand."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._by_run: dict[str, RunDigest] = {}

    def forget(self, run_id: str) -> None:
        """Drop the digest of a deleted run."""
        self._by_run.pop(run_id, None)

    async def get(self, run_id: str) -> RunDigest:
        """The digest of ``run_id`` with every event logged so far folded in."""
        digest = self._by_run.setdefault(run_id, RunDigest())
        while True:
            events = await self._workspace.events_since(run_id, digest.seq, PAGE)
            for event in events:
                digest.fold(event)
            if len(events) < PAGE:
                return digest
