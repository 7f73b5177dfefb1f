"""The train stage: unproven deletions are held back, full marks stop the search."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.gepa.strategies.stop_condition import NOTHING_TO_FIX
from proposer import ProposalRequest
from tests.optimizer.gepa.parts import TRADE, lineage_state, search_for
from tests.optimizer.gepa.runs import drops_bee, without_bee

PARENT = {"ant-0": 0.0, "ant-1": 0.0, "bee-0": 1.0, "bee-1": 1.0}


@pytest.mark.parametrize(
    ("child_text", "child_scores", "gate", "unproven"),
    [
        ("- ant", {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 0.0, "bee-1": 0.0}, [], True),  # a tie
        ("- ant", {"ant-0": 1.0, "ant-1": 0.0, "bee-0": 0.0, "bee-1": 0.0}, [], True),  # worse
        # better by one seed (a lucky draw would do): it has not proved what it deleted
        ("- ant", {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 0.0}, [], True),
        # better by two seeds, one of them picked by its gate where the parent failed
        ("- ant", {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 1.0}, ["ant-0"], True),
        # better by two seeds its gate did not pick
        ("- ant", {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 1.0}, [], False),
        (
            "- ant\n- bee\n- cat",
            {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 0.0, "bee-1": 0.0},
            [],
            False,
        ),
    ],
)
async def test_a_child_that_only_deletes_text_must_prove_it_on_seeds_its_gate_did_not_pick(
    child_text: str, child_scores: dict[str, float], gate: list[str], unproven: bool
) -> None:
    # Deleting a line is nothing to build on, and never the best, unless the child beats its
    # parent by two seeds on train seeds its gate did not pick (those were picked where the
    # parent failed, and scored afresh for the child). An edit that adds is another matter.
    state, ids = lineage_state(
        {"parent": PARENT, "child": child_scores},
        {"child": ["parent"]},
        texts={"parent": "- ant\n- bee", "child": child_text},
    )
    state.minibatch[ids["child"]] = {s: child_scores[s] for s in gate}
    train = search_for(state)._train
    assert train.is_unproven_deletion(ids["child"], ids["parent"]) == unproven


async def test_an_unproven_deletion_is_never_the_best() -> None:
    # Its train mean is above its parent's, by one seed: the parent stays the best.
    state, ids = lineage_state(
        {"parent": PARENT, "child": {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 0.0}},
        {"child": ["parent"]},
        texts={"parent": "- ant\n- bee", "child": "- ant"},
    )
    await search_for(state)._train.full_train(ids["child"], ids["parent"])
    assert ids["child"] in state.held_back
    assert state.best() == (ids["parent"], 0.5)


async def test_an_unproven_deletion_with_full_marks_stops_the_search_and_names_the_best() -> None:
    # Its gate picked the parent's two slips: on the other seeds it scored like the parent.
    # Nothing can score more on train, so the search stops; the reason says who stays best.
    full = {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 1.0}
    state, ids = lineage_state(
        {"parent": PARENT, "child": full},
        {"child": ["parent"]},
        texts={"parent": "- ant\n- bee\n- bee", "child": "- ant\n- bee"},
    )
    state.minibatch[ids["child"]] = {"ant-0": 1.0, "ant-1": 1.0}
    search = search_for(state)
    await search._train.full_train(ids["child"], ids["parent"])
    assert search._ctx.solved
    assert search._ctx.stop == (
        f"{ids['child']} scores full marks on every train seed (it only dropped text and did "
        f"not prove it: {ids['parent']} stays the best)"
    )


async def test_a_child_with_full_marks_stops_the_search() -> None:
    full = {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 1.0, "bee-1": 1.0}
    state, ids = lineage_state({"parent": PARENT, "child": full}, {"child": ["parent"]})
    search = search_for(state)
    await search._train.full_train(ids["child"], ids["parent"])
    assert search._ctx.stop == f"{ids['child']} scores full marks on every train seed"
    assert state.best() == (ids["child"], 1.0)


async def test_a_lateral_child_is_queued_and_a_merge_becomes_due() -> None:
    state, ids = lineage_state(TRADE, {"child": ["parent"]}, texts={"child": "- ant\n- cat"})
    search = search_for(state)
    assert not search._train.accepted_since_merge
    await search._train.full_train(ids["child"], ids["parent"])
    assert search._train.is_lateral(ids["child"], ids["parent"])
    assert search._train.accepted_since_merge
    assert search._followups.next() == (ids["child"], ["bee-0", "bee-1"])
    assert search._ctx.stop is None


async def test_a_child_that_only_dropped_a_line_and_tied_its_parent_is_not_built_on(
    tmp_path: Path,
) -> None:
    # The baseline has every label (``drops_bee``). The first answer drops the bee line:
    # that child's student slips on nothing, so it passes its gate (on the two slips) and
    # ties the baseline on train. Built on, it would be shown bee's seeds and write back the
    # line it dropped. It is not: the baseline's failures are asked again, answered with
    # nothing new, and the search stops with the baseline as the best.
    def answer(request: ProposalRequest, n: int) -> str | None:
        return without_bee(request) if n == 1 else None

    result, proposer, _, train = await drops_bee(tmp_path, ["ant", "bee", "cat"], answer)
    baseline, dropped = list(train)[:2]
    assert train[dropped] == train[baseline]  # a trade: ant-1 and cat-1 for bee-0 and bee-1
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert len(proposer.seen) == 2
    assert {r.parent.candidate_id for r in proposer.seen} == {baseline}
