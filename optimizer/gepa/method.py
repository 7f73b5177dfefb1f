"""GEPA as a :class:`~optimizer.runtime.strategy.SearchMethod` (``--method gepa``)."""

from __future__ import annotations

from optimizer.gepa.search import GepaSearch
from optimizer.gepa.smoke import smoke_proposal
from optimizer.runtime.deps import SearchDeps
from optimizer.runtime.strategy import SearchStart
from schemas import RunConfig

__all__ = ["GepaMethod"]


class GepaMethod:
    """Reflective mutations and merges over the Pareto frontier (:class:`GepaSearch`)."""

    def prepare(self, config: RunConfig) -> None:
        """Nothing to check: GEPA needs only the core dependencies."""

    def build(self, deps: SearchDeps, start: SearchStart) -> GepaSearch:
        """The search; it starts from the frontier the baseline's train scores made."""
        return GepaSearch(deps)

    async def without_search(self, deps: SearchDeps, start: SearchStart) -> str:
        """One smoke proposal from the baseline's train rollouts, when there are any."""
        if not start.baseline_train:
            return ""
        return await smoke_proposal(deps, start.baseline_id, start.baseline_train)
