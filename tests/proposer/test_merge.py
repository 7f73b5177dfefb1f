"""Merge proposals: one candidate from two with complementary wins."""

from __future__ import annotations

import pytest

from proposer import CandidateView, MergeRequest
from schemas import ProposalRejected
from tests.proposer.fakes import (
    SPECS,
    banking_evaluations,
    completion,
    make_proposer,
    rollout,
    scripted,
    text_answer,
    tool_call,
)

A_TEXT = "Classify the intent. Delivery *time* questions are card_delivery_estimate."
B_TEXT = "Classify the intent. A top-up still in progress is pending_top_up, not top_up_failed."
MERGED = (
    "Classify the intent. Delivery *time* questions are card_delivery_estimate. "
    "A top-up still in progress is pending_top_up."
)


def merge_request(**overrides) -> MergeRequest:
    a = CandidateView(
        "cand-a", {"system_prompt": A_TEXT}, scores={"s1": 1.0, "s2": 0.0}, wins=("s1",)
    )
    b = CandidateView(
        "cand-b", {"system_prompt": B_TEXT}, scores={"s1": 0.0, "s2": 1.0}, wins=("s2",)
    )
    values = {
        "program_description": "Banking77 intent classification.",
        "components": SPECS,
        "a": a,
        "b": b,
        "evaluations_a": (
            rollout("s2", "Top up pending for an hour", "top_up_failed", "pending_top_up", A_TEXT),
        ),
        "evaluations_b": (
            rollout(
                "s1", "When does my card arrive?", "card_arrival", "card_delivery_estimate", B_TEXT
            ),
        ),
    }
    values.update(overrides)
    return MergeRequest(**values)


async def test_text_merge_shows_both_candidates_and_their_wins(api) -> None:
    script = scripted(api, completion(text_answer(MERGED, "Kept both distinctions.")))
    proposal = await make_proposer(mode="text").merge(merge_request())
    assert proposal.components == {"system_prompt": MERGED}
    assert proposal.parents == ("cand-a", "cand-b")
    assert set(proposal.diffs) == {"cand-a", "cand-b"}
    assert (
        "--- cand-a/system_prompt" in proposal.diff and "--- cand-b/system_prompt" in proposal.diff
    )
    user = script.requests[0]["messages"][1]["content"]
    assert A_TEXT in user and B_TEXT in user
    assert "| s1 | 1.00 | 0.00 | A |" in user and "| s2 | 0.00 | 1.00 | B |" in user
    assert (
        "# Rollouts of candidate A (cand-a)" in user
        and "# Rollouts of candidate B (cand-b)" in user
    )
    assert "predicted top_up_failed, expected pending_top_up" in user
    assert "B's version" in user
    assert "Do not simply concatenate" in user


async def test_agent_merge_edits_a_draft_that_starts_as_a(api) -> None:
    script = scripted(
        api,
        completion(
            tool_calls=[
                tool_call("read_candidate", {"candidate_id": "cand-b"}),
                tool_call("read_trace", {"seed": "B:s1"}),
            ]
        ),
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": MERGED})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "merged"})]),
    )
    proposal = await make_proposer(mode="agent").merge(merge_request())
    assert proposal.mode == "agent" and proposal.components == {"system_prompt": MERGED}
    first = script.requests[0]["messages"][1]["content"]
    assert "The draft starts as a copy of A" in first and B_TEXT in first
    candidate, trace = [m["content"] for m in script.requests[1]["messages"] if m["role"] == "tool"]
    assert B_TEXT in candidate
    assert "When does my card arrive?" in trace


async def test_merge_that_returns_one_of_the_parents_is_rejected(api) -> None:
    scripted(api, completion(text_answer(B_TEXT)))
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").merge(merge_request())
    assert info.value.reason == "unchanged"


async def test_identical_candidates_cannot_be_merged(api) -> None:
    same = CandidateView("cand-c", {"system_prompt": A_TEXT})
    script = scripted(api)
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").merge(merge_request(b=same))
    assert info.value.reason == "unchanged"
    assert script.requests == []


async def test_merge_evidence_is_split_between_the_two(api) -> None:
    many = banking_evaluations(6, 0)
    script = scripted(api, completion(text_answer(MERGED)))
    proposer = make_proposer(mode="text", evidence_token_budget=300)
    await proposer.merge(merge_request(evaluations_a=many, evaluations_b=many))
    user = script.requests[0]["messages"][1]["content"]
    assert user.count("more failures not shown") == 2
