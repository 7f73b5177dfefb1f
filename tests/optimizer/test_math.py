"""Budget formula, bootstrap and minibatch sampler (pure, no I/O)."""

from __future__ import annotations

import random

import pytest

from optimizer.runtime.accounts.budget import Budget, auto_metric_calls, resolve_metric_calls
from optimizer.runtime.results.stats import paired_bootstrap
from optimizer.runtime.search.minibatch import MinibatchSampler
from schemas import BudgetExhausted, RunConfig, UserError


def test_auto_formula_matches_the_documented_numbers() -> None:
    # T=20, H=40, m=4, k=3: 20 + 40 + P*(4 + 10) + 40 (+ (k+1)*V with val seeds)
    assert (
        auto_metric_calls("light", train=20, holdout=40, val=0, minibatch=4, top_k=3)
        == 20 + 40 + 12 * 14 + 40
    )
    assert (
        auto_metric_calls("medium", train=20, holdout=40, val=0, minibatch=4, top_k=3)
        == 20 + 40 + 24 * 14 + 40
    )
    assert (
        auto_metric_calls("heavy", train=20, holdout=40, val=10, minibatch=4, top_k=3)
        == 20 + 40 + 48 * 14 + 40 + 4 * 10
    )
    with pytest.raises(UserError, match="light, medium, heavy"):
        auto_metric_calls("huge", train=1, holdout=1, val=0, minibatch=1, top_k=1)


def test_explicit_budget_wins_over_auto() -> None:
    cfg = RunConfig(containers=["http://127.0.0.1:1"], max_metric_calls=99, auto="heavy")
    assert resolve_metric_calls(cfg, train=10, holdout=10, val=0) == 99
    assert resolve_metric_calls(RunConfig(), train=10, holdout=10, val=0) is None


def test_budget_books_all_or_nothing_and_keeps_the_final_reserve() -> None:
    b = Budget(max_calls=10, reserve_final=4)
    b.reserve(5)
    with pytest.raises(BudgetExhausted, match="1 left"):
        b.reserve(2)
    for _ in range(5):
        b.settle(cost_usd=0.01, error=False, retries=0)
    assert b.paid == 5 and b.booked == 0
    b.reserve(1)
    b.settle(cost_usd=0.0, error=True, retries=2)
    with pytest.raises(BudgetExhausted):
        b.check_search()
    b.reserve(4, final=True)  # the reserve is still there for heldout selection
    with pytest.raises(BudgetExhausted):
        b.reserve(1, final=True)
    assert b.snapshot()["errors"] == 1 and b.snapshot()["retries"] == 2


def test_cost_cap_stops_the_search() -> None:
    b = Budget(max_cost_usd=0.05)
    b.settle(cost_usd=0.03, error=False, retries=0)
    b.check_search()
    b.proposer_cost_usd = 0.02
    with pytest.raises(BudgetExhausted, match="cost budget"):
        b.check_search()


def test_bootstrap_interval_brackets_the_lift_and_is_seeded() -> None:
    seeds = [f"s{i}" for i in range(40)]
    base = {s: 0.0 for s in seeds}
    best = {s: (1.0 if i % 4 == 0 else 0.0) for i, s in enumerate(seeds)}  # +0.25
    r1 = paired_bootstrap(best, base, random.Random(1))
    r2 = paired_bootstrap(best, base, random.Random(1))
    assert r1 == r2
    assert r1.lift == pytest.approx(0.25)
    assert 0.0 < r1.ci_low < 0.25 < r1.ci_high < 0.5
    assert r1.n == 40


def test_bootstrap_of_identical_candidates_is_zero() -> None:
    same = {"a": 1.0, "b": 0.0}
    r = paired_bootstrap(same, same, random.Random(0))
    assert (r.lift, r.ci_low, r.ci_high) == (0.0, 0.0, 0.0)


def test_bootstrap_uses_only_seeds_both_scored() -> None:
    r = paired_bootstrap({"a": 1.0, "b": 1.0}, {"a": 0.0}, random.Random(0))
    assert r.n == 1 and r.lift == 1.0


def test_minibatches_rotate_through_every_seed() -> None:
    seeds = [f"s{i}" for i in range(10)]
    sampler = MinibatchSampler(seeds, 3, random.Random(5))
    batches = [sampler.next() for _ in range(3)]
    assert all(len(b) == 3 and len(set(b)) == 3 for b in batches)
    assert len({s for b in batches for s in b}) == 9  # no repeats within an epoch
    again = MinibatchSampler(seeds, 3, random.Random(5))
    assert [again.next() for _ in range(3)] == batches
    assert MinibatchSampler(["x"], 5, random.Random(0)).next() == ["x"]


def test_minibatches_leave_out_seeds_set_aside_meanwhile() -> None:
    seeds, aside = [f"s{i}" for i in range(6)], set[str]()
    sampler = MinibatchSampler(seeds, 4, random.Random(1), skip=aside)
    first = sampler.next()
    aside.update(["s0", "s1"])  # set aside after the epoch was drawn: a live view
    later = [s for _ in range(5) for s in sampler.next()]
    assert not {"s0", "s1"} & set(later)
    assert {"s2", "s3", "s4", "s5"} <= set(later) and len(first) == 4
