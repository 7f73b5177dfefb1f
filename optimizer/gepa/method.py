"""GEPA as a :class:`~optimizer.runtime.search.strategy.SearchMethod` (``--method gepa``).

``GepaMethod()`` runs with the parts the run's config names; ``GepaMethod(candidate_selector=
MySelector(), ...)`` with your own (see :class:`optimizer.gepa.strategies.GepaParts`)::

    from optimizer import run_optimization
    from optimizer.gepa import GepaMethod

    result = await run_optimization(config, method=GepaMethod(candidate_selector=MySelector()))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from optimizer.gepa.decisions import gepa_decisions
from optimizer.gepa.ledger import failure_kind
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.smoke import smoke_proposal
from optimizer.gepa.strategies import GepaParts, strategies_for
from optimizer.gepa.strategies.acceptance import AcceptanceCriterion
from optimizer.gepa.strategies.candidate_selector import CandidateSelector
from optimizer.gepa.strategies.component_selector import ComponentSelector
from optimizer.gepa.strategies.merge import MergeStrategy
from optimizer.gepa.strategies.stop_condition import StopCondition
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import SearchStart
from schemas import Event, RunConfig

__all__ = ["GepaMethod"]


class GepaMethod:
    """Reflective mutations and merges over the Pareto frontier (:class:`GepaSearch`)."""

    def __init__(
        self,
        *,
        candidate_selector: CandidateSelector | None = None,
        component_selector: ComponentSelector | None = None,
        acceptance: AcceptanceCriterion | None = None,
        merge: MergeStrategy | None = None,
        stop_conditions: Sequence[StopCondition] = (),
        parts: GepaParts | None = None,
    ) -> None:
        given = parts or GepaParts()
        self.parts = replace(
            given,
            candidate_selector=candidate_selector or given.candidate_selector,
            component_selector=component_selector or given.component_selector,
            acceptance=acceptance or given.acceptance,
            merge=merge or given.merge,
            stop_conditions=(*given.stop_conditions, *stop_conditions),
        )

    def prepare(self, config: RunConfig) -> None:
        """Nothing to check: GEPA needs only the core dependencies."""

    def starts_on_first_round(
        self, config: RunConfig, first_round: Mapping[str, SeedResult]
    ) -> bool:
        """When the round shows a kind of failure for every proposal in flight: they split the
        kinds, so each is shown one of its own; no child is judged before the rest is in
        (``GepaSearch``). With fewer, some would be shown the same failures and write the
        same fix."""
        kinds = {
            failure_kind(r.seed, r.record.feedback or "")
            for r in first_round.values()
            if r.reward is not None and r.reward < 1.0
        }
        return len(kinds) >= (config.proposals_in_flight or 1)

    def build(self, deps: SearchDeps, start: SearchStart) -> GepaSearch:
        """The search; it starts from the frontier the baseline's train scores made."""
        return GepaSearch(deps, strategies_for(deps, self.parts), start.scoring)

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

    def decisions(self, events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
        """How each candidate was made, gated, stacked, rebased and judged on train
        (:mod:`optimizer.gepa.decisions`)."""
        return gepa_decisions(events)
