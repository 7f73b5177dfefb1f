"""Pareto frontier, parent sampling and merge pairing (pure, no I/O)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from optimizer.gepa.parents import ancestors, common_ancestor, complementary_pairs, sample_parent
from optimizer.runtime.search.frontier import build_frontier, dominates, mean_score

SEEDS = ["s1", "s2", "s3", "s4"]
SEEDS_TUPLE = tuple(SEEDS)


def test_winners_per_seed_keep_ties_and_best_scores() -> None:
    scores = {"a": {"s1": 1, "s2": 0, "s3": 0, "s4": 1}, "b": {"s1": 1, "s2": 1, "s3": 0, "s4": 0}}
    f = build_frontier(scores, SEEDS, ["a", "b"])
    assert f.winners["s1"] == ("a", "b")
    assert f.winners["s2"] == ("b",)
    assert f.winners["s4"] == ("a",)
    assert f.best == {"s1": 1, "s2": 1, "s3": 0, "s4": 1}
    assert f.coverage() == {"a": 0.5, "b": 0.5}  # s3, which nobody solved, is nobody's win


def test_a_seed_nobody_solved_is_no_win_and_the_pareto_ties_stay_apart() -> None:
    # On Banking77 a candidate at train mean 0.25 "won 100% of the seeds": every seed where
    # all candidates scored 0 was counted as its win.
    scores = {
        "base": {"s1": 0.0, "s2": 0.0, "s3": 0.0, "s4": 1.0},
        "child": {"s1": 0.0, "s2": 0.0, "s3": 0.0, "s4": 0.0},
    }
    f = build_frontier(scores, SEEDS, ["base", "child"])
    assert f.solved() == ("s4",)
    assert f.covered() == (1, 4)
    assert f.coverage() == {"base": 0.25}
    assert f.solved_winners() == {"s1": (), "s2": (), "s3": (), "s4": ("base",)}
    assert f.wins(solved=True) == {"base": ("s4",)}
    # The Pareto ties themselves stay (the search's members; parents' fallback while nothing
    # is solved).
    assert f.winners["s1"] == ("base",) and f.members() == ("base",)
    assert f.wins() == {"base": SEEDS_TUPLE}
    nothing = build_frontier({"base": {"s1": 0.0, "s2": 0.0}}, ["s1", "s2"], ["base"])
    assert nothing.covered() == (0, 2) and nothing.coverage() == {}
    assert nothing.members() == ("base",)  # a search can still start from the baseline
    # The floor is the program's lowest reward: in [-1, 1], a seed at -1 is unsolved, 0 is not.
    signed = build_frontier({"a": {"s1": -1.0, "s2": 0.0}}, ["s1", "s2"], ["a"], floor=-1.0)
    assert signed.solved() == ("s2",)
    # A seed nobody has a score on (every rollout errored) is not covered either.
    errored = build_frontier({"a": {"s1": 1.0}}, ["s1", "s2"], ["a"])
    assert errored.covered() == (1, 2)


def test_dominated_candidate_drops_out() -> None:
    scores = {"base": {"s1": 0.5, "s2": 0.0}, "better": {"s1": 0.5, "s2": 1.0}}
    f = build_frontier(scores, ["s1", "s2"], ["base", "better"])
    assert f.members() == ("better",)
    assert dominates(scores["better"], scores["base"], ["s1", "s2"])
    assert not dominates(scores["base"], scores["better"], ["s1", "s2"])


def test_equal_candidates_do_not_dominate_each_other() -> None:
    scores = {"a": {"s1": 1.0}, "b": {"s1": 1.0}}
    assert build_frontier(scores, ["s1"], ["a", "b"]).members() == ("a", "b")


def test_errored_seed_is_unknown_not_zero() -> None:
    # b errored on s2: it wins s1 on its own and must not be dominated through a missing score
    scores = {"a": {"s1": 0.0, "s2": 1.0}, "b": {"s1": 1.0}}
    f = build_frontier(scores, ["s1", "s2"], ["a", "b"])
    assert f.winners == {"s1": ("b",), "s2": ("a",)}
    assert mean_score(scores["b"], ["s1", "s2"]) == 1.0
    assert mean_score({}, ["s1"]) is None


def test_sampling_is_weighted_by_seeds_won_and_seeded() -> None:
    scores = {"a": {"s1": 1, "s2": 1, "s3": 1, "s4": 0}, "b": {"s1": 0, "s2": 0, "s3": 0, "s4": 1}}
    f = build_frontier(scores, SEEDS, ["a", "b"])
    counts = Counter(sample_parent(f, random.Random(7)) for _ in range(1))
    draws = [sample_parent(f, rng) for rng in [random.Random(3)] for _ in range(4000)]
    share = Counter(draws)["a"] / len(draws)
    assert 0.71 < share < 0.79  # 3 of 4 seeds
    assert counts  # one draw works
    again = [sample_parent(f, rng) for rng in [random.Random(3)] for _ in range(4000)]
    assert draws == again


def test_seeds_nobody_solved_add_no_weight_to_a_parent() -> None:
    # s4 is unsolved: both candidates tie there at 0. It says nothing about which parent to
    # build on, so the draw goes by the solved seeds only: a 2, b 1 (not 3 to 2).
    scores = {"a": {"s1": 1, "s2": 1, "s3": 0, "s4": 0}, "b": {"s1": 0, "s2": 0, "s3": 1, "s4": 0}}
    f = build_frontier(scores, SEEDS, ["a", "b"])
    rng = random.Random(5)
    share = Counter(sample_parent(f, rng) for _ in range(4000))["a"] / 4000
    assert 0.64 < share < 0.70
    # Until some seed is solved, the ties are all there is to start from.
    nothing = build_frontier({"c": {s: 0 for s in SEEDS}}, SEEDS, ["c"])
    assert sample_parent(nothing, rng) == "c"


def test_a_candidate_whose_failures_were_all_shown_is_drawn_only_when_all_were() -> None:
    scores = {"a": {"s1": 1, "s2": 1, "s3": 1, "s4": 0}, "b": {"s1": 0, "s2": 0, "s3": 0, "s4": 1}}
    f = build_frontier(scores, SEEDS, ["a", "b"])
    rng = random.Random(3)
    assert {sample_parent(f, rng, exhausted={"a"}) for _ in range(200)} == {"b"}
    both = Counter(sample_parent(f, rng, exhausted={"a", "b"}) for _ in range(4000))
    assert 0.71 < both["a"] / 4000 < 0.79  # as if none were: weighted by seeds won


def test_empty_frontier_cannot_be_sampled() -> None:
    with pytest.raises(ValueError, match="empty"):
        sample_parent(build_frontier({}, SEEDS, []), random.Random(0))


def test_complementary_pairs_need_wins_on_both_sides() -> None:
    scores = {
        "a": {"s1": 1, "s2": 0, "s3": 1},
        "b": {"s1": 0, "s2": 1, "s3": 1},
        "c": {"s1": 0, "s2": 0, "s3": 1},
    }
    f = build_frontier(scores, ["s1", "s2", "s3"], ["a", "b", "c"])
    assert complementary_pairs(f) == [("a", "b")]


LINEAGE = {"base": [], "a": ["base"], "b": ["base"], "a2": ["a"], "m": ["a2", "b"]}


def test_ancestors_and_the_most_recent_common_one() -> None:
    assert ancestors(LINEAGE, "m") == {"a2", "a", "b", "base"}
    assert ancestors(LINEAGE, "base") == frozenset()
    order = ["base", "a", "b", "a2", "m"]
    assert common_ancestor(LINEAGE, "a2", "b", order) == "base"
    assert common_ancestor(LINEAGE, "m", "a2", order) == "a2"  # one descends from the other
    assert common_ancestor({"x": [], "y": []}, "x", "y", ["x", "y"]) is None


def test_merges_never_pair_a_candidate_with_its_own_ancestor() -> None:
    # a2 descends from a but dropped a's win on s1; b is another branch.
    scores = {
        "a": {"s1": 1, "s2": 0, "s3": 0},
        "a2": {"s1": 0, "s2": 1, "s3": 0},
        "b": {"s1": 0, "s2": 0, "s3": 1},
    }
    f = build_frontier(scores, ["s1", "s2", "s3"], ["a", "b", "a2"])
    assert ("a", "a2") in complementary_pairs(f)  # without the lineage they would pair
    pairs = complementary_pairs(f, LINEAGE)
    assert ("a", "a2") not in pairs and ("a2", "a") not in pairs
    assert {frozenset(p) for p in pairs} == {frozenset({"a", "b"}), frozenset({"a2", "b"})}


def test_a_parent_whose_proposals_only_repeat_known_texts_is_drawn_less() -> None:
    scores = {"a": {"s1": 1, "s2": 1, "s3": 1, "s4": 0}, "b": {"s1": 0, "s2": 0, "s3": 0, "s4": 1}}
    f = build_frontier(scores, SEEDS, ["a", "b"])
    rng = random.Random(5)
    draws = Counter(sample_parent(f, rng, {"a": 2}) for _ in range(4000))
    # a wins 3 seeds but two proposals on it repeated a known text: weight 3/4 against b's 1.
    assert 0.39 < draws["a"] / 4000 < 0.47
