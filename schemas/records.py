"""Records the runtime persists and serves: runs, candidates, rollouts, events.

Candidate identity is content: ``content_hash(components)`` is the sha256 of the canonical
JSON of the component mapping, and ``candidate_id`` is its first 16 hex digits, so the same
prompt is the same candidate everywhere. The rollout cache key is
``cache_key(fingerprint, content_hash, seed, policy)``.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.protocol import Policy, Usage
from schemas.usage import ModelUsage

__all__ = [
    "CandidateRecord",
    "Event",
    "Origin",
    "Phase",
    "PHASES",
    "RolloutRecord",
    "RunRecord",
    "RunStatus",
    "Trial",
    "TrialView",
    "cache_key",
    "candidate_id_for",
    "content_hash",
    "policy_key",
]

Phase = Literal[
    "created",
    "evaluating_baseline",
    "searching",
    "evaluating_best",
    "finalizing",
    "completed",
    "failed",
]
PHASES: tuple[str, ...] = (
    "created",
    "evaluating_baseline",
    "searching",
    "evaluating_best",
    "finalizing",
    "completed",
    "failed",
)
RunStatus = Literal["created", "running", "completed", "failed", "cancelled"]
Origin = Literal["seed", "mutation", "merge", "mipro"]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(components: dict[str, str]) -> str:
    """sha256 of the canonical JSON of a candidate's components."""
    return hashlib.sha256(_canonical(components).encode()).hexdigest()


def candidate_id_for(components: dict[str, str]) -> str:
    """The stable id of a candidate: the first 16 hex digits of its content hash."""
    return content_hash(components)[:16]


def policy_key(policy: Policy) -> str:
    """Canonical text of a rollout policy, part of the cache key."""
    return _canonical(policy.model_dump(mode="json"))


def cache_key(fingerprint: str, candidate_hash: str, seed: str, policy: Policy | str) -> str:
    """The rollout cache key: program fingerprint + candidate content + seed + policy.

    ``policy`` may come as its ``policy_key`` text (the rollout queue computes it once).
    """
    key = policy if isinstance(policy, str) else policy_key(policy)
    raw = _canonical([fingerprint, candidate_hash, seed, key])
    return hashlib.sha256(raw.encode()).hexdigest()


class Record(BaseModel):
    """Base of stored records: tolerant of columns added by newer code."""

    model_config = ConfigDict(extra="ignore")


class RunRecord(Record):
    """One optimization run as stored. ``config`` is already redacted."""

    run_id: str
    config: dict[str, Any]
    status: RunStatus = "created"
    phase: Phase = "created"
    program_id: str | None = None
    fingerprint: str | None = None
    error: str | None = None
    state: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


class CandidateRecord(Record):
    """A candidate of a run with its lineage and how it was made."""

    run_id: str
    candidate_id: str
    content_hash: str
    components: dict[str, str]
    parents: list[str] = Field(default_factory=list)
    origin: Origin = "seed"
    rationale: str = ""
    diffs: dict[str, str] = Field(default_factory=dict)  # parent id -> unified diff
    proposer_usage: ModelUsage = Field(default_factory=ModelUsage)
    created_at: float = Field(default_factory=time.time)


class RolloutRecord(Record):
    """One finished rollout attempt: a cache entry when ``status == "ok"``, a record otherwise."""

    cache_key: str
    run_id: str
    candidate_id: str
    candidate_hash: str
    fingerprint: str
    seed: str
    policy: str  # policy_key(...)
    status: Literal["ok", "error"]
    reward: float | None = None
    objectives: dict[str, float] = Field(default_factory=dict)
    output: Any = None
    feedback: str = ""
    trace: dict[str, Any] = Field(default_factory=dict)
    trace_truncated: bool = False
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = 0.0
    attempts: int = 1
    error: str | None = None
    created_at: float = Field(default_factory=time.time)
    rollout_id: int | None = None  # the workspace's row id, set once stored


class Event(Record):
    """One entry of a run's append-only event log. ``seq`` is monotonic per workspace."""

    seq: int
    run_id: str
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    ts: float = Field(default_factory=time.time)


class Trial(Record):
    """A run's use of one rollout, paid (``cached=False``) or served from the cache."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    candidate_id: str
    seed: str
    cache_key: str
    cached: bool
    status: Literal["ok", "error"]
    rollout_id: int | None = None


class TrialView(Record):
    """One row of a run's trials feed: the trial joined with its rollout's results."""

    seq: int
    run_id: str
    candidate_id: str
    seed: str
    cache_key: str
    cached: bool
    status: Literal["ok", "error"]
    rollout_id: int | None = None
    reward: float | None = None
    objectives: dict[str, float] = Field(default_factory=dict)
    output: Any = None
    feedback: str = ""
    error: str | None = None
    latency_ms: float = 0.0
    trace_id: str | None = None  # the trace its rollout ran in (schemas.trace_ids)
    created_at: float = Field(default_factory=time.time)
