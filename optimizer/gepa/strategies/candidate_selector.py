"""Candidate selector: which candidate the next reflective mutation starts from (its parent).

GEPA samples the parent from the per-seed Pareto frontier; gepa-ai offers the same choice
of rules (its ``candidate_selection_strategy``), and so does ``--candidate-selection``:

- ``pareto`` (the default): a frontier member, drawn with weight = train seeds it wins;
- ``current_best``: the candidate with the best train mean, always;
- ``epsilon_greedy``: the best, or with probability ``epsilon`` any fully evaluated candidate;
- ``top_k_pareto``: ``pareto`` among the ``k`` candidates with the best train means.

A selector sees a :class:`SelectionView` and the run's ``random.Random``; any object with a
``select(view, rng) -> candidate_id`` method is a selector (the Python API takes one).

A person's choices come first (:func:`select_parent`): a candidate they pinned is the parent
until they unpin it, whatever the rule; one they rejected is off the frontier and the ranking
the view holds, and a selector of your own that still names it gets the best instead.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from optimizer.gepa.parents import sample_parent
from optimizer.runtime.search.frontier import Frontier

__all__ = [
    "CANDIDATE_SELECTORS",
    "CandidateSelector",
    "CurrentBestCandidateSelector",
    "EpsilonGreedyCandidateSelector",
    "ParetoCandidateSelector",
    "SelectionView",
    "TopKParetoCandidateSelector",
    "select_parent",
]


@dataclass(frozen=True)
class SelectionView:
    """What a candidate selector may read when it chooses a parent.

    ``ranked`` lists the candidates scored on every train seed, best train mean first (a
    candidate held back from the ranking, such as an unproven deletion, comes last).
    ``exhausted`` holds the candidates each of whose kinds of failure a proposal on them was
    already shown this round (another proposal would mostly write the same edit again);
    ``unasked``, the frontier members no proposal was shown a failure of yet this round;
    ``repeats``, per candidate, the proposals on it that only repeated a known text.
    ``pinned`` is the candidate a person pinned (the parent until unpinned); ``rejected``,
    those a person rejected (already off ``frontier`` and ``ranked``).
    """

    frontier: Frontier
    ranked: tuple[tuple[str, float], ...]
    exhausted: frozenset[str] = frozenset()
    unasked: frozenset[str] = frozenset()
    repeats: Mapping[str, int] = field(default_factory=dict)
    pinned: str | None = None
    rejected: frozenset[str] = frozenset()

    @property
    def best(self) -> str | None:
        """The candidate with the best train mean, if any was scored."""
        return self.ranked[0][0] if self.ranked else None


@runtime_checkable
class CandidateSelector(Protocol):
    """Chooses the parent of the next reflective mutation."""

    def select(self, view: SelectionView, rng: random.Random) -> str:
        """The id of the parent; draw any randomness from ``rng`` (the run's, seeded)."""
        ...


def select_parent(selector: CandidateSelector, view: SelectionView, rng: random.Random) -> str:
    """The parent of the next mutation: the pinned candidate, else the selector's choice
    (the best when that choice is a rejected candidate)."""
    if view.pinned is not None and view.pinned not in view.rejected:
        return view.pinned
    chosen = selector.select(view, rng)
    if chosen in view.rejected and view.best is not None:
        return view.best
    return chosen


class ParetoCandidateSelector:
    """A frontier member, drawn with weight = the solved train seeds it wins (GEPA's rule).

    A candidate that alone solves a few rare seeds keeps a chance. Each proposal on a
    candidate that only repeated a known text halves its weight, and ``exhausted`` members
    are drawn only when no other has weight (:func:`optimizer.gepa.parents.sample_parent`).
    A best candidate no proposal was shown a failure of yet this round is chosen before the
    drawn one; the draw is made all the same, so that the ``rng``, and every later choice,
    are those of a run where the best was drawn.
    """

    def select(self, view: SelectionView, rng: random.Random) -> str:
        """See the class docstring."""
        drawn = sample_parent(view.frontier, rng, view.repeats, exhausted=view.exhausted)
        best = view.best
        members = view.frontier.wins()
        if best in members and best not in view.exhausted and best in view.unasked:
            return best
        return drawn


class CurrentBestCandidateSelector:
    """The candidate with the best train mean, always (greedy hill climbing)."""

    def select(self, view: SelectionView, rng: random.Random) -> str:
        """See the class docstring."""
        if view.best is None:
            raise ValueError("no candidate was scored on train: evaluate the baseline first")
        return view.best


class EpsilonGreedyCandidateSelector:
    """The best train mean, or with probability ``epsilon`` a fully evaluated candidate
    drawn uniformly (one not ``exhausted``, while there is one)."""

    def __init__(self, epsilon: float = 0.1) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be within [0, 1], got {epsilon}")
        self.epsilon = epsilon

    def select(self, view: SelectionView, rng: random.Random) -> str:
        """See the class docstring."""
        if view.best is None:
            raise ValueError("no candidate was scored on train: evaluate the baseline first")
        if rng.random() >= self.epsilon:
            return view.best
        ids = [cid for cid, _ in view.ranked]
        fresh = [cid for cid in ids if cid not in view.exhausted]
        return rng.choice(fresh or ids)


class TopKParetoCandidateSelector:
    """``pareto`` among the ``k`` fully evaluated candidates with the best train means.

    Members outside the top ``k`` lose their seeds; when none of the top ``k`` is on the
    frontier, the best is chosen.
    """

    def __init__(self, k: int = 5) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k = k

    def select(self, view: SelectionView, rng: random.Random) -> str:
        """See the class docstring."""
        if view.best is None:
            raise ValueError("no candidate was scored on train: evaluate the baseline first")
        top = {cid for cid, _ in view.ranked[: self.k]}
        winners = {
            seed: tuple(cid for cid in ids if cid in top)
            for seed, ids in view.frontier.winners.items()
        }
        if not any(winners.values()):
            return view.best
        frontier = Frontier(winners=winners, best=view.frontier.best, floor=view.frontier.floor)
        narrowed = SelectionView(
            frontier=frontier,
            ranked=tuple(p for p in view.ranked if p[0] in top),
            exhausted=view.exhausted,
            unasked=view.unasked,
            repeats=view.repeats,
            pinned=view.pinned,
            rejected=view.rejected,
        )
        return ParetoCandidateSelector().select(narrowed, rng)


# The selectors ``--candidate-selection`` names, with ``RunConfig``'s parameters.
CANDIDATE_SELECTORS = (
    "pareto",
    "current_best",
    "epsilon_greedy",
    "top_k_pareto",
)
