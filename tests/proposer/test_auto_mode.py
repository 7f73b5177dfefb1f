"""Auto mode: agent first, text mode for endpoints that do not call tools, decision remembered."""

from __future__ import annotations

import httpx
import pytest

from proposer import ToolsUnsupported
from tests.proposer.fakes import (
    banking_request,
    completion,
    make_proposer,
    scripted,
    text_answer,
    tool_call,
)

NEW = "Classify the banking intent; delivery-time questions are card_delivery_estimate."


async def test_no_tool_calls_on_the_first_step_switches_to_text_mode(api) -> None:
    script = scripted(
        api,
        completion("Sure! Here is a better prompt: ...", prompt_tokens=700, completion_tokens=50),
        completion(text_answer(NEW), prompt_tokens=900, completion_tokens=80),
        completion(text_answer(NEW + " Be brief."), prompt_tokens=900, completion_tokens=80),
    )
    proposer = make_proposer()
    assert proposer.mode is None
    first = await proposer.propose(banking_request())
    assert first.mode == "text" and first.components["system_prompt"] == NEW
    assert proposer.mode == "text"
    assert "tools" in script.requests[0] and "tools" not in script.requests[1]
    # The failed agent step is part of this proposal's cost.
    assert (first.usage.calls, first.usage.input_tokens, first.usage.output_tokens) == (
        2,
        1600,
        130,
    )

    second = await proposer.propose(banking_request())
    assert second.mode == "text" and len(script.requests) == 3
    assert "tools" not in script.requests[2]  # remembered: no agent attempt
    assert proposer.total_usage.calls == 3


async def test_a_4xx_rejecting_tools_switches_to_text_mode(api) -> None:
    error = {"error": {"message": "this model does not support tools"}}
    script = scripted(api, httpx.Response(400, json=error), completion(text_answer(NEW)))
    proposer = make_proposer()
    proposal = await proposer.propose(banking_request())
    assert proposal.mode == "text" and proposer.mode == "text"
    assert len(script.requests) == 2


async def test_auto_mode_keeps_agent_mode_once_it_worked(api) -> None:
    scripted(
        api,
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "r"})]),
        # A later plain answer is no longer a reason to switch: the model gets a reminder.
        completion("Let me think."),
        completion(
            tool_calls=[
                tool_call("rewrite_component", {"name": "system_prompt", "text": NEW + "!"})
            ]
        ),
        completion(tool_calls=[tool_call("submit", {"rationale": "r2"})]),
    )
    proposer = make_proposer()
    assert (await proposer.propose(banking_request())).mode == "agent"
    assert proposer.mode == "agent"
    second = await proposer.propose(banking_request())
    assert second.mode == "agent" and second.rationale == "r2"


async def test_explicit_agent_mode_does_not_fall_back(api) -> None:
    error = {"error": {"message": "tools are not supported"}}
    script = scripted(api, httpx.Response(400, json=error))
    proposer = make_proposer(mode="agent")
    with pytest.raises(ToolsUnsupported) as info:
        await proposer.propose(banking_request())
    assert proposer.mode == "agent" and len(script.requests) == 1
    assert info.value.usage.calls == 0
