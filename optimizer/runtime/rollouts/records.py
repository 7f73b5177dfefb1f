"""What a rollout leaves: its stored record, and its result for one (candidate, seed).

``scored_record`` is the stored form of a rollout the container answered and the client
scored (the queue's and the sample rollouts' of ``optimize create``); ``SeedResult`` is what
every search is handed back for each seed it asked: the record, whether it came from the
cache, and its reward (``None`` for an error or a seed set aside).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optimizer.runtime.rollouts.client import RolloutOutcome
from schemas import RolloutRecord

__all__ = ["SeedResult", "scored_record"]


@dataclass(frozen=True)
class SeedResult:
    """The result of one (candidate, seed): ``reward`` is None when the rollout errored, or
    when the seed was ``set_aside`` (not sent: it failed for two other candidates before)."""

    seed: str
    record: RolloutRecord
    cached: bool
    set_aside: bool = False

    @property
    def reward(self) -> float | None:
        """The score, or None for an errored rollout (excluded from every mean)."""
        return self.record.reward if self.record.status == "ok" else None


def scored_record(ids: Mapping[str, Any], outcome: RolloutOutcome) -> RolloutRecord:
    """The stored form of a scored rollout; ``ids`` are its key fields (``cache_key``,
    ``run_id``, ``candidate_id``, ``candidate_hash``, ``fingerprint``, ``seed``, ``policy``,
    ``attempts``)."""
    response = outcome.response
    return RolloutRecord.model_validate(
        {
            **ids,
            "status": "ok",
            "reward": response.reward,
            "objectives": response.objectives or {"reward": response.reward},
            "output": response.output,
            "feedback": response.feedback,
            "trace": outcome.trace,
            "trace_truncated": outcome.trace_truncated,
            "usage": response.usage,
            "latency_ms": outcome.latency_ms,  # measured here; usage.latency_ms is the container's
            "error": response.error,
        }
    )
