"""Agent mode: the tool-calling loop against a scripted OpenAI-compatible endpoint."""

from __future__ import annotations

import json

import pytest

from proposer import CandidateView
from schemas import ProposalRejected
from tests.proposer.fakes import (
    PARENT_PROMPT,
    banking_request,
    completion,
    make_proposer,
    scripted,
    tool_call,
)

OLD = "Return the best matching label."
NEW = "Return exactly one label. A question about *how long* delivery takes is card_delivery_estimate."


def tool_results(request: dict) -> list[str]:
    """The tool messages sent back to the model in one request."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_read_edit_submit_over_several_steps(api) -> None:
    script = scripted(
        api,
        completion(
            tool_calls=[
                tool_call("list_failures", {}),
                tool_call("read_trace", {"seed": "b77-train-0001"}),
            ]
        ),
        completion(
            tool_calls=[
                tool_call("edit_component", {"name": "system_prompt", "old": OLD, "new": NEW})
            ]
        ),
        completion(tool_calls=[tool_call("read_components", {})]),
        completion(
            tool_calls=[tool_call("submit", {"rationale": "Delivery-time questions were misread."})]
        ),
    )
    proposer = make_proposer(mode="agent")
    proposal = await proposer.propose(banking_request())

    assert proposal.mode == "agent"
    assert proposal.components["system_prompt"] == PARENT_PROMPT.replace(OLD, NEW)
    assert proposal.rationale == "Delivery-time questions were misread."
    assert proposal.parents == ("parent0001",)
    first_line = PARENT_PROMPT.splitlines()[0]
    assert f"\n-{first_line}\n+{first_line.replace(OLD, NEW)}\n" in proposal.diff
    assert "--- parent0001/system_prompt\n+++ new/system_prompt" in proposal.diff
    assert len(script.requests) == 4
    # Every request offers the tools; results of step 1 were sent back in step 2.
    assert all(
        {t["function"]["name"] for t in r["tools"]} >= {"submit", "edit_component"}
        for r in script.requests
    )
    first_results = tool_results(script.requests[1])
    assert "predicted card_arrival, expected card_delivery_estimate" in first_results[0]
    assert "[user] My top-up is still showing as pending, why?" in first_results[1]  # the trace
    assert tool_results(script.requests[2])[-1].startswith("ok: system_prompt now has")
    assert "edited" in tool_results(script.requests[3])[-1]
    # The assistant's tool calls are echoed back before their results.
    echoed = [m for m in script.requests[1]["messages"] if m["role"] == "assistant"]
    assert echoed[0]["tool_calls"][0]["function"]["name"] == "list_failures"


async def test_first_message_shows_components_and_failure_summary(api) -> None:
    script = scripted(
        api,
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "r"})]),
    )
    await make_proposer(mode="agent").propose(banking_request())
    system, user = script.requests[0]["messages"][:2]
    assert "submit(rationale)" in system["content"] and "6,000 characters" in system["content"]
    assert PARENT_PROMPT in user["content"]
    assert (
        "b77-train-0000 (reward 0.00): predicted card_arrival, expected card_delivery_estimate"
        in user["content"]
    )
    assert "3 failures and 1 successes in total" in user["content"]


async def test_bad_arguments_come_back_as_errors_and_the_loop_continues(api) -> None:
    script = scripted(
        api,
        completion(
            tool_calls=[
                tool_call("edit_component", '{"name": "system_prompt", "old": '),  # invalid JSON
                tool_call("delete_everything", {}),
                tool_call("rewrite_component", {"name": "user_prompt", "text": "x"}),
                tool_call(
                    "edit_component",
                    {"name": "system_prompt", "old": "not in the prompt", "new": "y"},
                ),
                tool_call("edit_component", {"name": "system_prompt", "old": "card", "new": "y"}),
                tool_call("read_trace", {"seed": "nope"}),
                tool_call("read_candidate", {"candidate_id": "ghost"}),
                tool_call("rewrite_component", {"name": "system_prompt"}),
            ]
        ),
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "fixed"})]),
    )
    proposal = await make_proposer(mode="agent").propose(banking_request())
    assert proposal.components["system_prompt"] == NEW
    errors = tool_results(script.requests[1])
    assert len(errors) == 8 and all(e.startswith("error:") for e in errors)
    assert "not valid JSON" in errors[0]
    assert "unknown tool 'delete_everything'" in errors[1] and "submit" in errors[1]
    assert "unknown" in errors[2] and "you can change: system_prompt" in errors[2]
    assert "not found" in errors[3]
    assert "found" in errors[4] and "times" in errors[4]
    assert "no rollout for seed 'nope'" in errors[5] and "b77-train-0000" in errors[5]
    assert "unknown candidate 'ghost'" in errors[6]
    assert "needs string argument(s) text" in errors[7]


async def test_non_target_components_are_read_only(api) -> None:
    parent = CandidateView("p2", {"system_prompt": PARENT_PROMPT, "few_shots": "Q: a\nA: b"})
    script = scripted(
        api,
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "few_shots", "text": "hacked"})]
        ),
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "r"})]),
    )
    request = banking_request(parent=parent, target_components=("system_prompt",))
    proposal = await make_proposer(mode="agent").propose(request)
    assert "read-only in this proposal" in tool_results(script.requests[1])[0]
    assert proposal.components == {"system_prompt": NEW, "few_shots": "Q: a\nA: b"}


async def test_step_limit_without_submit_is_rejected(api) -> None:
    script = scripted(
        api, *[completion(tool_calls=[tool_call("list_failures", {})]) for _ in range(3)]
    )
    proposer = make_proposer(mode="agent", max_steps=3)
    with pytest.raises(ProposalRejected) as info:
        await proposer.propose(banking_request())
    assert info.value.reason == "no_submission"
    assert len(script.requests) == 3
    # The model was told before its last turn.
    assert "last turn" in script.requests[2]["messages"][-1]["content"]
    assert info.value.usage.calls == 3


async def test_total_token_budget_stops_the_loop(api) -> None:
    script = scripted(
        api,
        *[
            completion(tool_calls=[tool_call("list_failures", {})], prompt_tokens=900)
            for _ in range(5)
        ],
    )
    proposer = make_proposer(mode="agent", max_total_tokens=2000)
    with pytest.raises(ProposalRejected, match="token budget of 2,000") as info:
        await proposer.propose(banking_request())
    assert info.value.reason == "no_submission"
    assert len(script.requests) == 3  # 920 + 920 < 2000, 2760 >= 2000 stops before a 4th


async def test_submit_of_an_unchanged_draft_is_pushed_back_once(api) -> None:
    script = scripted(
        api,
        completion(tool_calls=[tool_call("submit", {"rationale": "looks fine"})]),
        completion(tool_calls=[tool_call("submit", {"rationale": "still fine"})]),
    )
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="agent").propose(banking_request())
    assert "identical to a parent" in tool_results(script.requests[1])[0]
    assert info.value.reason == "unchanged"


async def test_a_cut_off_step_is_rejected(api) -> None:
    scripted(
        api,
        completion(
            tool_calls=[
                tool_call("rewrite_component", '{"name": "system_prompt", "text": "Classify')
            ],
            finish_reason="length",
        ),
    )
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="agent").propose(banking_request())
    assert info.value.reason == "cut_off"


async def test_explicit_agent_mode_reminds_a_model_that_does_not_call_tools(api) -> None:
    script = scripted(
        api,
        completion("I think the prompt should mention delivery times."),
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "r"})]),
    )
    proposal = await make_proposer(mode="agent").propose(banking_request())
    assert proposal.mode == "agent"
    assert script.requests[1]["messages"][-1] == {
        "role": "user",
        "content": "Use the tools: edit the draft, then call submit(rationale).",
    }
    assert "tools" in script.requests[1]


async def test_frontier_tools_show_other_candidates(api) -> None:
    other = CandidateView(
        "cand-b",
        {"system_prompt": "Pick one label."},
        parents=("parent0001",),
        scores={"s1": 1.0, "s2": 0.0},
        wins=("s1",),
        diff_from_parent="-Classify\n+Pick one label.",
    )
    script = scripted(
        api,
        completion(
            tool_calls=[
                tool_call("list_frontier", {}),
                tool_call("read_candidate", {"candidate_id": "cand-b"}),
                tool_call("diff", {"candidate_id": "cand-b"}),
            ]
        ),
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": json.dumps("r")})]),
    )
    await make_proposer(mode="agent").propose(banking_request(frontier=(parent_like(), other)))
    frontier, candidate, diff = tool_results(script.requests[1])
    assert "cand-b: parents ['parent0001'], mean score 0.500, wins 1 seeds: s1" in frontier
    assert "parent0001 (parent)" in frontier
    assert "Pick one label." in candidate
    assert diff == "-Classify\n+Pick one label."


def parent_like() -> CandidateView:
    return CandidateView(
        "parent0001", {"system_prompt": PARENT_PROMPT}, wins=("s2",), scores={"s2": 1.0}
    )
