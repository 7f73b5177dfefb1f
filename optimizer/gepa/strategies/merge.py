"""Merge strategy: when to merge, and which two frontier candidates (GEPA's merge).

A merge keeps what two candidates do well in one: a clean three-way text merge on their
common ancestor when there is one (no reflection call), else the proposer is shown both on
the seeds where they differ (``optimizer.gepa.merging``). The strategy only chooses:

- ``complementary`` (the default): after a child was accepted on train since the last merge,
  a pair of frontier candidates each winning a solved seed the other does not, neither
  descending from the other (such a merge can only re-add what the descendant deleted),
  drawn uniformly; at most ``max_merges`` in a run;
- ``none``: never (``--use-merge false``).

Any object with a ``pair(view, rng)`` method is a merge strategy. A candidate a person
rejected is never merged: it is off the view's frontier, and the search drops a pair of your
own strategy that names it (``MergeView.allows``); while a person has a candidate pinned,
no merge is asked for (the next proposals start from the pinned candidate).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from optimizer.gepa.parents import complementary_pairs
from optimizer.runtime.search.frontier import Frontier

__all__ = [
    "MERGE_STRATEGIES",
    "ComplementaryMerge",
    "MergeStrategy",
    "MergeView",
    "NoMerge",
]


@dataclass(frozen=True)
class MergeView:
    """What a merge strategy may read: the frontier, the lineage (candidate -> parents),
    whether a child was accepted on train since the last merge, merges made so far, and the
    candidates a person rejected (already off the frontier)."""

    frontier: Frontier
    lineage: Mapping[str, Sequence[str]]
    accepted_since_last: bool
    merges_so_far: int
    rejected: frozenset[str] = frozenset()

    def allows(self, pair: tuple[str, str] | None) -> bool:
        """Whether ``pair`` may be merged: neither candidate was rejected by a person."""
        return pair is not None and not set(pair) & self.rejected


@runtime_checkable
class MergeStrategy(Protocol):
    """Chooses the two candidates to merge now, if any."""

    def pair(self, view: MergeView, rng: random.Random) -> tuple[str, str] | None:
        """Two candidate ids to merge, or ``None`` for no merge now."""
        ...


class ComplementaryMerge:
    """See the module docstring."""

    def __init__(self, max_merges: int = 5) -> None:
        self.max_merges = max_merges

    def pair(self, view: MergeView, rng: random.Random) -> tuple[str, str] | None:
        """A complementary pair of branches, drawn uniformly, once per accepted child."""
        pairs = complementary_pairs(view.frontier, view.lineage)
        if not (view.accepted_since_last and view.merges_so_far < self.max_merges and pairs):
            return None
        return pairs[rng.randrange(len(pairs))]


class NoMerge:
    """Never merges."""

    def pair(self, view: MergeView, rng: random.Random) -> tuple[str, str] | None:
        """Always ``None``."""
        return None


MERGE_STRATEGIES = ("complementary", "none")
