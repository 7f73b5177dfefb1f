"""Lateral follow-ups: a child that ties its parent by trading seeds is built on next.

Fixes interact: a new rule can win its own seeds and take over others' (two look-alike
cases). Such a *lateral* child (its train mean equals its parent's, it wins other seeds) is
kept on the frontier for the seeds it wins, but only a next edit on it (one that tells the
cases apart) pays off, and the candidate selector rarely draws a member that wins few seeds.
So the next free proposals are written on it, shown the seeds it broke first, before the
candidate selector is asked again.
"""

from __future__ import annotations

from optimizer.gepa.context import SearchContext
from optimizer.gepa.parents import ancestors

__all__ = ["LateralFollowUps"]


class LateralFollowUps:
    """The lateral children queued to be built on, and the proposals each still gets."""

    def __init__(self, ctx: SearchContext) -> None:
        self._ctx = ctx
        # Lateral child -> (the seeds it broke, proposals still to be written on it).
        self._queue: dict[str, tuple[list[str], int]] = {}
        self._offered: set[str] = set()  # children ever queued: their turns are given once

    def offer(self, candidate_id: str, parent_id: str) -> bool:
        """Queue a fully scored child when it is lateral to ``parent_id``: it broke seeds its
        parent passed and ties its train mean (one worse on the mean lost more than it won:
        an answer that deleted a rule, or a gate passed on a noisy minibatch). Whether it is
        lateral."""
        s = self._ctx.deps.state
        child, parent = s.train.get(candidate_id, {}), s.train.get(parent_id, {})
        broken = [x for x in s.train_seeds if x in child and child[x] < parent.get(x, 0.0)]
        mean, parent_mean = s.train_mean(candidate_id), s.train_mean(parent_id)
        tie = mean is not None and parent_mean is not None and abs(mean - parent_mean) < 1e-9
        if not (broken and tie and candidate_id in s.frontier.members()):
            return False
        if candidate_id not in self._offered:  # a second proposal wrote the same text: once
            # Every proposal free meanwhile builds on it, each shown its share of what it broke.
            self._offered.add(candidate_id)
            self._queue[candidate_id] = (broken, self._ctx.in_flight)
        return True

    def next(self) -> tuple[str, list[str]] | None:
        """A lateral child to build on next and the seeds it broke, if one is queued.

        A child one of whose descendants now scores above it on train (a stack or merge of
        its edit with others) has been built on: the turns left on it are dropped, and the
        proposals go where the search stands now. So are those of a child a person rejected.
        """
        rejected = self._ctx.deps.state.rejected
        for stale in [c for c in self._queue if c in rejected or self._is_superseded(c)]:
            del self._queue[stale]
        if not self._queue:
            return None
        parent_id = next(iter(self._queue))
        broken, left = self._queue.pop(parent_id)
        if left > 1:  # proposals still to be written on it
            self._queue[parent_id] = (broken, left - 1)
        return parent_id, broken

    def give_back(self, candidate_id: str, broken: list[str]) -> None:
        """A turn taken by a proposal that only waited: it is the next free proposal's."""
        _, left = self._queue.get(candidate_id, (broken, 0))
        self._queue[candidate_id] = (broken, left + 1)

    def _is_superseded(self, candidate_id: str) -> bool:
        """Whether a candidate descending from ``candidate_id`` scores above it on train."""
        s = self._ctx.deps.state
        mean = s.train_mean(candidate_id)
        if mean is None:
            return False
        above = [cid for cid in s.train if (s.train_mean(cid) or 0.0) > mean + 1e-9]
        lineage = self._ctx.lineage() if above else {}
        return any(candidate_id in ancestors(lineage, cid) for cid in above)
