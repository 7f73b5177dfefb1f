"""GEPA's parts, each a Protocol with a default, chosen by name or given as your own object.

=====================  ==========================  =============================================
part                   module                      built in (default first)
=====================  ==========================  =============================================
candidate selector     ``candidate_selector``      pareto, current_best, epsilon_greedy,
                                                   top_k_pareto
batch sampler          ``batch_sampler``           failures_first, epoch_shuffled
component selector     ``component_selector``      round_robin, all
acceptance criterion   ``acceptance``              strict_improvement, improvement_or_equal
proposal strategy      ``proposal``                sequential (1 in flight), in flight (K > 1)
merge strategy         ``merge``                   complementary, none
stop conditions        ``stop_condition``          composed: budget, full marks, patience, idle,
                                                   converged, nothing to fix, a person's stop;
                                                   timeout,
                                                   no improvement, score threshold, stop file,
                                                   signal
=====================  ==========================  =============================================

:func:`strategies_for` builds the set a run uses from its ``RunConfig`` (the names the CLI,
the config and the REST API choose) and the objects the Python API was given
(:class:`GepaParts`), which win over the names.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimizer.gepa.strategies.acceptance import (
    ACCEPTANCE_CRITERIA,
    AcceptanceCriterion,
    ImprovementOrEqualAcceptance,
    StrictImprovementAcceptance,
)
from optimizer.gepa.strategies.batch_sampler import (
    BATCH_SAMPLERS,
    BatchSampler,
    EpochShuffledBatchSampler,
    FailuresFirstBatchSampler,
)
from optimizer.gepa.strategies.candidate_selector import (
    CANDIDATE_SELECTORS,
    CandidateSelector,
    CurrentBestCandidateSelector,
    EpsilonGreedyCandidateSelector,
    ParetoCandidateSelector,
    SelectionView,
    TopKParetoCandidateSelector,
)
from optimizer.gepa.strategies.component_selector import (
    COMPONENT_SELECTORS,
    AllComponentSelector,
    ComponentSelector,
    RoundRobinComponentSelector,
)
from optimizer.gepa.strategies.merge import (
    MERGE_STRATEGIES,
    ComplementaryMerge,
    MergeStrategy,
    NoMerge,
)
from optimizer.gepa.strategies.proposal import ProposalStrategy, proposal_strategy
from optimizer.gepa.strategies.stop_condition import (
    CompositeStopper,
    Converged,
    FullMarks,
    IdleIterations,
    MetricCallBudget,
    NoImprovement,
    NothingToFix,
    Patience,
    ScoreThreshold,
    SignalStopper,
    StopCondition,
    StopFile,
    StoppedByPerson,
    Timeout,
)
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.minibatch import MinibatchSampler
from schemas import RunConfig

__all__ = [
    "ACCEPTANCE_CRITERIA",
    "BATCH_SAMPLERS",
    "CANDIDATE_SELECTORS",
    "COMPONENT_SELECTORS",
    "MERGE_STRATEGIES",
    "GepaParts",
    "GepaStrategies",
    "SelectionView",
    "strategies_for",
]

# A batch sampler is built for a run's train seeds: the Python API takes a factory.
BatchSamplerFactory = Callable[[SearchDeps], BatchSampler]


@dataclass(frozen=True)
class GepaParts:
    """Your own parts for a GEPA run (the Python API); each replaces the one the config names.

    ``stop_conditions`` are added to the built-in ones (the first reason stops the search).
    """

    candidate_selector: CandidateSelector | None = None
    batch_sampler: BatchSamplerFactory | None = None
    component_selector: ComponentSelector | None = None
    acceptance: AcceptanceCriterion | None = None
    merge: MergeStrategy | None = None
    stop_conditions: Sequence[StopCondition] = field(default_factory=tuple)


@dataclass(frozen=True)
class GepaStrategies:
    """The parts one GEPA search runs with."""

    candidate_selector: CandidateSelector
    batch_sampler: BatchSampler
    component_selector: ComponentSelector
    acceptance: AcceptanceCriterion
    proposal: ProposalStrategy
    merge: MergeStrategy
    stop: StopCondition

    def names(self) -> dict[str, Any]:
        """Each part's class name (what the events and the evidence record)."""
        stop = self.stop.conditions if isinstance(self.stop, CompositeStopper) else (self.stop,)
        return {
            "candidate_selector": type(self.candidate_selector).__name__,
            "batch_sampler": type(self.batch_sampler).__name__,
            "component_selector": type(self.component_selector).__name__,
            "acceptance": type(self.acceptance).__name__,
            "proposal": type(self.proposal).__name__,
            "proposals_in_flight": self.proposal.in_flight,
            "merge": type(self.merge).__name__,
            "stop_conditions": [type(c).__name__ for c in stop],
        }


def candidate_selector_named(config: RunConfig) -> CandidateSelector:
    """The selector ``config.candidate_selection`` names, with its parameters."""
    name = config.candidate_selection
    if name == "current_best":
        return CurrentBestCandidateSelector()
    if name == "epsilon_greedy":
        return EpsilonGreedyCandidateSelector(config.candidate_selection_epsilon)
    if name == "top_k_pareto":
        return TopKParetoCandidateSelector(config.candidate_selection_top_k)
    return ParetoCandidateSelector()


def stop_conditions_of(config: RunConfig, extra: Sequence[StopCondition] = ()) -> CompositeStopper:
    """The built-in conditions, those the config chooses, then ``extra``."""
    conditions: list[StopCondition] = [
        MetricCallBudget(),
        FullMarks(),
        Patience(config.patience),
        IdleIterations(config.max_idle_iterations),
        Converged(),
        NothingToFix(),
        StoppedByPerson(),
    ]
    if config.search_timeout_s is not None:
        conditions.append(Timeout(config.search_timeout_s))
    if config.stop_after_no_improvement is not None:
        conditions.append(NoImprovement(config.stop_after_no_improvement))
    if config.score_threshold is not None:
        conditions.append(ScoreThreshold(config.score_threshold))
    if config.stop_file is not None:
        conditions.append(StopFile(config.stop_file))
    if config.stop_signal is not None:
        conditions.append(SignalStopper(getattr(signal, config.stop_signal)))
    return CompositeStopper(*conditions, *extra)


def strategies_for(deps: SearchDeps, parts: GepaParts | None = None) -> GepaStrategies:
    """The parts a search over ``deps`` runs with: ``parts`` first, else the config's names."""
    parts = parts or GepaParts()
    config, state = deps.config, deps.state
    if parts.batch_sampler is not None:
        sampler = parts.batch_sampler(deps)
    else:
        rotation = MinibatchSampler(
            state.train_seeds, config.minibatch_size, deps.rng, skip=state.set_aside
        )
        kind = (
            EpochShuffledBatchSampler
            if config.batch_sampling == "epoch_shuffled"
            else FailuresFirstBatchSampler
        )
        sampler = kind(rotation)
    default_merge: MergeStrategy = (
        ComplementaryMerge(config.max_merges) if config.use_merge else NoMerge()
    )
    return GepaStrategies(
        candidate_selector=parts.candidate_selector or candidate_selector_named(config),
        batch_sampler=sampler,
        component_selector=parts.component_selector
        or (
            AllComponentSelector()
            if config.component_selection == "all"
            else RoundRobinComponentSelector()
        ),
        acceptance=parts.acceptance
        or (
            ImprovementOrEqualAcceptance()
            if config.acceptance == "improvement_or_equal"
            else StrictImprovementAcceptance()
        ),
        proposal=proposal_strategy(config.proposals_in_flight or 1),
        merge=parts.merge or default_merge,
        stop=stop_conditions_of(config, parts.stop_conditions),
    )
