"""What every search method is given and shares; the runtime's view of a method.

- :mod:`optimizer.runtime.search.strategy`: ``SearchMethod``, ``Search``, ``SearchStart`` and
  the ``Searches`` registry a runner is handed;
- :mod:`optimizer.runtime.search.deps`: ``SearchDeps`` (the run's shared parts, injected) and
  ``score_on_train``;
- :mod:`optimizer.runtime.search.state`: ``SearchState``, candidates and their scores;
- :mod:`optimizer.runtime.search.frontier`: the per-seed Pareto frontier (pure);
- :mod:`optimizer.runtime.search.minibatch`: the ``MinibatchSampler``;
- :mod:`optimizer.runtime.search.baseline`: the baseline's train scores a search starts on.
"""

from __future__ import annotations

from optimizer.runtime.search.baseline import BaselineScores, score_baseline
from optimizer.runtime.search.deps import (
    ProposerLike,
    SearchDeps,
    announce_frontier,
    score_on_train,
)
from optimizer.runtime.search.frontier import (
    Frontier,
    build_frontier,
    dominates,
    frontier_view,
    mean_score,
)
from optimizer.runtime.search.minibatch import MinibatchSampler
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import Search, Searches, SearchMethod, SearchStart, method_of

__all__ = [
    "BaselineScores",
    "Frontier",
    "MinibatchSampler",
    "ProposerLike",
    "Search",
    "SearchDeps",
    "SearchMethod",
    "SearchStart",
    "SearchState",
    "Searches",
    "announce_frontier",
    "build_frontier",
    "dominates",
    "frontier_view",
    "mean_score",
    "method_of",
    "score_baseline",
    "score_on_train",
]
