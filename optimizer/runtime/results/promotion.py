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

A run without holdout seeds (``RunConfig.lift_without_holdout``: the spec API, whose flows
have train and val seeds only and validate on val) measures the lift on the seeds that chose
the winner instead (``measured_on`` is ``"val"`` or ``"train"``): the report says the lift
then includes the luck of the choice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.accounts.plan import RunPlan
from optimizer.runtime.results.stats import paired_bootstrap
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.search.frontier import mean_score
from optimizer.runtime.search.state import SearchState
from schemas import BudgetExhausted

__all__ = [
    "Promotion",
    "choose_on_train",
    "could_still_win",
    "select_and_promote",
    "selection_need",
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

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for events and the evidence packet."""
        data = asdict(self)
        data["considered"] = list(self.considered)
        data["skipped"] = list(self.skipped)
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
    best = choose_on_train(state, baseline_id)
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
) -> Promotion:
    """Choose the winner on val or train, then compare it with the baseline on holdout (on the
    seeds that chose it when the plan has no holdout seeds)."""
    skipped: list[str] = []
    if plan.selection_split == "val":
        best_id, considered = await _choose_on_val(queue, state, baseline_id, plan, skipped)
        selection_seeds = len(state.kept(plan.val))
    else:
        best_id = choose_on_train(state, baseline_id)
        considered = list(dict.fromkeys([best_id, baseline_id]))
        selection_seeds = len(state.train_seeds)
    measured_on = "holdout" if plan.holdout else plan.selection_split
    if measured_on == "holdout":
        for cid in dict.fromkeys([baseline_id, best_id]):
            if not await _score(queue, state, cid, plan.holdout, "holdout"):
                skipped.append(cid)
        if best_id in skipped:
            best_id = baseline_id  # a winner that could not be measured is not promoted
    seeds, best_scores, base_scores = _measured(state, plan, measured_on, best_id, baseline_id)
    lift = paired_bootstrap(best_scores, base_scores, rng)
    promoted = (
        best_id != baseline_id and lift.n > 0 and lift.lift > 0 and lift.lift >= min_improvement
    )
    promotion = Promotion(
        best_id=best_id,
        baseline_id=baseline_id,
        selection_split=plan.selection_split,
        lift=lift.lift,
        ci_low=lift.ci_low,
        ci_high=lift.ci_high,
        n=lift.n,
        min_improvement=min_improvement,
        promoted=promoted,
        significant=lift.ci_low > 0,
        best_holdout=mean_score(best_scores, seeds),
        baseline_holdout=mean_score(base_scores, seeds),
        considered=tuple(considered),
        skipped=tuple(dict.fromkeys(skipped)),
        selection_seeds=selection_seeds,
        holdout_seeds=len(state.kept(plan.holdout)),
        measured_on=measured_on,
        measured_seeds=len(seeds),
    )
    await events.emit("promotion", promotion.as_dict())
    return promotion


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
) -> tuple[str, list[str]]:
    """The top train candidates scored on val; the best there wins (train mean breaks ties).

    Candidates that could not be scored are appended to ``skipped``; with none scored the
    baseline stays.
    """
    considered = _val_candidates(state, baseline_id, plan.top_k)
    for cid in considered:
        if not await _score(queue, state, cid, plan.val, "val"):
            skipped.append(cid)
    rank = {cid: i for i, cid in enumerate(state.order())}

    def key(cid: str) -> tuple[float, float, int]:
        sel = mean_score(state.val.get(cid, {}), state.kept(plan.val))
        train = state.train_mean(cid) or 0.0
        return (-(sel if sel is not None else -1.0), -train, rank[cid])

    scored = [cid for cid in considered if cid in state.val]
    return (min(scored, key=key) if scored else baseline_id), considered
