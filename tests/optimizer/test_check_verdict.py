"""The regression gate's verdict: the promotion's paired lift and interval, and the margin."""

from __future__ import annotations

import random

import pytest

from optimizer.regression import judge
from optimizer.runtime import paired_bootstrap, promotion_rng


def _scores(values: list[float], prefix: str = "s") -> dict[str, float]:
    return {f"{prefix}{i:03d}": v for i, v in enumerate(values)}


def test_the_interval_is_the_promotions_for_the_same_seed_to_the_last_digit() -> None:
    rng = random.Random(5)
    best = _scores([float(rng.random() < 0.6) for _ in range(80)])
    base = _scores([float(rng.random() < 0.45) for _ in range(80)])
    promotion = paired_bootstrap(best, base, promotion_rng(7))
    verdict = judge(best, base, margin=0.0, seed=7)
    assert (verdict.lift, verdict.ci_low, verdict.ci_high, verdict.n) == (
        promotion.lift,
        promotion.ci_low,
        promotion.ci_high,
        promotion.n,
    )
    assert verdict.ci_low < verdict.lift < verdict.ci_high  # a real interval, not a point
    assert judge(best, base, margin=0.0, seed=8).ci_low != verdict.ci_low  # the seed matters


def test_worse_by_more_than_the_margin_fails_and_a_margin_can_let_it_pass() -> None:
    good = _scores([1.0] * 30 + [0.0] * 10)
    bad = _scores([0.0] * 40)
    failed = judge(bad, good, margin=0.0, seed=0)
    assert not failed.passed and failed.ci_high < 0 and failed.losses == 30 and failed.wins == 0
    assert failed.candidate_mean == 0.0 and failed.reference_mean == 0.75
    assert judge(bad, good, margin=1.0, seed=0).passed  # within a margin of 1
    assert judge(good, bad, margin=0.0, seed=0).passed  # better passes, whatever the margin


def test_a_tie_everywhere_passes_a_margin_of_zero() -> None:
    same = _scores([1.0, 0.0, 1.0, 0.5])
    verdict = judge(same, dict(same), margin=0.0, seed=0)
    assert (verdict.lift, verdict.ci_low, verdict.ci_high) == (0.0, 0.0, 0.0)
    assert verdict.passed


@pytest.mark.parametrize("margin", [0.0, 0.05])
def test_the_gate_is_the_upper_end_against_minus_the_margin(margin: float) -> None:
    # One loss in 200 ties: the interval's upper end is 0, which is not below -margin.
    cand = _scores([1.0] * 199 + [0.0])
    ref = _scores([1.0] * 200)
    verdict = judge(cand, ref, margin=margin, seed=0)
    assert verdict.ci_high == 0.0 and verdict.passed


def test_seeds_one_side_did_not_score_are_left_out_of_the_pairs() -> None:
    cand = {"a": 1.0, "b": 1.0, "c": 0.0}
    ref = {"a": 0.0, "b": 1.0}  # "c" errored for the reference
    verdict = judge(cand, ref, margin=0.0, seed=0)
    assert verdict.n == 2 and verdict.lift == 0.5 and verdict.candidate_mean == 1.0


def test_nothing_paired_is_no_pass() -> None:
    assert not judge({"a": 1.0}, {"b": 1.0}, margin=0.5, seed=0).passed
