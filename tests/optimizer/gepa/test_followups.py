"""Lateral follow-ups: a child that ties its parent by trading seeds is built on next."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import TRADE, add_candidate, lineage_state, search_for
from tests.optimizer.gepa.runs import whole_run


@pytest.mark.parametrize(
    ("child_scores", "followed"),
    [
        ({"ant-0": 1.0, "ant-1": 1.0, "bee-0": 0.0, "bee-1": 0.0}, True),  # traded ant for bee
        ({"ant-0": 1.0, "ant-1": 0.0, "bee-0": 0.0, "bee-1": 0.0}, False),  # lost more than won
    ],
)
async def test_only_a_child_that_traded_seeds_with_its_parent_is_built_on_next(
    child_scores: dict[str, float], followed: bool
) -> None:
    # A child that ties its parent on the mean, winning seeds the parent lost, is the step a
    # look-alike rule needs; one worse on the mean (an answer that dropped a rule, or a gate
    # passed on a noisy minibatch) is not worth every free proposal.
    state, ids = lineage_state(
        {"parent": TRADE["parent"], "child": child_scores}, {"child": ["parent"]}
    )
    followups = search_for(state)._followups
    followups.offer(ids["child"], ids["parent"])
    queued = followups.next()
    assert (queued is not None) == followed
    if followed:
        assert queued == (ids["child"], ["bee-0", "bee-1"])


async def test_a_lateral_child_written_twice_is_built_on_by_as_many_proposals_as_once() -> None:
    # Two proposals wrote the same text; each copy is gated and accepted, the second after a
    # proposal took a turn on the first. The turns (one per proposal in flight) are given once.
    state, ids = lineage_state(TRADE, {"child": ["parent"]})
    followups = search_for(state, proposals_in_flight=4)._followups
    followups.offer(ids["child"], ids["parent"])
    given = [followups.next()]
    followups.offer(ids["child"], ids["parent"])  # the second copy
    while (queued := followups.next()) is not None:
        given.append(queued)
    assert given == [(ids["child"], ["bee-0", "bee-1"])] * 4


async def test_follow_ups_on_a_child_stop_once_a_descendant_scores_above_it() -> None:
    # The lateral child was stacked with a sibling's fix into a candidate above it on train:
    # the turns left on the child go where the search stands now.
    state, ids = lineage_state(TRADE, {"child": ["parent"]})
    followups = search_for(state, proposals_in_flight=4)._followups
    followups.offer(ids["child"], ids["parent"])
    assert followups.next() == (ids["child"], ["bee-0", "bee-1"])
    stack = add_candidate(state, "- stack", [ids["child"]])
    state.set_train(stack, {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 0.0})
    assert followups.next() is None


async def test_a_follow_up_turn_taken_by_a_proposal_that_only_waited_is_given_back() -> None:
    # Two proposals' turns on a lateral child. The first finds every failure it could be
    # shown being fixed by a child still being accepted, and waits for it: its turn is not
    # spent, the next proposal takes it.
    state, ids = lineage_state(TRADE, {"child": ["parent"]})
    search = search_for(state, proposals_in_flight=2)
    child = ids["child"]
    search._ledger._kinds[child] = {"bee-0": "kind:bee", "bee-1": "kind:bee"}
    search._ledger.taken.update(["bee-0", "bee-1", "kind:bee"])  # being fixed in flight
    search._followups.offer(child, ids["parent"])
    accepting = asyncio.create_task(asyncio.sleep(0.05))
    search._pipeline.pending.add(accepting)
    assert await search._step() is None  # it waited for the child being accepted
    turns = []
    while (queued := search._followups.next()) is not None:
        turns.append(queued[0])
    assert turns == [child, child]


async def test_a_lateral_child_is_built_on_next_shown_the_seeds_it_broke(tmp_path: Path) -> None:
    # ant and bee are look-alikes: with both lines the items of the one listed first get the
    # other's label until a line tells them apart. Adding bee to a prompt with ant fixes bee's
    # seeds and breaks ant's: no better on the mean, but the step the fix needs.
    container = RuleContainer(
        program(["ant", "bee", "cat", "cow"]), rivals={"ant": "bee", "bee": "ant"}
    )
    events: list[Event] = []
    result = await whole_run(
        tmp_path, container, ScriptedProposer(), events, proposals_in_flight=1, seed=3
    )
    parents, train, lateral = {}, {}, []
    for i, e in enumerate(events):
        if e.type == "gate" and e.data["accepted"]:
            parents[e.data["candidate_id"]] = e.data["parent"]
        if e.type == "scored" and e.data["split"] == "train":
            cid = e.data["candidate_id"]
            train[cid] = e.data["mean"]
            if cid in parents and train[cid] <= train[parents[cid]]:
                lateral.append((i, cid))
    assert lateral
    for i, cid in lateral:
        follow = next(e.data for e in events[i:] if e.type == "iteration")
        assert follow["parent"] == cid
        assert follow["minibatch"][0].startswith("ant-")  # a seed the child broke comes first
    assert result.promoted and max(train.values()) == 1.0  # the line telling them apart
