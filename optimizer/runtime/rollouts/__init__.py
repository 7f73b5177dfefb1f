"""Sending rollouts: from (candidate, seed) jobs to scored, stored records.

- :mod:`optimizer.runtime.rollouts.queue`: the rollout queue (cache first, bounded
  concurrency, in-flight keys shared, one committer);
- :mod:`optimizer.runtime.rollouts.records`: ``SeedResult`` and the stored record of a
  scored rollout;
- :mod:`optimizer.runtime.rollouts.gate` and :mod:`optimizer.runtime.rollouts.seed_failures`:
  the error gate and the seeds it sets aside;
- :mod:`optimizer.runtime.rollouts.client`: the container client (health, program, rollouts
  with retries), over :mod:`~optimizer.runtime.rollouts.endpoints` (one or many URLs),
  :mod:`~optimizer.runtime.rollouts.limits` and :mod:`~optimizer.runtime.rollouts.limit_watch`
  (adaptive concurrency and what the run says of it), :mod:`~optimizer.runtime.rollouts.retries`,
  :mod:`~optimizer.runtime.rollouts.lanes` (the transport of each worker) and
  :mod:`~optimizer.runtime.rollouts.bodies` (request and answer bodies).
"""

from __future__ import annotations

from optimizer.runtime.rollouts.bodies import (
    BIG_BODIES,
    BIG_BODY_BYTES,
    BodyReader,
    CandidateBody,
    ParsedRollout,
    RolloutBody,
)
from optimizer.runtime.rollouts.client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    ContainerClient,
    RolloutOutcome,
    client_for,
)
from optimizer.runtime.rollouts.endpoints import Endpoint, Endpoints
from optimizer.runtime.rollouts.gate import ErrorGate
from optimizer.runtime.rollouts.lanes import LANE, LaneTransport, env_proxies, lane_extensions
from optimizer.runtime.rollouts.limit_watch import LimitWatch, rate_limit_notice
from optimizer.runtime.rollouts.limits import AdaptiveLimit, EndpointLimits, Ticket
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.rollouts.records import SeedResult, scored_record
from optimizer.runtime.rollouts.retries import RetryPolicy, Tries, retry_after
from optimizer.runtime.rollouts.seed_failures import (
    ASIDE_AFTER,
    INFRASTRUCTURE,
    SeedFailures,
    SetAside,
    failure_kind,
)

__all__ = [
    "ASIDE_AFTER",
    "AdaptiveLimit",
    "BIG_BODIES",
    "BIG_BODY_BYTES",
    "BodyReader",
    "CandidateBody",
    "ContainerClient",
    "client_for",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Endpoint",
    "EndpointLimits",
    "Endpoints",
    "ErrorGate",
    "INFRASTRUCTURE",
    "LANE",
    "LaneTransport",
    "LimitWatch",
    "ParsedRollout",
    "RetryPolicy",
    "RolloutBody",
    "RolloutOutcome",
    "RolloutQueue",
    "SeedFailures",
    "SeedResult",
    "SetAside",
    "Ticket",
    "Tries",
    "env_proxies",
    "failure_kind",
    "lane_extensions",
    "rate_limit_notice",
    "retry_after",
    "scored_record",
]
