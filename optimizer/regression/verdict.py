"""The check's verdict (pure): the paired lift of a candidate over a reference, and the gate.

The lift is the promotion's (:func:`optimizer.runtime.paired_bootstrap`): the mean of
(candidate - reference) over the seeds both scored, with a 95% percentile-bootstrap interval
drawn by the promotion's generator for the same seed (:func:`optimizer.runtime.promotion_rng`).
Checking a run's best against its baseline on the seeds that measured its lift therefore
reports the lift and interval of its evidence packet, to the last digit.

The gate: the candidate passes unless it is worse than the reference by more than ``margin``
at 95%, i.e. unless the whole interval lies below ``-margin`` (``ci_high < -margin``). A
candidate that ties the reference everywhere (an interval of ``[0, 0]``) passes a margin of 0:
nothing says it is worse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from optimizer.runtime import mean_score, paired_bootstrap, promotion_rng

__all__ = ["CONFIDENCE", "Verdict", "judge"]

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Verdict:
    """Candidate vs reference on one split, paired by seed."""

    lift: float
    ci_low: float
    ci_high: float
    n: int  # seeds both scored: the pairs the lift is the mean of
    margin: float
    passed: bool
    candidate_mean: float | None
    reference_mean: float | None
    wins: int  # seeds where the candidate scored higher
    losses: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (the check's JSON report)."""
        return {**asdict(self), "confidence": CONFIDENCE}


def judge(
    candidate: Mapping[str, float],
    reference: Mapping[str, float],
    *,
    margin: float,
    seed: int,
) -> Verdict:
    """The verdict on the seeds both sides scored (a seed either side errored on is left out)."""
    lift = paired_bootstrap(candidate, reference, promotion_rng(seed), confidence=CONFIDENCE)
    paired: Sequence[str] = sorted(set(candidate) & set(reference))
    return Verdict(
        lift=lift.lift,
        ci_low=lift.ci_low,
        ci_high=lift.ci_high,
        n=lift.n,
        margin=margin,
        passed=lift.n > 0 and lift.ci_high >= -margin,
        candidate_mean=mean_score(dict(candidate), paired),
        reference_mean=mean_score(dict(reference), paired),
        wins=sum(1 for s in paired if candidate[s] > reference[s]),
        losses=sum(1 for s in paired if candidate[s] < reference[s]),
    )
