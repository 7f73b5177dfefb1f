"""Promotion statistics: paired lift and its bootstrap confidence interval (pure)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PairedLift", "paired_bootstrap", "promotion_rng"]


def promotion_rng(seed: int) -> random.Random:
    """The bootstrap's generator for a run of ``seed``: the promotion's, and ``check``'s,
    which reproduces the promotion's interval from the same scores."""
    return random.Random(seed + 1)


@dataclass(frozen=True)
class PairedLift:
    """Mean of (best - baseline) over seeds both scored, with a percentile bootstrap interval."""

    lift: float
    ci_low: float
    ci_high: float
    n: int


def paired_bootstrap(
    best: Mapping[str, float],
    baseline: Mapping[str, float],
    rng: random.Random,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> PairedLift:
    """Paired bootstrap over the seeds both candidates scored (errored seeds are left out)."""
    seeds = sorted(set(best) & set(baseline))
    if not seeds:
        return PairedLift(lift=0.0, ci_low=0.0, ci_high=0.0, n=0)
    diffs = [best[s] - baseline[s] for s in seeds]
    n = len(diffs)
    lift = sum(diffs) / n
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    alpha = (1 - confidence) / 2
    low = means[int(alpha * (resamples - 1))]
    high = means[int((1 - alpha) * (resamples - 1))]
    return PairedLift(lift=lift, ci_low=low, ci_high=high, n=n)
