"""Heldout selection and promotion.

The top-k frontier candidates (by train mean) are scored on the selection split: the
``val`` seeds when the program has any, else the holdout seeds. The best there is compared
with the baseline on the same holdout seeds, paired, with a bootstrap interval. Selecting
and reporting on one split (no val seeds) favours the winner slightly; the report says which
split chose it so that a reader can weigh that.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from optimizer.dispatch import RolloutQueue
from optimizer.events import EventSink
from optimizer.frontier import mean_score
from optimizer.state import SearchState
from optimizer.stats import paired_bootstrap
from schemas import BudgetExhausted

__all__ = ["Promotion", "select_and_promote"]


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
    best_holdout: float | None
    baseline_holdout: float | None
    considered: tuple[str, ...]
    skipped: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for events and the evidence packet."""
        data = asdict(self)
        data["considered"] = list(self.considered)
        data["skipped"] = list(self.skipped)
        return data


async def _score(
    queue: RolloutQueue, state: SearchState, candidate_id: str, seeds: Sequence[str], split: str
) -> None:
    table = state.val if split == "val" else state.holdout
    if candidate_id in table or not seeds:
        return
    record = state.candidates[candidate_id]
    results = await queue.evaluate(candidate_id, record.components, seeds, final=True)
    table[candidate_id] = {s: r.reward for s, r in results.items() if r.reward is not None}


async def select_and_promote(
    *,
    queue: RolloutQueue,
    state: SearchState,
    baseline_id: str,
    val_seeds: Sequence[str],
    holdout_seeds: Sequence[str],
    top_k: int,
    min_improvement: float,
    rng: random.Random,
    events: EventSink,
) -> Promotion:
    """Score the top-k candidates, choose the best, and compare it with the baseline."""
    split = "val" if val_seeds else "holdout"
    selection_seeds = list(val_seeds or holdout_seeds)
    frontier = list(state.frontier.members()) or [baseline_id]
    top = [cid for cid, _ in state.ranked(frontier)][:top_k]
    considered = list(dict.fromkeys([*top, baseline_id]))
    skipped: list[str] = []
    for cid in considered:
        try:
            await _score(queue, state, cid, selection_seeds, split)
        except BudgetExhausted:
            skipped.append(cid)
    table = state.val if split == "val" else state.holdout
    rank = {cid: i for i, cid in enumerate(state.order())}

    def key(cid: str) -> tuple[float, float, int]:
        sel = mean_score(table.get(cid, {}), selection_seeds)
        return (-(sel if sel is not None else -1.0), -(state.train_mean(cid) or 0.0), rank[cid])

    scored = [cid for cid in considered if cid in table]
    best_id = min(scored, key=key) if scored else baseline_id
    if split == "val":
        for cid in dict.fromkeys([best_id, baseline_id]):
            try:
                await _score(queue, state, cid, holdout_seeds, "holdout")
            except BudgetExhausted:
                skipped.append(cid)
    best_scores = state.holdout.get(best_id, {})
    base_scores = state.holdout.get(baseline_id, {})
    lift = paired_bootstrap(best_scores, base_scores, rng)
    promoted = (
        best_id != baseline_id and lift.n > 0 and lift.lift > 0 and lift.lift >= min_improvement
    )
    promotion = Promotion(
        best_id=best_id,
        baseline_id=baseline_id,
        selection_split=split,
        lift=lift.lift,
        ci_low=lift.ci_low,
        ci_high=lift.ci_high,
        n=lift.n,
        min_improvement=min_improvement,
        promoted=promoted,
        significant=lift.ci_low > 0,
        best_holdout=mean_score(best_scores, holdout_seeds),
        baseline_holdout=mean_score(base_scores, holdout_seeds),
        considered=tuple(considered),
        skipped=tuple(skipped),
    )
    await events.emit("promotion", promotion.as_dict())
    return promotion
