"""In-memory state of one search: candidates, their scores per split, the frontier.

Scores are derived from rollouts (which live in the workspace) and can always be rebuilt
from the cache; this object only keeps them at hand. Mutated by one event loop; the search
serialises its read-modify-write steps with its own lock.

A seed set aside (:mod:`optimizer.runtime.rollouts.seed_failures`) leaves ``train_seeds`` and every
score table, so no mean, frontier or comparison counts it; ``kept`` filters other splits.

A candidate a person rejected (``rejected``, :mod:`optimizer.runtime.steering`) keeps its
scores but leaves the frontier and the ranking: whatever the method, it is never a parent,
never merged, never the best and never promoted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimizer.runtime.rollouts.seed_failures import SetAside
from optimizer.runtime.search.frontier import Frontier, build_frontier, mean_score
from optimizer.runtime.search.objectives import ObjectiveTable
from schemas import CandidateRecord, SelectRule

__all__ = ["SearchState"]


@dataclass
class SearchState:
    """Candidates in creation order and their rewards per split (``None``: errored)."""

    train_seeds: tuple[str, ...]
    floor: float = 0.0  # the program's lowest reward: a seed nobody beat it on is unsolved
    ceiling: float = 1.0  # the program's highest reward
    candidates: dict[str, CandidateRecord] = field(default_factory=dict)
    train: dict[str, dict[str, float]] = field(default_factory=dict)  # fully evaluated only
    minibatch: dict[str, dict[str, float]] = field(default_factory=dict)
    holdout: dict[str, dict[str, float]] = field(default_factory=dict)
    val: dict[str, dict[str, float]] = field(default_factory=dict)
    # Scored on part of train only: the budget's last evaluation (see ``score_on_train``).
    partial: dict[str, dict[str, float]] = field(default_factory=dict)
    # Candidates a search may still score on train (they count toward the holdout reserve).
    contenders: set[str] = field(default_factory=set)
    frontier: Frontier = field(default_factory=lambda: Frontier(winners={}, best={}))
    best_history: list[tuple[float, str, float]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # a method's own state, checkpointed
    set_aside: dict[str, SetAside] = field(default_factory=dict)  # seeds no longer asked
    # Candidates a method says are no evidence on their mean (GEPA's unproven deletions):
    # ranked after every other, so never the best while another is scored.
    held_back: set[str] = field(default_factory=set)
    # Candidates a person rejected, and why: off the frontier and out of the ranking.
    rejected: dict[str, str] = field(default_factory=dict)
    # Each candidate's objectives (cost, latency, prompt tokens, the container's) per seed.
    objectives: ObjectiveTable = field(default_factory=ObjectiveTable)
    # What the winner is chosen by (--select): promotion reads it, and so may the search.
    rule: SelectRule = field(default_factory=SelectRule)

    def add(self, record: CandidateRecord) -> None:
        """Register a candidate (idempotent)."""
        self.candidates.setdefault(record.candidate_id, record)

    def order(self) -> list[str]:
        """Candidate ids in creation order."""
        return list(self.candidates)

    def set_train(self, candidate_id: str, scores: Mapping[str, float | None]) -> Frontier:
        """Record a full train evaluation and rebuild the frontier."""
        self.train[candidate_id] = {
            s: v for s, v in scores.items() if v is not None and s not in self.set_aside
        }
        return self._rebuild()

    def set_seed_aside(self, note: SetAside) -> Frontier:
        """Take a seed out of the train seeds and of every score table; rebuild the frontier."""
        self.set_aside[note.seed] = note
        self.train_seeds = tuple(s for s in self.train_seeds if s != note.seed)
        for table in (self.train, self.partial, self.minibatch, self.holdout, self.val):
            for scores in table.values():
                scores.pop(note.seed, None)
        self.objectives.drop_seed(note.seed)
        return self._rebuild()

    def reject(self, candidate_id: str, reason: str) -> Frontier:
        """A person rejected the candidate: off the frontier and the ranking from now on."""
        self.rejected[candidate_id] = reason
        return self._rebuild()

    def kept(self, seeds: Sequence[str]) -> list[str]:
        """``seeds`` without those set aside."""
        return [s for s in seeds if s not in self.set_aside]

    def _rebuild(self) -> Frontier:
        scores = {cid: s for cid, s in self.train.items() if cid not in self.rejected}
        self.frontier = build_frontier(scores, self.train_seeds, self.order(), floor=self.floor)
        return self.frontier

    def train_mean(self, candidate_id: str) -> float | None:
        """Mean train reward over seeds that scored."""
        scores = self.train.get(candidate_id)
        return mean_score(scores, self.train_seeds) if scores is not None else None

    def train_best(self, candidate_id: str) -> float | None:
        """Its highest reward on one train seed: next to the mean, how good it can get."""
        scores = self.train.get(candidate_id)
        return max(scores.values()) if scores else None

    def best(self) -> tuple[str, float] | None:
        """The candidate with the best train mean so far (earliest wins ties)."""
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def ranked(self, among: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """Fully evaluated candidates by train mean, best first; ties keep creation order.

        A candidate ``held_back`` comes after every other; a ``rejected`` one is left out."""
        ids = among if among is not None else self.order()
        pairs = [
            (cid, self.train_mean(cid))
            for cid in ids
            if cid in self.train and cid not in self.rejected
        ]
        scored = [(cid, m) for cid, m in pairs if m is not None]
        rank = {cid: i for i, cid in enumerate(self.order())}
        return sorted(scored, key=lambda p: (p[0] in self.held_back, -p[1], rank[p[0]]))
