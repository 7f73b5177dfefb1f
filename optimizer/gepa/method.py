"""GEPA as a :class:`~optimizer.runtime.search.strategy.SearchMethod` (``--method gepa``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optimizer.gepa.search import GepaSearch
from optimizer.gepa.showing import failure_kind
from optimizer.gepa.smoke import smoke_proposal
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import SearchStart
from schemas import RunConfig

__all__ = ["GepaMethod"]


class GepaMethod:
    """Reflective mutations and merges over the Pareto frontier (:class:`GepaSearch`)."""

    def prepare(self, config: RunConfig) -> None:
        """Nothing to check: GEPA needs only the core dependencies."""

    def starts_on_first_round(
        self, config: RunConfig, first_round: Mapping[str, SeedResult]
    ) -> bool:
        """When the round shows a kind of failure for every writer: the writers split the
        kinds (``Showing``), so each is shown one of its own; no child is judged before the
        rest is in (``GepaSearch``). With fewer, some would be shown the same failures and
        write the same fix."""
        kinds = {
            failure_kind(r.seed, r.record.feedback or "")
            for r in first_round.values()
            if r.reward is not None and r.reward < 1.0
        }
        return len(kinds) >= (config.proposals_in_flight or 1)

    def build(self, deps: SearchDeps, start: SearchStart) -> GepaSearch:
        """The search; it starts from the frontier the baseline's train scores made."""
        return GepaSearch(deps, start.scoring)

    async def without_search(self, deps: SearchDeps, start: SearchStart) -> str:
        """One smoke proposal from the baseline's train rollouts, when there are any."""
        if not start.baseline_train:
            return ""
        return await smoke_proposal(deps, start.baseline_id, start.baseline_train)

    def evidence_section(self, state: SearchState, best_id: str) -> dict[str, Any] | None:
        """None: the packet's shared sections (frontier, candidates, lineage) say it all."""
        return None

    def report_lines(self, section: Mapping[str, Any]) -> list[str]:
        """None: GEPA adds no section of its own."""
        return []
