"""Candidates: proposals stored, rejected, regated or replayed from the iteration log.

The unit tests drive ``Candidates`` over the recording fakes (``parts.wired``); the proposer
is a call the test writes. The whole run after them checks two answers with one text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from proposer import Proposal, ProposalRequest
from schemas import Event, ModelUsage, Origin, ProposalRejected
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import wired
from tests.optimizer.gepa.runs import LABELS, release_when_both_asked, whole_run


def _answer(
    text: str, parent: str, rationale: str = "add a label"
) -> Callable[[], Awaitable[Proposal]]:
    """A reflection call whose answer is the prompt ``text`` written on ``parent``."""

    async def call() -> Proposal:
        return Proposal(
            components={"system_prompt": text},
            rationale=rationale,
            usage=ModelUsage(),
            diff="",
            mode="text",
            parents=(parent,),
        )

    return call


async def _never() -> Proposal:
    raise AssertionError("the proposer was asked")


async def test_a_proposal_is_stored_logged_and_announced() -> None:
    w = wired()
    parent = await w.scored("- ant")
    made = await w.candidates.proposal(1, "mutation", (parent,), _answer("- ant\n- bee", parent))
    assert made is not None and made.parents == [parent]
    assert made.components == {"system_prompt": "- ant\n- bee"}
    assert w.workspace.candidates == [made] and w.state.candidates[made.candidate_id] == made
    assert w.ctx.gepa.proposals == {"1": made.candidate_id}
    assert [c["candidate_id"] for c in w.events.of("candidate")] == [made.candidate_id]


async def test_a_proposal_that_repeats_a_text_is_a_duplicate_that_made_nothing() -> None:
    w = wired()
    parent = await w.scored("- ant")
    await w.scored("- ant\n- bee", [parent])  # scored on train: settled, never regated
    call = _answer("- ant\n- bee", parent)
    assert await w.candidates.proposal(4, "mutation", (parent,), call) is None
    assert w.ctx.gepa.proposals == {"4": None}  # a resumed run replays that too
    (rejected,) = w.events.of("proposal_rejected")
    assert (rejected["iteration"], rejected["reason"]) == (4, "duplicate")
    assert w.ledger.repeats[parent] == 1
    assert w.workspace.candidates == [] and w.events.of("candidate") == []


async def test_a_refused_proposal_made_nothing() -> None:
    async def refused() -> Proposal:
        raise ProposalRejected("cut_off", "the answer ran out of tokens")

    w = wired()
    parent = await w.scored("- ant")
    assert await w.candidates.proposal(5, "mutation", (parent,), refused) is None
    assert w.ctx.gepa.proposals == {"5": None}
    (rejected,) = w.events.of("proposal_rejected")
    assert rejected["reason"] == "cut_off" and w.ledger.repeats[parent] == 0


async def test_a_twin_answer_written_while_the_first_is_stored_is_a_duplicate() -> None:
    w = wired(proposals_in_flight=2)
    parent = await w.scored("- ant")
    w.workspace.open.clear()  # the first answer's candidate is being stored
    first = asyncio.create_task(
        w.candidates.proposal(1, "mutation", (parent,), _answer("- ant\n- bee", parent))
    )
    await asyncio.wait_for(w.workspace.entered.wait(), 1)
    twin = w.candidates.proposal(2, "mutation", (parent,), _answer("- ant\n- bee", parent))
    assert await asyncio.wait_for(twin, 1) is None
    w.workspace.open.set()
    stored = await first
    assert stored is not None and w.workspace.candidates == [stored]
    assert [r["iteration"] for r in w.events.of("proposal_rejected")] == [2]


@pytest.mark.parametrize(("origin", "regated"), [("mutation", True), ("merge", False)])
async def test_a_mutation_that_writes_again_a_text_that_failed_its_gate_regates_it(
    origin: Origin, regated: bool
) -> None:
    w = wired()
    parent = await w.scored("- ant")
    failed = w.child("- ant\n- zzz", parent)
    assert not await w.gate.gate(1, failed, parent, ["ant-0", "bee-0"])
    assert failed.content_hash not in w.candidates.settled_hashes()  # it may be written again
    assert w.state.candidates[parent].content_hash in w.candidates.settled_hashes()
    made = await w.candidates.proposal(2, origin, (parent,), _answer("- ant\n- zzz", parent))
    assert (made is failed) == regated and (made is None) != regated
    assert w.ctx.gepa.proposals == {"2": failed.candidate_id if regated else None}
    regates = [e["candidate_id"] for e in w.events.of("regate")]
    assert regates == ([failed.candidate_id] if regated else [])
    assert w.workspace.candidates == []


async def test_an_iteration_in_the_log_is_replayed_without_asking_the_proposer() -> None:
    w = wired()
    parent = await w.scored("- ant")
    child = await w.scored("- ant\n- bee", [parent])
    w.ctx.gepa.proposals.update({"3": child, "4": None, "4s": child})
    assert (
        await w.candidates.proposal(3, "mutation", (parent,), _never) is w.state.candidates[child]
    )
    assert await w.candidates.proposal(4, "mutation", (parent,), _never) is None
    stack = {"system_prompt": "- ant\n- cat"}
    derived = await w.candidates.derive("4s", stack, (parent,), "stacked", "merge", 4)
    assert derived is w.state.candidates[child]
    assert w.events.events == [] and w.workspace.candidates == []


async def test_a_reflection_still_pending_when_the_search_stops_is_dropped_unlogged() -> None:
    w = wired()
    parent = await w.scored("- ant")
    asked = asyncio.Event()

    async def pending() -> Proposal:
        asked.set()
        await asyncio.Event().wait()  # never answered
        raise AssertionError("unreachable")

    writing = asyncio.create_task(w.candidates.proposal(1, "mutation", (parent,), pending))
    await asyncio.wait_for(asked.wait(), 1)
    w.ctx.halt("stopped by the test")
    assert await asyncio.wait_for(writing, 1) is None
    assert w.ctx.gepa.proposals == {}  # a resumed run asks again
    assert w.events.of("proposal_rejected") == []


async def test_a_key_the_model_quoted_in_its_rationale_is_not_stored() -> None:
    key = "sk-" + "a1b2" * 6
    w = wired()
    parent = await w.scored("- ant")
    call = _answer("- ant\n- bee", parent, rationale=f"tried with {key}")
    made = await w.candidates.proposal(1, "mutation", (parent,), call)
    assert made is not None and key not in made.rationale
    assert key not in w.workspace.candidates[0].rationale


async def test_two_answers_with_the_same_text_make_one_candidate_and_one_duplicate(
    tmp_path: Path,
) -> None:
    # Two proposals on the baseline answer at the same moment with the same text. The first
    # is stored; the second is the duplicate of a proposal written at the same time, however
    # the two answers interleave while the first is being stored.
    def same(request: ProposalRequest, n: int) -> str | None:
        text = request.parent.components["system_prompt"]
        return f"{text}\n- ant" if n <= 2 else None

    proposer = ScriptedProposer(script=same)
    releaser = release_when_both_asked(proposer)
    events: list[Event] = []
    await whole_run(
        tmp_path,
        RuleContainer(program(LABELS)),
        proposer,
        events,
        proposals_in_flight=2,
        patience=0,
        max_idle_iterations=4,
    )
    await asyncio.wait_for(releaser, 5)
    made = [
        e.data["iteration"] for e in events if e.type == "candidate" and e.data["iteration"] <= 2
    ]
    twins = [
        e.data["iteration"]
        for e in events
        if e.type == "proposal_rejected" and e.data["reason"] == "duplicate"
    ]
    assert len(made) == 1 and twins == [3 - made[0]]
