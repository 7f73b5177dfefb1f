"""Promotion under a ``--select`` rule: the winner by what the team weighs, and what it costs.

``choose_by_rule`` ranks candidates (:func:`optimizer.runtime.search.selection.rank_candidates`)
on the selection split: their mean reward there, and their other objectives' means over the
train seeds (never the holdout, which measures the winner). ``objective_lift`` is the winner
against the baseline on one objective, paired over the seeds the lift is measured on, with the
same bootstrap interval as the reward's. ``Tradeoff`` says what the rule chose over the
candidate with the best reward: the reward it gave up and what it saved.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from optimizer.runtime.results.stats import paired_bootstrap
from optimizer.runtime.search.frontier import mean_score
from optimizer.runtime.search.selection import Point, Ranking, rank_candidates
from optimizer.runtime.search.state import SearchState
from schemas import Direction, SelectRule

__all__ = ["ObjectiveLift", "Tradeoff", "choose_by_rule", "objective_lift", "points_on"]


@dataclass(frozen=True)
class ObjectiveLift:
    """Winner minus baseline on one objective, paired (``diff`` < 0: the winner is lower)."""

    name: str
    direction: Direction
    best: float | None
    baseline: float | None
    diff: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def improved(self) -> bool:
        """Whether the winner is better on it (lower when minimised), on the mean."""
        if self.n == 0:
            return False
        return self.diff < 0 if self.direction == "minimize" else self.diff > 0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for events and the evidence packet."""
        return {**asdict(self), "improved": self.improved}


@dataclass(frozen=True)
class Tradeoff:
    """What the rule chose against the best reward, on the selection split."""

    rule: str
    ranked_by: str  # the objective that ordered the eligible candidates
    top_id: str  # the candidate with the best reward
    top_reward: float | None
    chosen_reward: float | None
    top_value: float | None  # the weighed objective's mean, top and chosen
    chosen_value: float | None
    eligible: tuple[str, ...]

    @property
    def reward_given_up(self) -> float:
        """How much lower the winner's selection reward is than the best's (0: none)."""
        if self.top_reward is None or self.chosen_reward is None:
            return 0.0
        return max(0.0, self.top_reward - self.chosen_reward)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for the evidence packet."""
        data = asdict(self)
        data["eligible"] = list(self.eligible)
        data["reward_given_up"] = self.reward_given_up
        return data


def points_on(
    state: SearchState,
    ids: Sequence[str],
    rewards: Mapping[str, Mapping[str, float]],
    seeds: Sequence[str],
) -> list[Point]:
    """Points of ``ids`` with a reward on ``seeds`` (from ``rewards``, a split's table); their
    other objectives are their means over the train seeds."""
    train = set(state.train_seeds)
    out = []
    for cid in ids:
        reward = mean_score(rewards.get(cid, {}), seeds)
        if reward is not None:
            out.append(Point(cid, reward, state.objectives.means(cid, train)))
    return out


def choose_by_rule(
    rule: SelectRule, points: Sequence[Point], baseline_id: str
) -> tuple[str, Ranking, Tradeoff]:
    """The rule's winner among ``points`` (the baseline when none is eligible), its ranking and
    what it gave up against the best reward."""
    ranking = rank_candidates(rule, points)
    chosen = ranking.chosen or baseline_id
    by_id = {p.candidate_id: p for p in points}
    top = rank_candidates(SelectRule(), points).chosen or baseline_id
    weighed = rule.weighed if rule.kind == "best-under" else ranking.by

    def value(cid: str) -> float | None:
        point = by_id.get(cid)
        return point.value(weighed) if point is not None and weighed else None

    def reward(cid: str) -> float | None:
        point = by_id.get(cid)
        return point.reward if point is not None else None

    tradeoff = Tradeoff(
        rule=str(rule),
        ranked_by=ranking.by if rule.kind != "best-under" else str(rule.objective),
        top_id=top,
        top_reward=reward(top),
        chosen_reward=reward(chosen),
        top_value=value(top),
        chosen_value=value(chosen),
        eligible=tuple(ranking.eligible()),
    )
    return chosen, ranking, tradeoff


def objective_lift(
    state: SearchState,
    name: str,
    direction: Direction,
    seeds: Sequence[str],
    best_id: str,
    baseline_id: str,
    rng: random.Random,
) -> ObjectiveLift:
    """The winner against the baseline on ``name`` over ``seeds``, paired, with its interval."""
    table = state.objectives
    keep = set(seeds)
    best = {s: v for s, v in table.per_seed(best_id, name).items() if s in keep}
    base = {s: v for s, v in table.per_seed(baseline_id, name).items() if s in keep}
    paired = paired_bootstrap(best, base, rng)
    return ObjectiveLift(
        name=name,
        direction=direction,
        best=mean_score(best) if best else None,
        baseline=mean_score(base) if base else None,
        diff=paired.lift,
        ci_low=paired.ci_low,
        ci_high=paired.ci_high,
        n=paired.n,
    )
