"""Usage accounting: tokens summed across steps, cost from the price table."""

from __future__ import annotations

import pytest
import respx

from proposer import Proposer, ProposerConfig
from tests.proposer.fakes import (
    Script,
    banking_request,
    completion,
    make_proposer,
    scripted,
    tool_call,
)

NEW = "Classify the banking intent; delivery-time questions are card_delivery_estimate."


async def test_tokens_are_summed_across_agent_steps(api) -> None:
    scripted(
        api,
        completion(
            tool_calls=[tool_call("list_failures", {})], prompt_tokens=1000, completion_tokens=30
        ),
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})],
            prompt_tokens=2500,
            completion_tokens=120,
        ),
        completion(
            tool_calls=[tool_call("submit", {"rationale": "r"})],
            prompt_tokens=2700,
            completion_tokens=15,
        ),
    )
    proposer = make_proposer(mode="agent")
    proposal = await proposer.propose(banking_request())
    assert (proposal.usage.calls, proposal.usage.input_tokens, proposal.usage.output_tokens) == (
        3,
        6200,
        165,
    )
    assert proposal.usage.cost_usd == 0.0 and not proposal.cost_known and not proposer.cost_known
    assert proposer.total_usage == proposal.usage


async def test_cost_comes_from_the_price_table(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    script = Script(
        completion(
            tool_calls=[tool_call("rewrite_component", {"name": "system_prompt", "text": NEW})],
            prompt_tokens=10_000,
            completion_tokens=1_000,
        ),
        completion(
            tool_calls=[tool_call("submit", {"rationale": "r"})],
            prompt_tokens=12_000,
            completion_tokens=500,
        ),
    )
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(side_effect=script)
        proposer = Proposer(ProposerConfig(model="gpt-4.1", mode="agent", max_retries=0))
        proposal = await proposer.propose(banking_request())
        await proposer.aclose()
    # gpt-4.1: $2 in, $8 out per million tokens.
    assert proposal.usage.cost_usd == pytest.approx(22_000 * 2e-6 + 1_500 * 8e-6)
    assert proposal.cost_known and proposer.total_usage.cost_usd == proposal.usage.cost_usd
