"""The acceptance pipeline: gather, drop an edit that adds nothing, stack, rebase, gate, train."""

from __future__ import annotations

from pathlib import Path

from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, on_the_baseline, whole_run, with_ant


async def test_a_child_waits_for_siblings_asked_with_it_so_all_are_stacked_at_once(
    tmp_path: Path,
) -> None:
    # Three proposals asked at once answer some seconds later, the first 0.1 s before the
    # others (as parallel calls to a hosted model do): the first must not be gated alone.
    # It waits a quarter of its 4 s writing time (1 s) for them, so a loaded machine has 0.9 s
    # to deliver the 0.1 s (with a 1 s writing time the margin was 0.15 s).
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
