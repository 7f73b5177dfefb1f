"""The merge strategies: when to merge, and which two frontier candidates."""

from __future__ import annotations

import random
from collections import Counter

from optimizer.gepa.strategies.merge import ComplementaryMerge, MergeStrategy, MergeView, NoMerge
from tests.optimizer.gepa.parts import lineage_state

SCORES = {
    "base": {"a": 0.0, "b": 0.0, "c": 0.0},
    "x": {"a": 1.0, "b": 0.0, "c": 0.0},
    "y": {"a": 0.0, "b": 1.0, "c": 0.0},
    "z": {"a": 0.0, "b": 0.0, "c": 1.0},
    "xz": {"a": 1.0, "b": 0.0, "c": 1.0},
}


def _view(*, accepted: bool = True, made: int = 0) -> tuple[MergeView, dict[str, str]]:
    state, ids = lineage_state(SCORES, {"x": ["base"], "y": ["base"], "z": ["base"], "xz": ["x"]})
    lineage = {cid: r.parents for cid, r in state.candidates.items()}
    view = MergeView(state.frontier, lineage, accepted_since_last=accepted, merges_so_far=made)
    return view, ids


def test_complementary_pairs_branches_each_winning_a_seed_the_other_does_not() -> None:
    view, ids = _view()
    rng = random.Random(0)
    pairs = Counter(ComplementaryMerge().pair(view, rng) for _ in range(300))
    # x is dominated by its child xz; y and xz win different seeds and are different branches
    assert set(pairs) == {(ids["y"], ids["xz"])} or set(pairs) == {(ids["xz"], ids["y"])}


def test_a_merge_is_due_only_after_an_accepted_child_and_within_the_cap() -> None:
    waiting, _ = _view(accepted=False)
    assert ComplementaryMerge().pair(waiting, random.Random(0)) is None
    capped, _ = _view(made=5)
    assert ComplementaryMerge(max_merges=5).pair(capped, random.Random(0)) is None
    assert ComplementaryMerge(max_merges=6).pair(capped, random.Random(0)) is not None


def test_no_merge_never_merges() -> None:
    view, _ = _view()
    assert isinstance(NoMerge(), MergeStrategy)
    assert NoMerge().pair(view, random.Random(0)) is None
