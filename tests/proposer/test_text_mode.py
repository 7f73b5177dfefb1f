"""Text mode: the one-request protocol and the parsing of its answer."""

from __future__ import annotations

import pytest

from proposer import CandidateView, ComponentSpec
from proposer.textmode import parse_reply
from schemas import ProposalRejected
from tests.proposer.fakes import (
    PARENT_PROMPT,
    banking_request,
    completion,
    make_proposer,
    scripted,
    text_answer,
)

NEW = "Classify the banking intent. Questions about delivery *time* are card_delivery_estimate."


async def test_well_formed_answer_becomes_the_candidate(api) -> None:
    script = scripted(api, completion(text_answer(NEW, "Split delivery time from arrival.")))
    proposal = await make_proposer(mode="text").propose(banking_request())
    assert proposal.mode == "text"
    assert proposal.components == {"system_prompt": NEW}
    assert proposal.rationale == "Split delivery time from arrival."
    assert "+" + NEW in proposal.diff
    request = script.requests[0]
    assert "tools" not in request
    assert request["model"] == "reflector" and request["max_tokens"] == 2048
    user = request["messages"][1]["content"]
    # The evidence: component with kind and purpose, the input from the trace, output, feedback.
    assert "Component `system_prompt` (kind: prompt" in user
    assert "Purpose: System prompt of the intent classifier." in user
    assert PARENT_PROMPT in user
    assert "Input:\nHow long does it take for a new card to get here?" in user
    assert "Student output:\ncard_arrival" in user
    assert "Verifier feedback:\npredicted card_arrival, expected card_delivery_estimate" in user
    assert (
        "## Successes (1: behaviour to keep)" in user
        and "What is today's euro exchange rate?" in user
    )
    assert "<<<COMPONENT system_prompt" in user and "RATIONALE:" in user
    assert "at most 6,000 characters" in user
    assert "generalize" in request["messages"][0]["content"]


async def test_missing_block_is_rejected(api) -> None:
    scripted(api, completion("I would make the prompt more specific about delivery."))
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").propose(banking_request())
    assert info.value.reason == "no_submission"


async def test_cut_off_answer_is_rejected(api) -> None:
    scripted(
        api, completion("<<<COMPONENT system_prompt\nClassify the banking", finish_reason="length")
    )
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").propose(banking_request())
    assert info.value.reason == "cut_off"


def test_parse_several_blocks_and_last_repeat_wins() -> None:
    content = (
        "Thinking...\n<<<COMPONENT a\nfirst draft\n>>>\n<<<COMPONENT b\nB text\n>>>\n"
        "<<<COMPONENT a\nfinal A\n>>>\nRATIONALE: both changed\n"
    )
    found, rationale = parse_reply(content, ("a", "b"))
    assert found == {"a": "final A", "b": "B text"}
    assert rationale == "both changed"


def test_parse_is_lenient_about_small_model_mistakes() -> None:
    # No closing marker, the text fenced inside the block, rationale right after.
    content = (
        "<<<COMPONENT system_prompt>>>\n```text\nNew prompt.\nLine two.\n```\nRATIONALE: clearer"
    )
    found, rationale = parse_reply(content, ("system_prompt",))
    assert found == {"system_prompt": "New prompt.\nLine two."}
    assert rationale == "clearer"
    found, _ = parse_reply("<<<COMPONENT a\nText ending on the marker.>>>\nRATIONALE: r", ("a",))
    assert found == {"a": "Text ending on the marker."}


def test_parse_handles_blocks_closed_by_a_fence_and_other_openers() -> None:
    # Seen from Qwen2.5-Coder 1.5B: the block closed with a fence, then a comment on it.
    content = "RATIONALE: r\n<<<COMPONENT a\nNew text.\n```\n\nThis new text adds a rule."
    assert parse_reply(content, ("a",)) == ({"a": "New text."}, "r")
    # Seen from the 0.5B: "COMPONENT a" without the <<< marker; or a markdown header.
    assert parse_reply("COMPONENT a\n```\nX\n```\nmore talk", ("a",))[0] == {"a": "X"}
    assert parse_reply("### COMPONENT a\nY\n>>>", ("a",))[0] == {"a": "Y"}


def test_fences_inside_a_well_formed_block_are_part_of_the_text() -> None:
    text = 'Answer as JSON:\n```json\n{"label": "..."}\n```\nNothing else.'
    found, _ = parse_reply(f"<<<COMPONENT a\n{text}\n>>>\nRATIONALE: r", ("a",))
    assert found == {"a": text}


def test_parse_ignores_unknown_names_and_echoed_placeholders() -> None:
    content = "<<<COMPONENT other\nx\n>>>\n<<<COMPONENT a\n<the complete new text of a, at most 6,000 characters>\n>>>"
    with pytest.raises(ProposalRejected) as info:
        parse_reply(content, ("a",))
    assert info.value.reason == "no_submission"


def test_fenced_block_is_accepted_only_for_a_single_target() -> None:
    content = "Old:\n```\nold prompt\n```\nNew:\n```\nbetter prompt\n```\nRATIONALE: sharper"
    found, rationale = parse_reply(content, ("system_prompt",))
    assert found == {"system_prompt": "better prompt"}
    assert rationale == "sharper"
    with pytest.raises(ProposalRejected):
        parse_reply(content, ("a", "b"))


def test_reasoning_before_the_block_is_the_rationale_when_none_is_given() -> None:
    found, rationale = parse_reply(
        "Delivery questions were confused.\n<<<COMPONENT a\nnew\n>>>", ("a",)
    )
    assert found == {"a": "new"} and rationale == "Delivery questions were confused."


async def test_only_target_components_change_and_others_are_shown_read_only(api) -> None:
    parent = CandidateView(
        "p", {"system_prompt": PARENT_PROMPT, "format": "Answer with the label only."}
    )
    specs = (
        ComponentSpec("system_prompt", "prompt", "classifier"),
        ComponentSpec("format", "prompt", "output format"),
    )
    answer = text_answer(NEW) + "\n<<<COMPONENT format\nhacked\n>>>"
    script = scripted(api, completion(answer))
    request = banking_request(parent=parent, components=specs, target_components=("system_prompt",))
    proposal = await make_proposer(mode="text").propose(request)
    assert proposal.components == {"system_prompt": NEW, "format": "Answer with the label only."}
    user = script.requests[0]["messages"][1]["content"]
    assert "Component `format` (kind: prompt, 27 chars; read-only here)" in user
    assert "Component `system_prompt` (kind: prompt, 238 chars; you may change this one)" in user


async def test_frontier_diffs_are_offered_for_ideas(api) -> None:
    other = CandidateView(
        "cand-b", {"system_prompt": "x"}, wins=("s1", "s2"), diff_from_parent="+Be brief."
    )
    script = scripted(api, completion(text_answer(NEW)))
    await make_proposer(mode="text").propose(banking_request(frontier=(other,)))
    user = script.requests[0]["messages"][1]["content"]
    assert "- cand-b: wins 2 seeds (s1, s2)" in user and "+Be brief." in user
