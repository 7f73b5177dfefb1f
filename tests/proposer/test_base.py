"""The shared proposer base: one propose/merge path, usage booked on proposals and refusals."""

from __future__ import annotations

import pytest

from proposer import BaseProposer, MergeRequest
from proposer.base import Spent, Written
from proposer.brief import Brief
from schemas import ModelUsage, ProposalRejected, ProposerError
from tests.proposer.fakes import PARENT_PROMPT, banking_request, parent_view


class _Writer(BaseProposer[Spent]):
    """Writes ``text`` (or raises ``error``) and reports ``spend`` for each proposal."""

    def __init__(self, text: str, spend: ModelUsage, error: ProposerError | None = None) -> None:
        super().__init__(max_prompt_chars=2000)
        self.text, self.spend, self.error = text, spend, error
        self.briefs: list[Brief] = []

    def _meter(self) -> Spent:
        return Spent()

    def _cost_known(self, usage: ModelUsage) -> bool:
        return usage.cost_unknown == 0

    async def _write(self, meter: Spent, brief: Brief) -> Written:
        self.briefs.append(brief)
        meter.usage = self.spend
        if self.error is not None:
            raise self.error
        return Written({"system_prompt": self.text}, "because", "command")


def test_a_proposer_error_declares_its_reason_and_usage() -> None:
    plain = ProposerError("the endpoint is down")
    assert plain.reason == "error" and plain.usage == ModelUsage()
    assert str(plain) == "the endpoint is down"
    spent = ModelUsage(calls=2, input_tokens=30)
    refused = ProposalRejected("cut_off", "ran out of tokens", usage=spent)
    assert refused.reason == "cut_off" and refused.usage == spent
    assert str(refused) == "cut_off: ran out of tokens"


async def test_a_proposal_books_its_usage_and_its_diff() -> None:
    spend = ModelUsage(calls=1, input_tokens=100, output_tokens=20, cost_usd=0.01)
    writer = _Writer(PARENT_PROMPT + "\nPending top-ups are pending_top_up.", spend)
    proposal = await writer.propose(banking_request())
    assert proposal.usage == spend and writer.total_usage == spend
    assert proposal.mode == "command" and proposal.cost_known
    assert proposal.parents == ("parent0001",) and "+Pending top-ups" in proposal.diff
    await writer.aclose()  # nothing to release: a no-op


async def test_a_refusal_carries_what_it_spent_and_still_counts() -> None:
    spend = ModelUsage(calls=3, input_tokens=900)
    failing = _Writer("", spend, ProposerError("the model answered nothing"))
    with pytest.raises(ProposerError) as raised:
        await failing.propose(banking_request())
    assert raised.value.usage == spend and failing.total_usage == spend
    unchanged = _Writer(PARENT_PROMPT, spend)  # the guards refuse an unchanged text
    with pytest.raises(ProposalRejected) as guarded:
        await unchanged.propose(banking_request())
    assert guarded.value.reason == "unchanged" and guarded.value.usage == spend
    assert unchanged.total_usage == spend


async def test_a_merge_of_identical_candidates_is_refused_before_any_writing() -> None:
    writer = _Writer("anything", ModelUsage(calls=1))
    request = MergeRequest(
        program_description="",
        components=banking_request().components,
        a=parent_view(candidate_id="a"),
        b=parent_view(candidate_id="b"),  # the same texts under another id
    )
    with pytest.raises(ProposalRejected) as raised:
        await writer.merge(request)
    assert raised.value.reason == "unchanged" and raised.value.usage == ModelUsage()
    assert writer.briefs == [] and writer.total_usage == ModelUsage()
