"""The acceptance pipeline: gather, drop an edit that adds nothing, stack, rebase, gate, train.

The unit tests drive the ``AcceptancePipeline`` over the recording fakes (``parts.wired``): a
seed ``<label>-<i>`` passes when the prompt lists the label. The whole runs after them check
the pipeline inside the search.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from optimizer.gepa.ledger import failure_kind
from schemas import Event, WorkspaceError
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import wired
from tests.optimizer.gepa.runs import LABELS, on_the_baseline, whole_run, with_ant


@pytest.mark.parametrize("with_sibling", [True, False])
async def test_an_edit_that_adds_nothing_is_dropped_only_beside_a_sibling_that_adds(
    with_sibling: bool,
) -> None:
    w = wired()
    base = await w.scored("- ant\n- bee")
    sibling = w.waiting(1, "- ant\n- bee\n- cat", base) if with_sibling else None
    dropper = w.waiting(2, "- ant", base, minibatch=["bee-0", "cat-0"])
    await w.pipeline.accept(dropper, None, None)
    dropped = dropper.child.candidate_id
    assert [s["candidate_id"] for s in w.events.of("skipped")] == ([dropped] if sibling else [])
    assert [g["candidate_id"] for g in w.events.of("gate")] == ([] if sibling else [dropped])
    assert w.room.children == ([sibling] if sibling else [])  # the dropper left the room


@pytest.mark.parametrize("adds", [True, False])
async def test_the_failures_a_child_was_shown_stay_taken_while_it_is_accepted_in_the_background(
    adds: bool,
) -> None:
    # Its edit may fix any of them, so the next proposals are shown others; an edit that adds
    # nothing is unlikely to, and leaves them to the next proposals.
    w = wired(proposals_in_flight=2)
    base = await w.scored("- ant\n- bee")
    await w.ledger.learn_kinds(base)
    text = "- ant\n- bee\n- cat" if adds else "- ant"
    entry = w.waiting(1, text, base, minibatch=["ant-0", "cat-0"], context=["cow-0"])
    w.pipeline.accept_in_background(entry, None, None)
    kinds = {failure_kind(s, f"expected {s[:3]}") for s in ("cat-0", "cow-0")}
    assert set(+w.ledger.taken) == ({"cat-0", "cow-0", *kinds} if adds else set())
    assert len(w.pipeline.pending) == 1
    await asyncio.gather(*w.pipeline.pending)
    assert not +w.ledger.taken and not w.pipeline.pending
    assert (entry.child.candidate_id in w.state.train) == adds  # the fix was accepted


async def test_a_child_accepted_in_the_background_past_the_budget_stops_the_search() -> None:
    w = wired(proposals_in_flight=2, idle=2)
    base = await w.scored("- ant")
    w.queue.budget.max_calls = w.queue.budget.paid + 1
    entry = w.waiting(1, "- ant\n- bee", base, minibatch=["ant-0", "bee-0"])
    w.pipeline.accept_in_background(entry, None, None)
    await asyncio.gather(*w.pipeline.pending)
    assert w.ctx.stop == "metric-call budget reached: 2 more rollouts needed, 1 left for search"
    assert not +w.ledger.taken


async def test_a_background_acceptance_that_fails_stops_the_search_and_keeps_the_error() -> None:
    # A failure other than the budget (the store went away, say) is not lost with its task:
    # the search stops and raises it once its workers are back.
    w = wired(proposals_in_flight=2)
    base = await w.scored("- ant")
    failure = WorkspaceError("writing the workspace failed: disk full")

    async def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise failure

    w.queue.evaluate = broken  # type: ignore[method-assign]
    entry = w.waiting(1, "- ant\n- bee", base, minibatch=["ant-0", "bee-0"])
    w.pipeline.accept_in_background(entry, None, None)
    await asyncio.wait(set(w.pipeline.pending))
    assert w.pipeline.errors == [failure] and not w.pipeline.pending
    assert w.ctx.stop == "accepting a child failed: writing the workspace failed: disk full"
    assert not +w.ledger.taken


async def test_a_child_whose_parent_was_replaced_as_the_best_is_gated_rebased_on_the_new_best() -> (
    None
):
    w = wired()
    base = await w.scored("- ant")
    entry = w.waiting(1, "- ant\n- cat", base, minibatch=["cat-0", "cow-0"])
    best = await w.scored("- ant\n- bee", [base])  # a sibling's child, accepted meanwhile
    await w.pipeline.accept(entry, None, None)
    (rebase,) = w.events.of("rebase")
    rebased = rebase["rebased"]
    assert w.state.candidates[rebased].components["system_prompt"] == "- ant\n- bee\n- cat"
    (gate,) = w.events.of("gate")
    assert (gate["candidate_id"], gate["parent"], gate["accepted"]) == (rebased, best, True)
    assert rebased in w.state.train
    assert entry.child.candidate_id not in {*w.state.train, *w.state.minibatch}


async def test_a_child_whose_edit_conflicts_with_the_new_best_is_dropped_ungated() -> None:
    w = wired()
    base = await w.scored("Label it.\n- ant")
    entry = w.waiting(1, "Name the label.\n- ant\n- cat", base, minibatch=["cat-0", "cow-0"])
    await w.scored("Say the label.\n- ant\n- bee", [base])
    await w.pipeline.accept(entry, None, None)
    (rebase,) = w.events.of("rebase")
    assert rebase["reason"] == "conflict" and rebase["dropped"]
    assert w.events.of("gate") == [] and w.queue.seeds_sent(entry.child.candidate_id) == []


async def test_a_child_waits_for_siblings_asked_with_it_so_all_are_stacked_at_once(
    tmp_path: Path,
) -> None:
    # Three proposals asked at once answer some seconds later, the first 0.1 s before the
    # others (as parallel calls to a hosted model do): the first must not be gated alone.
    # It waits a quarter of its 4 s writing time (1 s) for them, so a loaded machine has 0.9 s
    # to deliver the 0.1 s.
    events = await on_the_baseline(tmp_path, RuleContainer(program(LABELS)), delays=(4.0, 0.1, 0.0))
    children = [e.data["candidate_id"] for e in events if e.type == "candidate"][:3]
    stacks = [e.data for e in events if e.type == "stack"]
    assert stacks and sorted(stacks[0]["children"]) == sorted(children)
    gated = [e.data["candidate_id"] for e in events if e.type == "gate"]
    assert not set(children) & set(gated)


async def test_an_edit_that_adds_nothing_is_dropped_when_written_with_edits_that_do(
    tmp_path: Path,
) -> None:
    # Three children written at once on the "- ant" baseline: two add a label each, the
    # second drops ant and adds nothing. Stacked, it could only break ant's seeds, and
    # finding that would take a round of rollouts and a restack while the writers wait. The
    # stack is the other two's edits, judged at once with no blame; the dropper is dropped.
    events = await on_the_baseline(
        tmp_path,
        RuleContainer(with_ant(LABELS)),
        delays=(0.5, 0.0, 0.0),
        pick=lambda labels, n: labels[0],
        drops=frozenset({2}),
        config={"concurrency": 4},
    )
    first, dropper, third = [e.data["candidate_id"] for e in events if e.type == "candidate"][:3]
    assert not [e for e in events if e.type == "blame"]
    stack = next(e.data for e in events if e.type == "stack")
    assert sorted(stack["children"]) == sorted([first, third])
    gate = next(e.data for e in events if e.type == "gate")
    assert gate["candidate_id"] == stack["candidate_id"] and gate["accepted"]
    skipped = next(e.data for e in events if e.type == "skipped")
    assert skipped["candidate_id"] == dropper and "adds nothing" in skipped["reason"]
    touched = {e.data.get("candidate_id") for e in events if e.type in ("gate", "rebase")}
    assert dropper not in touched


async def test_an_edit_that_adds_nothing_written_alone_is_gated(tmp_path: Path) -> None:
    # The same answer with no sibling: a deletion may fix something, so it is gated.
    container, proposer = RuleContainer(with_ant(LABELS)), ScriptedProposer(drops=frozenset({1}))
    events: list[Event] = []
    await whole_run(tmp_path, container, proposer, events, proposals_in_flight=1)
    dropper = next(e.data for e in events if e.type == "candidate")["candidate_id"]
    gate = next(e.data for e in events if e.type == "gate")
    assert gate["candidate_id"] == dropper and not gate["accepted"]
    assert not [e for e in events if e.type == "skipped" and "adds nothing" in e.data["reason"]]
