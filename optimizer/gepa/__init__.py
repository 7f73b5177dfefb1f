"""GEPA: reflective mutations and merges of prompts, gated on minibatches, kept on a frontier.

:class:`GepaMethod` plugs it into the runtime; :mod:`optimizer.gepa.strategies` holds its
named parts (candidate selector, batch sampler, component selector, acceptance criterion,
proposal strategy, merge strategy, stop conditions), each a Protocol you may implement.
"""

from __future__ import annotations

from optimizer.gepa.merge3 import merge3, merge_components
from optimizer.gepa.method import GepaMethod
from optimizer.gepa.parents import ancestors, common_ancestor, complementary_pairs, sample_parent
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.strategies import GepaParts, GepaStrategies, SelectionView, strategies_for
from optimizer.gepa.strategies.acceptance import (
    AcceptanceCriterion,
    ImprovementOrEqualAcceptance,
    StrictImprovementAcceptance,
)
from optimizer.gepa.strategies.batch_sampler import (
    BatchSampler,
    EpochShuffledBatchSampler,
    FailuresFirstBatchSampler,
)
from optimizer.gepa.strategies.candidate_selector import (
    CandidateSelector,
    CurrentBestCandidateSelector,
    EpsilonGreedyCandidateSelector,
    ParetoCandidateSelector,
    TopKParetoCandidateSelector,
)
from optimizer.gepa.strategies.component_selector import (
    AllComponentSelector,
    ComponentSelector,
    RoundRobinComponentSelector,
)
from optimizer.gepa.strategies.merge import ComplementaryMerge, MergeStrategy, NoMerge
from optimizer.gepa.strategies.proposal import (
    ProposalsInFlight,
    ProposalStrategy,
    SequentialProposals,
)
from optimizer.gepa.strategies.stop_condition import (
    CompositeStopper,
    NoImprovement,
    ScoreThreshold,
    SearchProgress,
    SignalStopper,
    StopCondition,
    StopFile,
    Timeout,
)

__all__ = [
    "AcceptanceCriterion",
    "AllComponentSelector",
    "BatchSampler",
    "CandidateSelector",
    "ComplementaryMerge",
    "ComponentSelector",
    "CompositeStopper",
    "CurrentBestCandidateSelector",
    "EpochShuffledBatchSampler",
    "EpsilonGreedyCandidateSelector",
    "FailuresFirstBatchSampler",
    "GepaMethod",
    "GepaParts",
    "GepaSearch",
    "GepaStrategies",
    "ImprovementOrEqualAcceptance",
    "MergeStrategy",
    "NoImprovement",
    "NoMerge",
    "ParetoCandidateSelector",
    "ProposalStrategy",
    "ProposalsInFlight",
    "RoundRobinComponentSelector",
    "ScoreThreshold",
    "SearchProgress",
    "SelectionView",
    "SequentialProposals",
    "SignalStopper",
    "StopCondition",
    "StopFile",
    "StrictImprovementAcceptance",
    "Timeout",
    "TopKParetoCandidateSelector",
    "ancestors",
    "common_ancestor",
    "complementary_pairs",
    "merge3",
    "merge_components",
    "sample_parent",
    "strategies_for",
]
