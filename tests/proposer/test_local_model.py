"""A real proposal (text mode) from the local Qwen2.5-Coder model behind llama.cpp's server."""

from __future__ import annotations

import random

import pytest

from proposer import Proposer, ProposerConfig
from proposer.guards import check_candidate
from tests.proposer.fakes import PARENT_PROMPT, banking_evaluations, banking_request


@pytest.mark.local_model
async def test_local_model_writes_a_valid_different_candidate(local_llm_base_url: str) -> None:
    config = ProposerConfig(
        model="student",
        base_url=local_llm_base_url,
        mode="text",
        max_tokens=700,
        temperature=0.0,  # llama.cpp is deterministic at temperature 0
        evidence_token_budget=1200,
        max_prompt_chars=3000,
        timeout_s=1200.0,  # slow when other llama.cpp servers share the 2 cores
        max_retries=0,
    )
    proposer = Proposer(config, rng=random.Random(0))
    request = banking_request(evaluations=banking_evaluations(4, 2))
    try:
        proposal = await proposer.propose(request)
    finally:
        await proposer.aclose()
    new = proposal.components["system_prompt"]
    assert proposal.mode == "text"
    assert new.strip() and new != PARENT_PROMPT
    # The proposal passed the guards inside propose(); check them again independently.
    check_candidate(
        proposal.components,
        bases=[{"system_prompt": PARENT_PROMPT}],
        targets=["system_prompt"],
        cap=3000,
        existing_hashes=frozenset(),
    )
    assert proposal.usage.calls == 1 and proposal.usage.output_tokens > 0
    assert proposal.usage.cost_usd == 0.0 and not proposal.cost_known
    assert proposal.diff.startswith("--- parent0001/system_prompt")
