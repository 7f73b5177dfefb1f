"""GEPA's parents: sampling from the Pareto frontier and pairing frontier candidates to merge.

Pure functions over a :class:`~optimizer.runtime.search.frontier.Frontier` and the lineage.
Parents are sampled with weight = number of seeds won (seeds somebody solved: a seed every
candidate fails is nobody's), so a candidate that alone solves rare seeds keeps a chance;
merges pair candidates from different branches only.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from optimizer.runtime.search.frontier import Frontier

__all__ = ["ancestors", "common_ancestor", "complementary_pairs", "sample_parent"]


def sample_parent(
    frontier: Frontier,
    rng: random.Random,
    repeats: Mapping[str, int] | None = None,
    exhausted: Collection[str] = (),
) -> str:
    """Pick a parent with probability proportional to the seeds it wins.

    ``repeats`` counts, per candidate, the proposals written on it that only repeated a
    known text: each halves its weight. A parent whose failures its children already
    address keeps drawing the same edit from the reflection model (a frontier member that
    wins a few seeds by noise, say); the next reflection call is better spent elsewhere.

    ``exhausted`` candidates (every failure of theirs was shown to a proposal on them
    already) are drawn only when no other candidate has weight.
    """
    # Seeds nobody solved are ties at the lowest score: they say nothing about which parent
    # to build on, and counting them would make the draw nearly uniform early in a run.
    wins = frontier.wins(solved=True) or frontier.wins()
    if not wins:
        raise ValueError("the frontier is empty: evaluate the baseline first")
    ids, seen = list(wins), repeats or {}
    weights = [len(wins[cid]) / 2 ** seen.get(cid, 0) for cid in ids]
    fresh = [0.0 if cid in exhausted else w for cid, w in zip(ids, weights, strict=True)]
    if any(fresh):
        weights = fresh
    return rng.choices(ids, weights=weights, k=1)[0]


def ancestors(parents: Mapping[str, Sequence[str]], candidate_id: str) -> frozenset[str]:
    """Every candidate ``candidate_id`` descends from (``parents`` maps id -> parent ids)."""
    seen: set[str] = set()
    todo = list(parents.get(candidate_id, ()))
    while todo:
        cid = todo.pop()
        if cid not in seen:
            seen.add(cid)
            todo.extend(parents.get(cid, ()))
    return frozenset(seen)


def common_ancestor(
    parents: Mapping[str, Sequence[str]], a: str, b: str, order: Sequence[str]
) -> str | None:
    """The most recent candidate (in creation ``order``) that both ``a`` and ``b`` descend from."""
    shared = (ancestors(parents, a) | {a}) & (ancestors(parents, b) | {b})
    ranked = [cid for cid in order if cid in shared]
    return ranked[-1] if ranked else None


def complementary_pairs(
    frontier: Frontier, parents: Mapping[str, Sequence[str]] | None = None
) -> list[tuple[str, str]]:
    """Pairs of frontier candidates where each wins a seed the other does not.

    With ``parents`` (the lineage), a candidate is never paired with one it descends from:
    such a merge can only re-add what the descendant dropped, and mostly ties.
    """
    solved = frontier.wins(solved=True) or frontier.wins()
    wins = {cid: set(seeds) for cid, seeds in solved.items()}
    ids = list(wins)
    lineage = {cid: ancestors(parents, cid) for cid in ids} if parents is not None else {}
    return [
        (a, b)
        for i, a in enumerate(ids)
        for b in ids[i + 1 :]
        if wins[a] - wins[b]
        and wins[b] - wins[a]
        and a not in lineage.get(b, ())
        and b not in lineage.get(a, ())
    ]
