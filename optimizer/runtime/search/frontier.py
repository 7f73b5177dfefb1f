"""The per-seed Pareto frontier, as pure functions over a score table.

A score table maps ``candidate_id -> {seed: reward}`` for candidates evaluated on the
full train split. For each train seed the frontier holds the candidates with the best score
on it; a candidate survives while it is best on at least one seed and no other candidate
dominates it (at least as good on every seed, better on one). Both searches keep one;
heldout selection and the evidence read it. How GEPA samples parents from it is
:mod:`optimizer.gepa.parents`.

A seed where the best score is the program's lowest reward (``floor``: every candidate
scored 0 on a [0, 1] reward) is *unsolved*: its Pareto winners are ties at nothing. They stay
in ``winners`` (the Pareto bookkeeping: a baseline that solves nothing is still a frontier
member a search can start from), but no unsolved seed counts as a win where wins are shown
or counted: ``coverage``, ``covered``, ``solved_winners`` and ``wins(solved=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Frontier",
    "build_frontier",
    "dominates",
    "frontier_view",
    "mean_score",
]

Scores = Mapping[str, Mapping[str, float]]
EPS = 1e-9


@dataclass(frozen=True)
class Frontier:
    """Winners per seed (after dropping dominated candidates) and the best score per seed.

    ``floor`` is the lowest reward of the program: a seed whose best score is no higher is
    unsolved.
    """

    winners: Mapping[str, tuple[str, ...]]
    best: Mapping[str, float]
    floor: float = 0.0

    def solved(self) -> tuple[str, ...]:
        """The seeds some candidate solved (scored above the floor), in seed order."""
        return tuple(s for s in self.winners if self.best.get(s, self.floor) > self.floor + EPS)

    def covered(self) -> tuple[int, int]:
        """``(seeds some candidate solved, seeds)``: the run page's "49/56 covered"."""
        return len(self.solved()), len(self.winners)

    def solved_winners(self) -> dict[str, tuple[str, ...]]:
        """``winners`` with the unsolved seeds won by nobody: what the grid and events show."""
        solved = set(self.solved())
        return {seed: ids if seed in solved else () for seed, ids in self.winners.items()}

    def wins(self, *, solved: bool = False) -> dict[str, tuple[str, ...]]:
        """``candidate_id -> seeds it wins``, in seed order, for candidates on the frontier;
        with ``solved``, only seeds some candidate solved (a candidate winning none is left out).
        """
        winners = self.solved_winners() if solved else self.winners
        out: dict[str, list[str]] = {}
        for seed, ids in winners.items():
            for cid in ids:
                out.setdefault(cid, []).append(seed)
        return {cid: tuple(seeds) for cid, seeds in out.items()}

    def members(self) -> tuple[str, ...]:
        """Candidates on the frontier (Pareto ties included), in first-seen seed order."""
        return tuple(self.wins())

    def coverage(self) -> dict[str, float]:
        """``candidate_id -> solved seeds it wins / seeds``; an unsolved seed is nobody's."""
        total = len(self.winners) or 1
        return {cid: len(seeds) / total for cid, seeds in self.wins(solved=True).items()}


def frontier_view(frontier: Frontier) -> dict[str, Any]:
    """The frontier as events and the evidence show it: an unsolved seed is won by nobody."""
    covered, seeds = frontier.covered()
    return {
        "winners": {seed: list(ids) for seed, ids in frontier.solved_winners().items()},
        "coverage": frontier.coverage(),
        "covered": covered,
        "seeds": seeds,
    }


def mean_score(scores: Mapping[str, float], seeds: Sequence[str] | None = None) -> float | None:
    """Mean reward over ``seeds`` that have a score (errors are absent); None when none do."""
    values = [scores[s] for s in (seeds if seeds is not None else scores) if s in scores]
    return sum(values) / len(values) if values else None


def dominates(a: Mapping[str, float], b: Mapping[str, float], seeds: Sequence[str]) -> bool:
    """True when ``a`` is at least as good as ``b`` on every seed and better on one.

    A missing score (an errored rollout) counts as unknown: it cannot be used to dominate.
    """
    better = False
    for seed in seeds:
        if seed not in a or seed not in b:
            if seed in b:
                return False
            continue
        if a[seed] < b[seed] - EPS:
            return False
        if a[seed] > b[seed] + EPS:
            better = True
    return better


def build_frontier(
    scores: Scores, seeds: Sequence[str], order: Sequence[str], *, floor: float = 0.0
) -> Frontier:
    """The frontier of ``scores`` over ``seeds``; ``order`` (creation order) breaks ties stably;
    ``floor`` is the lowest reward (a seed no candidate scored above it is unsolved)."""
    rank = {cid: i for i, cid in enumerate(order)}
    ids = sorted((cid for cid in scores if cid in rank), key=rank.__getitem__)
    winners: dict[str, list[str]] = {}
    best: dict[str, float] = {}
    for seed in seeds:
        scored = [(scores[cid][seed], cid) for cid in ids if seed in scores[cid]]
        if not scored:
            winners[seed] = []
            continue
        top = max(value for value, _ in scored)
        best[seed] = top
        winners[seed] = [cid for value, cid in scored if value >= top - EPS]
    members = {cid for ws in winners.values() for cid in ws}
    dominated = {
        cid
        for cid in members
        if any(dominates(scores[other], scores[cid], seeds) for other in members if other != cid)
    }
    kept = {
        seed: tuple(cid for cid in ws if cid not in dominated) or tuple(ws)
        for seed, ws in winners.items()
    }
    return Frontier(winners=kept, best=best, floor=floor)
