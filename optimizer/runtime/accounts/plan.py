"""What a run can afford (pure): the seeds it uses, whether it searches, what it skips.

A full run pays for the baseline on train and holdout (``T + H``), a search, the selection
of the winner (``(k + 1) * V`` on the val seeds when the program has any; nothing when the
winner is chosen on its train scores) and the winner on holdout (``H``), which measures the
lift. ``plan_run`` fits any budget of one call or more by giving things up in this order,
and says in ``skipped`` exactly what it gave up:

1. fewer candidates scored on val, then choosing on train scores instead of val;
2. fewer holdout seeds (down to ``MIN_HOLDOUT``);
3. no search: the baseline alone is evaluated (and one proposal is written, not evaluated,
   so a smoke test still reaches the reflection model);
4. fewer train and holdout seeds for that baseline.

Subsampled seeds are drawn with the injected ``random.Random``, kept in the program's order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.config import RunConfig
from schemas.protocol import Seeds

__all__ = [
    "LARGE_AUTO_BUDGET",
    "MIN_HOLDOUT",
    "RunPlan",
    "plan_for",
    "auto_budget_warning",
    "default_proposals_in_flight",
    "holdout_overlap",
    "plan_run",
    "search_minimum",
]

MIN_HOLDOUT = 10
LARGE_AUTO_BUDGET = 10_000
HOSTED_IN_FLIGHT = 4


def default_proposals_in_flight(local: bool) -> int:
    """Proposals written at once when the user does not say: a hosted reflection endpoint
    answers many requests at a time, so 4 overlap; a local one (one llama.cpp process answers
    one request at a time) gets 1, which also keeps the run deterministic for its seed.
    ``local``: ``proposer.client.run_reflection_is_local`` (``--reflection-endpoint``)."""
    return 1 if local else HOSTED_IN_FLIGHT


def holdout_overlap(train: Sequence[str], val: Sequence[str], holdout: Sequence[str]) -> list[str]:
    """Holdout seeds that are also train or val seeds, sorted.

    The lift is measured on holdout seeds because they took no part in the search or the
    choice of the winner; a seed that did makes the measurement a training result.
    """
    return sorted(set(holdout) & (set(train) | set(val)))


def auto_budget_warning(
    limit: int, level: str, *, train: int, holdout: int, val: int
) -> str | None:
    """What a large ``--auto`` budget will cost and how to cap it, or ``None`` below
    ``LARGE_AUTO_BUDGET``: the formula grows with the train split, so a big dataset gets a
    budget nobody meant to pay for."""
    if limit < LARGE_AUTO_BUDGET:
        return None
    return (
        f"--auto {level} sets a budget of {limit:,} metric calls for {train:,} train, "
        f"{val:,} val and {holdout:,} holdout seeds: up to {limit:,} paid rollouts, each a "
        f"call of your agent (and its model); the baseline alone costs {train + holdout:,}. "
        "Cap it with --max-metric-calls N (and --max-cost-usd X), or give the container "
        "smaller splits (--splits-file)."
    )


@dataclass(frozen=True)
class RunPlan:
    """The seeds a run uses, whether it searches, and what its budget made it skip."""

    train: tuple[str, ...]
    holdout: tuple[str, ...]
    val: tuple[str, ...] = ()
    top_k: int = 0  # candidates scored on val (0: the winner is chosen on train scores)
    search: bool = True
    skipped: tuple[str, ...] = field(default_factory=tuple)

    @property
    def selection_split(self) -> str:
        """Where the winner is chosen: ``"val"`` or ``"train"``."""
        return "val" if self.val and self.top_k else "train"


def search_minimum(train: int) -> int:
    """The least a search can do with: one child gated and, if it passes, scored on train."""
    return train


def _sample(seeds: Sequence[str], k: int, rng: random.Random) -> tuple[str, ...]:
    if k >= len(seeds):
        return tuple(seeds)
    chosen = set(rng.sample(list(seeds), k))
    return tuple(s for s in seeds if s in chosen)


def plan_run(
    limit: int | None,
    *,
    train: Sequence[str],
    holdout: Sequence[str],
    val: Sequence[str],
    top_k: int,
    rng: random.Random,
) -> RunPlan:
    """The plan for a budget of ``limit`` paid calls (``None``: unlimited)."""
    t, h, v = len(train), len(holdout), len(val)
    base = t + h
    searching = search_minimum(t)
    full_k = top_k if v else 0
    if limit is None or limit >= base + searching + h + (full_k + 1) * v * bool(full_k):
        return RunPlan(tuple(train), tuple(holdout), tuple(val), full_k)
    skipped: list[str] = []
    if v:
        # Fewer val candidates first; when not even one fits, choose on train scores.
        room = limit - base - searching - h
        k = min(full_k, room // v - 1) if room >= 2 * v else 0
        if k >= 1:
            skipped.append(f"scored {k} instead of {full_k} candidates on the {v} val seeds")
            return RunPlan(tuple(train), tuple(holdout), tuple(val), k, skipped=tuple(skipped))
        skipped.append(
            f"no val selection: the winner is chosen on train scores ({v} val seeds unused)"
        )
    if limit >= base + searching + h:
        return RunPlan(tuple(train), tuple(holdout), skipped=tuple(skipped))
    fit = (limit - t - searching) // 2
    if fit >= min(h, MIN_HOLDOUT):
        skipped.append(f"holdout subsampled to {fit} of {h} seeds")
        return RunPlan(tuple(train), _sample(holdout, fit, rng), skipped=tuple(skipped))
    need = t + searching + 2 * min(h, MIN_HOLDOUT)
    skipped.append(
        f"no search: a search needs at least {need} metric calls here (budget {limit}); "
        "one proposal is written to check the reflection model but not evaluated"
    )
    if limit >= base:
        return RunPlan(tuple(train), tuple(holdout), search=False, skipped=tuple(skipped))
    # The baseline alone, on as many seeds as the budget pays for, split like the program.
    hs = 0 if limit < 2 else max(1, min(h, limit - 1, round(limit * h / base)))
    ts = min(t, limit - hs)
    if ts < t:
        skipped.append(f"baseline scored on {ts} of {t} train seeds")
    if hs < h:
        skipped.append(f"baseline scored on {hs} of {h} holdout seeds")
    return RunPlan(
        _sample(train, ts, rng), _sample(holdout, hs, rng), search=False, skipped=tuple(skipped)
    )


def plan_for(config: RunConfig, seeds: Seeds, limit: int | None) -> RunPlan:
    """The plan a run of ``config`` makes for ``seeds`` (a holdout sample drawn from the
    config's seed, so a resumed run and its forecast draw the same one)."""
    return plan_run(
        limit,
        train=seeds.train,
        holdout=seeds.holdout,
        val=seeds.val,
        top_k=config.holdout_top_k,
        rng=random.Random(config.seed + 15485863),
    )
