"""A real proposal (text mode) from the local Qwen2.5-Coder model behind llama.cpp's server.

A 0.5B model's answer can be rightly rejected: it often writes the block header and then
copies the request, or returns the text unchanged twice. Its output at temperature 0 also
differs between machines. So the test samples a few times (temperature 0, then seeded
sampling) and asserts properties every valid proposal has, not one exact text; it fails
when no attempt gives a valid candidate, or when anything other than a rejection goes wrong.
"""

from __future__ import annotations

import random

import pytest

from proposer import Proposal, Proposer, ProposerConfig
from proposer.guards import check_candidate
from schemas import ProposalRejected
from tests.proposer.fakes import PARENT_PROMPT, banking_evaluations, banking_request

# (temperature, seed) of each attempt, in order. On one machine about one 0.5B answer in
# four was a valid candidate (most others echo the request); 15 attempts all fail with a
# probability near 1%. A failed attempt costs ~15 s on a quiet machine, a valid one less.
ATTEMPTS = ((0.0, None), *((0.7, seed) for seed in range(1, 15)))
CAP = 3000


async def _propose(base_url: str, temperature: float, seed: int | None) -> Proposal:
    config = ProposerConfig(
        model="student",
        base_url=base_url,
        mode="text",
        # A block takes ~100 tokens and an answer cut off after it still counts; an echo of
        # the request runs to the cap, so a small cap makes a failed attempt cheap.
        max_tokens=300,
        temperature=temperature,
        seed=seed,
        evidence_token_budget=1200,
        max_prompt_chars=CAP,
        timeout_s=1200.0,  # slow when other llama.cpp servers share the 2 cores
        max_retries=0,
    )
    proposer = Proposer(config, rng=random.Random(0))
    try:
        return await proposer.propose(banking_request(evaluations=banking_evaluations(2, 1)))
    finally:
        await proposer.aclose()


@pytest.mark.local_model
async def test_local_model_writes_a_valid_different_candidate(local_llm_base_url: str) -> None:
    rejections = []
    for temperature, seed in ATTEMPTS:
        try:
            proposal = await _propose(local_llm_base_url, temperature, seed)
        except ProposalRejected as exc:  # anything else (connection, timeout) fails the test
            rejections.append(f"temperature {temperature}, seed {seed}: {exc}")
            continue
        break
    else:
        pytest.fail(
            f"no valid candidate in {len(ATTEMPTS)} attempts:\n" + "\n".join(rejections),
            pytrace=False,
        )
    new = proposal.components["system_prompt"]
    assert proposal.mode == "text"
    assert set(proposal.components) == {"system_prompt"}
    assert new.strip() and new != PARENT_PROMPT and len(new) <= CAP
    assert "<<<" not in new and ">>>" not in new and "<the complete new text" not in new
    # The proposal passed the guards inside propose(); check them again independently.
    check_candidate(
        proposal.components,
        bases=[{"system_prompt": PARENT_PROMPT}],
        targets=["system_prompt"],
        cap=CAP,
        existing_hashes=frozenset(),
    )
    assert proposal.rationale.strip()
    # One call, or two when the first answer was unchanged and got pushed back.
    assert proposal.usage.calls in (1, 2) and proposal.usage.output_tokens > 0
    assert proposal.usage.cost_usd == 0.0 and not proposal.cost_known
    assert proposal.diff.startswith("--- parent0001/system_prompt")
    assert proposal.parents == ("parent0001",)
