"""The runtime: one run's life, sending its rollouts, what searches share, and its results.

It knows no search method: a ``Runner`` is handed a ``Searches`` registry (see
:mod:`optimizer.runtime.search.strategy`). Its rooms, lowest first (a room imports only
those below it):

- :mod:`optimizer.runtime.accounts`: the budget, the plan it affords, the event sink;
- :mod:`optimizer.runtime.steering`: a person's actions on a run (pause, reject, pin, note,
  stop), recorded and folded;
- :mod:`optimizer.runtime.tracking`: the events mirrored into MLflow;
- :mod:`optimizer.runtime.rollouts`: the container client, the rollout queue, the error gate;
- :mod:`optimizer.runtime.search`: what every search is given and shares (``SearchDeps``,
  ``SearchMethod``, ``SearchState``, the frontier, the minibatch sampler);
- :mod:`optimizer.runtime.results`: promotion, statistics, the evidence packet and report;
- :mod:`optimizer.runtime.lifecycle`: a run created, resumed, executed and guarded.
"""

from __future__ import annotations

from optimizer.runtime.accounts import Budget, EventSink
from optimizer.runtime.lifecycle import EmbeddedContainer, Runner, RunResult
from optimizer.runtime.lifecycle.embedded import container_for
from optimizer.runtime.lifecycle.run_config import stored_config
from optimizer.runtime.lifecycle.run_inputs import resolve_inputs
from optimizer.runtime.results import Promotion
from optimizer.runtime.results.stats import PairedLift, paired_bootstrap, promotion_rng
from optimizer.runtime.rollouts import (
    ContainerClient,
    ErrorGate,
    RetryPolicy,
    RolloutQueue,
    SeedResult,
    client_for,
)
from optimizer.runtime.rollouts.records import scored_record
from optimizer.runtime.search import (
    Frontier,
    MinibatchSampler,
    ProposerLike,
    Search,
    SearchDeps,
    Searches,
    SearchMethod,
    SearchStart,
    SearchState,
    build_frontier,
    mean_score,
    method_of,
    score_on_train,
)

__all__ = [
    "Budget",
    "ContainerClient",
    "client_for",
    "EmbeddedContainer",
    "ErrorGate",
    "EventSink",
    "Frontier",
    "MinibatchSampler",
    "PairedLift",
    "Promotion",
    "ProposerLike",
    "RetryPolicy",
    "RolloutQueue",
    "RunResult",
    "Runner",
    "Search",
    "SearchDeps",
    "SearchMethod",
    "SearchStart",
    "SearchState",
    "Searches",
    "SeedResult",
    "build_frontier",
    "container_for",
    "mean_score",
    "method_of",
    "paired_bootstrap",
    "promotion_rng",
    "resolve_inputs",
    "score_on_train",
    "scored_record",
    "stored_config",
]
