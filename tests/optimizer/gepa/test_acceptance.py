"""The acceptance criteria: does a child beat its parents on the seeds it was scored on?"""

from __future__ import annotations

from optimizer.gepa.strategies.acceptance import (
    ACCEPT,
    REJECT,
    UNDECIDED,
    AcceptanceCriterion,
    ImprovementOrEqualAcceptance,
    StrictImprovementAcceptance,
    margin,
)

SEEDS = ["a", "b", "c"]
PARENT = {"a": 1.0, "b": 0.0, "c": 0.0}


def test_strict_improvement_accepts_only_a_child_that_beats_its_parent() -> None:
    strict = StrictImprovementAcceptance()
    assert strict.judge([PARENT], {"a": 1.0, "b": 1.0, "c": 0.0}, SEEDS) == ACCEPT
    assert strict.judge([PARENT], {"a": 0.0, "b": 0.0, "c": 0.0}, SEEDS) == REJECT
    # a tie, one seed gained and one lost: more seeds are needed
    assert strict.judge([PARENT], {"a": 0.0, "b": 1.0, "c": 0.0}, SEEDS) == UNDECIDED


def test_seeds_where_anyone_errored_are_left_out() -> None:
    strict = StrictImprovementAcceptance()
    parent = {"a": 0.0, "b": 1.0}
    # the child errored on b: only a is compared, where it improves
    assert strict.judge([parent], {"a": 1.0, "b": None}, ["a", "b"]) == ACCEPT
    assert strict.judge([parent], {"a": None, "b": None}, ["a", "b"]) == UNDECIDED
    assert margin([parent], {"a": None, "b": None}, ["a", "b"]) is None


def test_a_merge_must_beat_its_best_parent_strictly() -> None:
    strict = StrictImprovementAcceptance()
    a, b = {"x": 1.0, "y": 0.0}, {"x": 0.0, "y": 1.0}
    assert strict.judge([a, b], {"x": 1.0, "y": 1.0}, ["x", "y"]) == ACCEPT
    assert strict.judge([a, b], {"x": 1.0, "y": 0.0}, ["x", "y"]) == UNDECIDED  # adds nothing
    assert strict.judge([a, b], {"x": 0.0, "y": 0.0}, ["x", "y"]) == REJECT


def test_improvement_or_equal_accepts_a_tie() -> None:
    lenient = ImprovementOrEqualAcceptance()
    assert isinstance(lenient, AcceptanceCriterion)
    assert lenient.judge([PARENT], {"a": 0.0, "b": 1.0, "c": 0.0}, SEEDS) == ACCEPT
    assert lenient.judge([PARENT], {"a": 0.0, "b": 0.0, "c": 0.0}, SEEDS) == REJECT
    assert lenient.judge([PARENT], {"a": None, "b": None, "c": None}, SEEDS) == UNDECIDED
