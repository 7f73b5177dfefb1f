"""The runtime: one run's lifecycle, rollout queue, container client, budget, state and evidence.

It knows no search method: a ``Runner`` is handed a ``Searches`` registry (see ``strategy``).
"""

from __future__ import annotations

from optimizer.runtime.budget import Budget
from optimizer.runtime.client import ContainerClient, RetryPolicy
from optimizer.runtime.deps import ProposerLike, SearchDeps, score_on_train
from optimizer.runtime.dispatch import ErrorGate, RolloutQueue, SeedResult, scored_record
from optimizer.runtime.embedded import EmbeddedContainer, container_for
from optimizer.runtime.events import EventSink
from optimizer.runtime.frontier import Frontier, build_frontier, mean_score
from optimizer.runtime.minibatch import MinibatchSampler
from optimizer.runtime.promotion import Promotion
from optimizer.runtime.run import RunResult
from optimizer.runtime.run_config import stored_config
from optimizer.runtime.run_inputs import resolve_inputs
from optimizer.runtime.runner import Runner
from optimizer.runtime.state import SearchState
from optimizer.runtime.stats import PairedLift, paired_bootstrap, promotion_rng
from optimizer.runtime.strategy import Search, Searches, SearchMethod, SearchStart, method_of

__all__ = [
    "Budget",
    "ContainerClient",
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
