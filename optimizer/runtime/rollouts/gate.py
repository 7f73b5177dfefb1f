"""The error gate: stops a run whose paid rollouts fail too often to optimize on.

The queue tells it every paid rollout (``observe``) and asks it after each batch
(``check``); it counts seed faults once per seed, sets a seed aside once it failed for two
candidates (:mod:`optimizer.runtime.rollouts.seed_failures`), and says, when it stops the
run, what the failures were and what to change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optimizer.runtime.rollouts.seed_failures import INFRASTRUCTURE, SeedFailures, SetAside
from schemas import ContainerError, RolloutRecord

__all__ = ["ErrorGate"]

# Why rollouts failed, as the gate reports them: (what happened, what to change).
_FAILURES = {
    "timeout": ("timed out", "raise --rollout-timeout if the agent needs longer"),
    "invalid": ("answered 200 with a body that cannot be scored", "fix what the container returns"),
    "status": (
        "failed after retries with HTTP errors (a 500: the agent or verifier raised)",
        "check the container's logs",
    ),
    "unavailable": (
        "failed after retries with 429/502/503/504 answers",
        "check the container's rate limits and that it and its model provider are up",
    ),
    "connection": (
        "failed after retries on refused or dropped connections",
        "check that the container is up and not overloaded",
    ),
    "rate_limit": (
        "gave up on the container's rate limit (429s past --rate-limit-wait)",
        "raise --rate-limit-wait, or give the container more capacity",
    ),
}


@dataclass
class ErrorGate:
    """Stops a run whose paid rollouts fail too often to optimize on anything but noise.

    A seed that fails on its own (a seed fault, :mod:`optimizer.runtime.rollouts.seed_failures`) counts
    once however often it failed, and is set aside once it failed for two different
    candidates; infrastructure faults count every time. The run stops when these errors pass
    ``max_rate`` of the rollouts (repeats of failing seeds left out), or when the seeds set
    aside pass ``max_rate`` of the run's ``seeds`` (a container that started failing on every
    row after many good rollouts).
    """

    max_rate: float
    min_attempts: int = 10
    ok: int = 0
    faults: int = 0  # infrastructure faults, each counted
    reasons: Counter[str] = field(default_factory=Counter)
    last_error: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None  # the rollout timeout, to suggest a longer one
    seeds: int | None = None  # the run's seeds, for the share set aside (else: the seeds seen)
    failures: SeedFailures = field(default_factory=SeedFailures)
    seen: set[str] = field(default_factory=set)

    @property
    def errors(self) -> int:
        """Failing seeds (each once) plus infrastructure faults."""
        return len(self.failures.failed) + self.faults

    @property
    def set_aside(self) -> dict[str, SetAside]:
        """The seeds set aside, in the order they were."""
        return self.failures.aside

    def observe(self, record: RolloutRecord, reason: str = "status") -> SetAside | None:
        """Count one paid rollout, ``reason`` (``failure_kind``) for an error; the seed's
        ``SetAside`` when this failure set it aside."""
        self.seen.add(record.seed)
        if record.status == "ok":
            self.ok += 1
            return None
        self.last_error[reason] = (record.error or "")[:300]
        if reason in INFRASTRUCTURE:
            self.faults += 1
            self.reasons[reason] += 1
            return None
        if record.seed not in self.failures.failed:
            self.reasons[reason] += 1
        return self.failures.observe(record, reason)

    def check(self) -> None:
        """Raise ``ContainerError`` once the error rate passes the threshold."""
        total = self.ok + self.errors
        if total < self.min_attempts:
            return
        kinds = "; ".join(self._kind(r, n) for r, n in self.reasons.most_common())
        limit = f"over the {self.max_rate:.0%} limit, --max-error-rate"
        if self.errors / total > self.max_rate:
            again = self.failures.repeats
            repeats = f"; {again} repeated failures of those seeds counted once" if again else ""
            raise ContainerError(
                f"{self.errors} of {total} rollouts failed ({limit}{repeats}); the run cannot "
                f"optimize on that: {kinds}"
            )
        aside, seeds = len(self.set_aside), self.seeds or len(self.seen)
        if seeds and aside / seeds > self.max_rate:
            raise ContainerError(
                f"{aside} of {seeds} seeds failed for {self.failures.after} different candidates "
                f"each and were set aside ({limit}); the run cannot optimize on what is left: "
                f"{kinds}"
            )

    def snapshot(self) -> dict[str, Any]:
        """What a resumed run needs to set the same seeds aside (the run's checkpoint)."""
        return self.failures.snapshot()

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Take a ``snapshot`` back; the failing seeds count again, once each."""
        if data:
            self.failures.restore(dict(data))
            for note in self.failures.aside.values():
                self.reasons[note.kind] += 1
                self.last_error[note.kind] = note.error

    def _kind(self, reason: str, count: int) -> str:
        what, fix = _FAILURES.get(reason, _FAILURES["status"])
        if reason == "timeout" and self.timeout_s is not None:
            fix = (
                f"{fix}, e.g. --rollout-timeout {2 * self.timeout_s:g}; no answer came within "
                f"{self.timeout_s:g} s (--rollout-timeout)"
            )
        return f"{count} {what} ({fix}; last: {self.last_error[reason]})"
