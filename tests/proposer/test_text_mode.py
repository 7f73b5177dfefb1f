"""Text mode: the one-request protocol (the parsing of answers is in test_answer.py)."""

from __future__ import annotations

import pytest

from proposer import CandidateView, ComponentSpec
from proposer.prompts import output_format
from proposer.textmode import CUT_OFF_NUDGE
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
    assert "<<<COMPONENT system_prompt" in user and "PATTERNS:" in user
    assert "at most 6,000 characters" in user
    assert "generalize" in request["messages"][0]["content"]


async def test_missing_block_is_asked_for_once_more_block_first_then_rejected(api) -> None:
    script = scripted(
        api,
        completion("I would make the prompt more specific about delivery."),
        completion("Still no block."),
    )
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").propose(banking_request())
    assert info.value.reason == "no_submission"
    first, second = (r["messages"][-1]["content"] for r in script.requests)
    assert "PATTERNS: <" in first and "Start your answer with" not in first
    # The same request (same evidence), asking for the block first this time.
    assert "Start your answer with this block; write nothing before it" in second
    assert "PATTERNS" not in second and "RATIONALE: <optional" in second
    assert (
        first[: first.index("# Answer format")].split("\n", 1)[1]
        == second[: second.index("# Answer format")].split("\n", 1)[1]
    )


async def test_a_copied_answer_format_is_asked_again_block_first_and_filled_in(api) -> None:
    # Seen from the 0.5B: the PATTERNS format copied as is, placeholder and all.
    copied = (
        "First one line naming the mistake patterns you will fix, then the block:\n"
        "PATTERNS: billing, refunds <<<COMPONENT system_prompt\n"
        "<the complete new text of system_prompt: the current text, tightened, plus one "
        "precise rule for each pattern, at most 6,000 characters>\n>>>\n"
    )
    scripted(api, completion(copied), completion(text_answer(NEW)))
    proposal = await make_proposer(mode="text").propose(banking_request())
    assert proposal.components == {"system_prompt": NEW}
    assert proposal.usage.calls == 2


def _answer_format(user: str) -> str:
    return user[user.index("# Answer format") :]


async def test_the_request_asks_for_one_patterns_line_then_the_new_text(api) -> None:
    script = scripted(api, completion(text_answer(NEW)))
    await make_proposer(mode="text").propose(banking_request())
    user = script.requests[0]["messages"][1]["content"]
    task = user.splitlines()[0]
    assert task.startswith("Task: write a better version of `system_prompt`")
    assert task.index("PATTERNS") < task.index("<<<COMPONENT")
    answer = _answer_format(user)
    lines = answer.splitlines()
    assert lines[1].startswith("First one line naming the mistake patterns")
    assert lines[2].startswith("PATTERNS: <") and lines[3] == "<<<COMPONENT system_prompt"
    assert lines[4].startswith("<the complete new text of system_prompt: the current text")
    assert lines[4].endswith("at most 6,000 characters>") and lines[5] == ">>>"
    assert "RATIONALE" not in answer
    # Several targets: one PATTERNS line, then every block.
    several = output_format(("a", "b"), 500)
    assert several.index("PATTERNS:") < several.index("<<<COMPONENT a")
    assert several.index("<<<COMPONENT a") < several.index("<<<COMPONENT b")
    assert "one for each component you change" in several


async def test_a_cut_off_answer_after_a_complete_block_becomes_the_candidate(api) -> None:
    answer = f"<<<COMPONENT system_prompt\n{NEW}\n>>>\nRATIONALE: Delivery time and arrival"
    scripted(api, completion(answer, finish_reason="length"))
    proposal = await make_proposer(mode="text", max_tokens=300).propose(banking_request())
    assert proposal.components == {"system_prompt": NEW}
    assert proposal.rationale == "Delivery time and arrival [cut off]"
    assert proposal.usage.calls == 1


async def test_an_answer_cut_off_inside_its_block_twice_is_rejected(api) -> None:
    cut = completion("<<<COMPONENT system_prompt\nClassify the banking", finish_reason="length")
    script = scripted(api, cut, cut)
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text", max_tokens=300).propose(banking_request())
    assert info.value.reason == "cut_off"
    assert "max_tokens=300" in str(info.value) and "not closed" in str(info.value)
    assert len(script.requests) == 2


async def test_a_cut_off_answer_is_asked_for_once_more_with_the_block_first(api) -> None:
    cut = completion("<<<COMPONENT system_prompt\nClassify the banking", finish_reason="length")
    script = scripted(api, cut, completion(text_answer(NEW)))
    proposal = await make_proposer(mode="text", max_tokens=300).propose(banking_request())
    assert proposal.components == {"system_prompt": NEW}
    assert proposal.usage.calls == 2
    first, second = script.requests
    # The same request, not a conversation: the cut-off answer is not sent back.
    assert len(second["messages"]) == len(first["messages"])
    assert second["messages"][-1]["content"].endswith(CUT_OFF_NUDGE)


async def test_a_block_that_echoes_the_request_is_rejected(api) -> None:
    # What the 0.5B writes most often: the header, then the evidence copied from the request.
    echo = (
        "<<<COMPONENT system_prompt\nPurpose: System prompt of the intent classifier.\n\n"
        "Input:\nHow long does it take for a new card to get here?\nStudent output:\n"
        "card_arrival\nVerifier feedback:\n"
        "predicted card_arrival, expected card_delivery_estimate\n"
        ">>>\n"
    )
    scripted(api, completion(echo), completion(echo))
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").propose(banking_request())
    assert info.value.reason == "no_submission" and "copies the request" in str(info.value)
    assert info.value.usage.calls == 2  # pushed back once


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


async def test_a_patterns_line_before_the_block_is_the_rationale(api) -> None:
    answer = f"PATTERNS: delivery time vs arrival\n\n<<<COMPONENT system_prompt\n{NEW}\n>>>"
    scripted(api, completion(answer))
    proposal = await make_proposer(mode="text").propose(banking_request())
    assert proposal.components == {"system_prompt": NEW}
    assert "delivery time vs arrival" in proposal.rationale


RULE = "Questions about how long a card takes to arrive are card_delivery_estimate."


async def test_a_hosted_answer_that_ignores_the_format_is_read_as_its_revision(api) -> None:
    # A hosted model wrote the revised text as prose between a preamble and a sign-off:
    # its text is the answer; asking again would cost a call for the same text in blocks.
    prose = (
        "Sure! Here is an improved version of the prompt.\n\n"
        f"{PARENT_PROMPT}\n{RULE}\n\nHope this helps."
    )
    script = scripted(api, completion(prose))
    proposal = await make_proposer(mode="text", endpoint="hosted").propose(banking_request())
    assert len(script.requests) == 1
    assert proposal.components == {"system_prompt": f"{PARENT_PROMPT}\n{RULE}"}


async def test_an_unformatted_answer_sharing_no_line_with_the_text_is_asked_for_again(
    api,
) -> None:
    script = scripted(
        api,
        completion("I would make the prompt more specific about delivery."),
        completion(text_answer(NEW)),
    )
    proposal = await make_proposer(mode="text", endpoint="hosted").propose(banking_request())
    assert len(script.requests) == 2 and proposal.components == {"system_prompt": NEW}
