"""The error gate of a run: it stops a run whose rollouts fail, and says what to fix.

The queue's ``ErrorGate`` stops a run once too many paid rollouts failed after their
retries. Which fix to name depends on how they failed: rollouts that timed out need a longer
``--rollout-timeout`` (or a container that answers faster), not a look at rate limits; any
other failure is shown as the container last reported it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.dispatch import ErrorGate
from schemas import ContainerError, RolloutRecord

__all__ = ["DiagnosingGate", "timed_out"]

_TIMEOUT = re.compile(r"timeout|timed out", re.IGNORECASE)


def timed_out(error: str | None) -> bool:
    """Whether a failed rollout's error says it timed out (``httpx.ReadTimeout`` and kin)."""
    return bool(error and _TIMEOUT.search(error))


@dataclass
class DiagnosingGate(ErrorGate):
    """An ``ErrorGate`` whose verdict names the cause: timeouts, or the last error seen."""

    timeout_s: float | None = None
    timeouts: int = 0
    last_error: str = ""

    def observe(self, record: RolloutRecord) -> None:
        """Count one paid rollout and remember how it failed."""
        super().observe(record)
        if record.status == "error":
            self.last_error = record.error or "no error message"
            self.timeouts += timed_out(record.error)

    def check(self) -> None:
        """Raise ``ContainerError`` naming the cause once the error rate passes the limit."""
        try:
            super().check()
        except ContainerError as exc:
            raise ContainerError(self.verdict()) from exc

    def verdict(self) -> str:
        """Why the run stops and what to change."""
        total = self.ok + self.errors
        head = (
            f"{self.errors} of {total} rollouts failed after retries (over the "
            f"{self.max_rate:.0%} limit, --max-error-rate)"
        )
        if self.timeouts and 2 * self.timeouts >= self.errors:
            limit = f"{self.timeout_s:g} s" if self.timeout_s is not None else "the limit"
            longer = f" (e.g. --rollout-timeout {2 * self.timeout_s:g})" if self.timeout_s else ""
            return (
                f"{head}; {self.timeouts} of them timed out: the container gave no answer "
                f"within {limit} (--rollout-timeout). Raise it{longer} if a rollout needs "
                "longer, or lower --concurrency if the container slows down under load."
            )
        return (
            f"{head}; the container is not healthy enough to optimize on. Last error: "
            f"{self.last_error[:500]}. Check the container's log (and, for 429/503 answers, "
            "its rate limits)."
        )
