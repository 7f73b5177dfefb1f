"""Candidates: proposals stored, rejected, regated or replayed from the iteration log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from proposer import ProposalRequest
from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, release_when_both_asked, whole_run


async def test_two_answers_with_the_same_text_make_one_candidate_and_one_duplicate(
    tmp_path: Path,
) -> None:
    # Two proposals on the baseline answer at the same moment with the same text. The first
    # is stored; the second is the duplicate of a proposal written at the same time, however
    # the two answers interleave while the first is being stored (they used to be stored
    # twice as one candidate, or not, by timing, and the second's failures counted as
    # answered or as found barren accordingly).
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
