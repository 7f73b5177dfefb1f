"""Choosing the winner and measuring its lift, on different seeds.

The seeds that choose the winner never measure its lift (choosing and measuring on the same
seeds reports the luck of the choice as lift):

- with val seeds (``plan.selection_split == "val"``), the top-k frontier candidates by train
  mean and the baseline are scored on val and the best there wins;
- without, the winner is the best train mean (already paid for by the search). A candidate the
  budget only let the search score on part of train wins if it beats that best, paired, on
  the seeds it has.

The winner is then compared with the baseline on the holdout seeds, paired, with a bootstrap
interval. ``selection_need`` is what this still costs, so the search can spend the rest.

Under a ``--select`` rule other than ``best`` (:mod:`optimizer.runtime.results.tradeoff`), the
rule picks among the same candidates (on val: the rule's top-k by their train means), and the
winner is measured against the baseline on the objective the rule weighs as well, with its own
paired interval. Such a winner is promoted when its reward lift meets
``--min-holdout-improvement`` and it is better on reward or on that objective.

A run without holdout seeds (``RunConfig.lift_without_holdout``: the spec API, whose flows
have train and val seeds only and validate on val) measures the lift on the seeds that chose
the winner instead (``measured_on`` is ``"val"`` or ``"train"``): the report says the lift
then includes the luck of the choice.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.accounts.plan import RunPlan
from optimizer.runtime.results.stats import paired_bootstrap
from optimizer.runtime.results.tradeoff import (
    ObjectiveLift,
    Tradeoff,
    choose_by_rule,
    objective_lift,
    points_on,
)
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.search.frontier import mean_score
from optimizer.runtime.search.selection import rank_candidates
from optimizer.runtime.search.state import SearchState
from schemas import BudgetExhausted, Direction

__all__ = [
    "Promotion",
    "choose_on_train",
    "could_still_win",
    "select_and_promote",
    "selection_need",
    "train_winner",
]


@dataclass(frozen=True)
class Promotion:
    """The verdict: best vs baseline on the holdout seeds, paired."""

    best_id: str
    baseline_id: str
    selection_split: str
    lift: float
    ci_low: float
    ci_high: float
    n: int
    min_improvement: float
    promoted: bool
    significant: bool
    best_holdout: float | None  # the means on the seeds the lift was measured on
    baseline_holdout: float | None
    considered: tuple[str, ...]
    skipped: tuple[str, ...]
    selection_seeds: int = 0
    holdout_seeds: int = 0
    measured_on: str = "holdout"  # where the lift was measured: holdout, or the selection split
    measured_seeds: int = 0
    select: str = "best"  # the rule that chose the winner (--select)
    objective: ObjectiveLift | None = None  # the winner vs the baseline on what the rule weighs
    tradeoff: Tradeoff | None = None  # what the rule chose over the best reward

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for events and the evidence packet."""
        data = asdict(self)
        data["considered"] = list(self.considered)
        data["skipped"] = list(self.skipped)
        data["objective"] = self.objective.as_dict() if self.objective else None
        data["tradeoff"] = self.tradeoff.as_dict() if self.tradeoff else None
        return data


def choose_on_train(state: SearchState, baseline_id: str) -> str:
    """The best train mean; a partially scored candidate only when it beats that for sure.
    A candidate a person rejected is never chosen (``SearchState.ranked`` leaves it out).

    A partial candidate's scored seeds are not a fair sample: they start with the seeds of its
    gate, which were picked where its parent failed. So it wins only if its train mean with
    every unscored seed counted at the lowest reward seen still beats the best's mean.
    """
    best = state.best()
    if not best:
        return baseline_id
    chosen, bar = best
    n = len(state.train_seeds)
    for cid, scores in state.partial.items():
        if not scores or n == 0 or cid in state.rejected:
            continue
        low = (sum(scores.values()) + _lowest_seen(state) * (n - len(scores))) / n
        if low > bar:
            chosen, bar = cid, low
    return chosen


def train_winner(state: SearchState, baseline_id: str) -> tuple[str, Tradeoff | None]:
    """The winner on train under the state's rule (``choose_on_train`` for ``best``; else the
    rule's choice among the candidates scored on all of train, and what it gave up)."""
    if state.rule.is_best:
        return choose_on_train(state, baseline_id), None
    ids = list(dict.fromkeys([*state.train, baseline_id]))
    points = points_on(state, ids, state.train, state.train_seeds)
    if not points:
        return baseline_id, None
    chosen, _, tradeoff = choose_by_rule(state.rule, points, baseline_id)
    return chosen, tradeoff


def _lowest_seen(state: SearchState) -> float:
    """The lowest train reward seen, full or partial evaluations (0 before any)."""
    tables = (state.train, state.partial)
    return min((v for t in tables for scores in t.values() for v in scores.values()), default=0.0)


def could_still_win(state: SearchState, plan: RunPlan, seeds: int) -> bool:
    """Whether a new candidate that the budget lets the search score on only ``seeds`` train
    seeds could still be chosen over the best so far.

    On train it could if the program's highest reward on those seeds, with every other seed
    counted at the lowest reward seen (``choose_on_train``), beat the best's mean; on val only
    frontier members (fully scored on train) are candidates.
    """
    n, best = len(state.train_seeds), state.best()
    if seeds >= n or best is None:
        return True
    if plan.selection_split == "val":
        return False
    return (state.ceiling * seeds + _lowest_seen(state) * (n - seeds)) / n > best[1]


def _val_candidates(state: SearchState, baseline_id: str, top_k: int) -> list[str]:
    """The frontier's top-k by train mean (under another rule than ``best``: the rule's top-k
    of every candidate scored on train, by their train means) and the baseline."""
    if not state.rule.is_best:
        ids = list(dict.fromkeys([*state.train, baseline_id]))
        points = points_on(state, ids, state.train, state.train_seeds)
        top = [r.candidate_id for r in rank_candidates(state.rule, points).order][:top_k]
        return list(dict.fromkeys([*top, baseline_id]))
    frontier = list(state.frontier.members()) or [baseline_id]
    top = [cid for cid, _ in state.ranked(frontier)][:top_k]
    return list(dict.fromkeys([*top, baseline_id]))


def selection_need(
    state: SearchState, plan: RunPlan, baseline_id: str, measuring: str | None = None
) -> int:
    """Rollouts the end of the run will still pay for, given the state so far (``measuring``:
    a winner whose holdout rollouts are already booked, ``BackgroundHoldouts``)."""
    holdout = len(plan.holdout)
    if plan.selection_split == "val":
        ids = _val_candidates(state, baseline_id, plan.top_k)
        need = sum(len(plan.val) for cid in ids if cid not in state.val)
        return need + (holdout if any(cid != baseline_id for cid in ids) else 0)
    best = train_winner(state, baseline_id)[0]
    if best in state.holdout or best == measuring:
        return 0
    # From the first child that passes a gate on, the winner may be someone else than the
    # baseline: keep its holdout seeds free before that child's train evaluation is booked.
    contenders = state.contenders | set(state.train) | set(state.partial)
    return holdout if best != baseline_id or contenders - {baseline_id} else 0


async def _score(
    queue: RolloutQueue, state: SearchState, candidate_id: str, seeds: Sequence[str], split: str
) -> bool:
    """Score on ``seeds`` (as many as the budget still pays for); False when none could be."""
    table = state.val if split == "val" else state.holdout
    if candidate_id in table or not seeds:
        return candidate_id in table
    record = state.candidates[candidate_id]
    try:
        results = await queue.evaluate(candidate_id, record.components, seeds, final=True)
    except BudgetExhausted:
        room = queue.budget_room()
        if not room:
            return False
        missing = await queue.misses(record.components, seeds)
        keep = set(missing[:room])
        subset = [s for s in seeds if s not in missing or s in keep]
        results = await queue.evaluate(candidate_id, record.components, subset, final=True)
    table[candidate_id] = {
        s: r.reward for s, r in results.items() if r.reward is not None and s not in state.set_aside
    }
    return True


async def select_and_promote(
    *,
    queue: RolloutQueue,
    state: SearchState,
    baseline_id: str,
    plan: RunPlan,
    min_improvement: float,
    rng: random.Random,
    events: EventSink,
    directions: Mapping[str, Direction] | None = None,
) -> Promotion:
    """Choose the winner on val or train (under ``state.rule``), then compare it with the
    baseline on holdout (on the seeds that chose it when the plan has no holdout seeds), on
    reward and on the objective the rule weighs (its direction from ``directions``; the
    measured objectives are minimised)."""
    skipped: list[str] = []
    best_id, considered, selection_seeds, tradeoff = await _choose(
        queue, state, baseline_id, plan, skipped
    )
    measured_on = "holdout" if plan.holdout else plan.selection_split
    if measured_on == "holdout":
        for cid in dict.fromkeys([baseline_id, best_id]):
            if not await _score(queue, state, cid, plan.holdout, "holdout"):
                skipped.append(cid)
        if best_id in skipped:
            best_id = baseline_id  # a winner that could not be measured is not promoted
    seeds, best_scores, base_scores = _measured(state, plan, measured_on, best_id, baseline_id)
    lift = paired_bootstrap(best_scores, base_scores, rng)
    weighed = tradeoff.ranked_by if tradeoff is not None else None
    objective = None
    if weighed is not None and weighed != "reward":
        direction = (directions or {}).get(weighed, "minimize")
        objective = objective_lift(state, weighed, direction, seeds, best_id, baseline_id, rng)
    better = lift.lift > 0 or (objective is not None and objective.improved)
    promotion = Promotion(
        best_id=best_id,
        baseline_id=baseline_id,
        selection_split=plan.selection_split,
        lift=lift.lift,
        ci_low=lift.ci_low,
        ci_high=lift.ci_high,
        n=lift.n,
        min_improvement=min_improvement,
        promoted=best_id != baseline_id and lift.n > 0 and better and lift.lift >= min_improvement,
        significant=lift.ci_low > 0,
        best_holdout=mean_score(best_scores, seeds),
        baseline_holdout=mean_score(base_scores, seeds),
        considered=tuple(considered),
        skipped=tuple(dict.fromkeys(skipped)),
        selection_seeds=selection_seeds,
        holdout_seeds=len(state.kept(plan.holdout)),
        measured_on=measured_on,
        measured_seeds=len(seeds),
        select=str(state.rule),
        objective=objective,
        tradeoff=tradeoff,
    )
    await events.emit("promotion", promotion.as_dict())
    return promotion


async def _choose(
    queue: RolloutQueue, state: SearchState, baseline_id: str, plan: RunPlan, skipped: list[str]
) -> tuple[str, list[str], int, Tradeoff | None]:
    """The winner, the candidates considered, the selection seeds and (under a rule other than
    ``best``) what the rule gave up."""
    if plan.selection_split == "val":
        best_id, considered, tradeoff = await _choose_on_val(
            queue, state, baseline_id, plan, skipped
        )
        return best_id, considered, len(state.kept(plan.val)), tradeoff
    best_id, tradeoff = train_winner(state, baseline_id)
    considered = list(dict.fromkeys([best_id, baseline_id]))
    if tradeoff is not None:
        considered = list(dict.fromkeys([*considered, *tradeoff.eligible]))
    return best_id, considered, len(state.train_seeds), tradeoff


def _measured(
    state: SearchState, plan: RunPlan, split: str, best_id: str, baseline_id: str
) -> tuple[list[str], dict[str, float], dict[str, float]]:
    """The seeds the lift is measured on, and the best's and the baseline's scores there (a
    seed set aside meanwhile is compared nowhere)."""
    if split == "holdout":
        seeds, tables = state.kept(plan.holdout), [state.holdout]
    elif split == "val":
        seeds, tables = state.kept(plan.val), [state.val]
    else:  # a winner the budget scored on part of train only has its scores in ``partial``
        seeds, tables = list(state.train_seeds), [state.train, state.partial]

    def scores(cid: str) -> dict[str, float]:
        found = next((t[cid] for t in tables if cid in t), {})
        return {s: v for s, v in found.items() if s in seeds}

    return seeds, scores(best_id), scores(baseline_id)


async def _choose_on_val(
    queue: RolloutQueue, state: SearchState, baseline_id: str, plan: RunPlan, skipped: list[str]
) -> tuple[str, list[str], Tradeoff | None]:
    """The top train candidates scored on val; the best there wins (train mean breaks ties),
    or the state's rule picks among them.

    Candidates that could not be scored are appended to ``skipped``; with none scored the
    baseline stays.
    """
    considered = _val_candidates(state, baseline_id, plan.top_k)
    for cid in considered:
        if not await _score(queue, state, cid, plan.val, "val"):
            skipped.append(cid)
    if not state.rule.is_best:
        scored = [cid for cid in considered if cid in state.val]
        points = points_on(state, scored, state.val, state.kept(plan.val))
        if not points:
            return baseline_id, considered, None
        chosen, _, tradeoff = choose_by_rule(state.rule, points, baseline_id)
        return chosen, considered, tradeoff
    rank = {cid: i for i, cid in enumerate(state.order())}

    def key(cid: str) -> tuple[float, float, int]:
        sel = mean_score(state.val.get(cid, {}), state.kept(plan.val))
        train = state.train_mean(cid) or 0.0
        return (-(sel if sel is not None else -1.0), -train, rank[cid])

    scored = [cid for cid in considered if cid in state.val]
    return (min(scored, key=key) if scored else baseline_id), considered, None
