"""Guards: every bad proposal is rejected with its reason and its usage still counted."""

from __future__ import annotations

import pytest

from proposer.guards import check_candidate, unified_diff
from schemas import PromptTooLong, ProposalRejected, content_hash
from tests.proposer.fakes import (
    PARENT_PROMPT,
    banking_request,
    completion,
    make_proposer,
    scripted,
    text_answer,
)

NEW = "Classify the banking intent; delivery-time questions are card_delivery_estimate."


@pytest.mark.parametrize(
    ("answer", "finish", "reason"),
    [
        (f"<<<COMPONENT system_prompt\n{NEW[:40]}", "length", "cut_off"),
        ("<<<COMPONENT system_prompt\n   \n>>>\nRATIONALE: empty", "stop", "no_submission"),
        (text_answer("x" * 501), "stop", "too_long"),
        ("No block here.", "stop", "no_submission"),
    ],
)
async def test_rejections_carry_reason_and_usage(api, answer, finish, reason) -> None:
    reply = completion(answer, finish_reason=finish, prompt_tokens=300, completion_tokens=40)
    scripted(api, reply, reply)
    proposer = make_proposer(mode="text", max_prompt_chars=500)
    with pytest.raises(ProposalRejected) as info:
        await proposer.propose(banking_request())
    assert info.value.reason == reason
    usage = info.value.usage
    # A cut-off answer and one without a block are asked for once more.
    calls = 2 if reason in ("cut_off", "no_submission") else 1
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (
        calls,
        300 * calls,
        40 * calls,
    )
    assert proposer.total_usage == usage


async def test_unchanged_answer_is_pushed_back_once_then_rejected(api) -> None:
    script = scripted(
        api,
        completion(text_answer(PARENT_PROMPT), prompt_tokens=300, completion_tokens=40),
        completion(text_answer(PARENT_PROMPT), prompt_tokens=350, completion_tokens=40),
    )
    proposer = make_proposer(mode="text")
    with pytest.raises(ProposalRejected) as info:
        await proposer.propose(banking_request())
    assert info.value.reason == "unchanged"
    usage = info.value.usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (2, 650, 80)
    second = script.requests[1]["messages"]
    assert second[-1]["content"].startswith("Your new text is identical")
    assert second[-2]["role"] == "assistant"


@pytest.mark.parametrize("endpoint", ["hosted", "local"])
async def test_only_a_local_models_unchanged_text_is_asked_for_again(api, endpoint) -> None:
    # The fake endpoint listens on 127.0.0.1: "auto" takes it for local (the test above);
    # said to be hosted, its unchanged text is its answer, rejected after the one call.
    script = scripted(api, completion(text_answer(PARENT_PROMPT)), completion(text_answer(NEW)))
    proposer = make_proposer(mode="text", endpoint=endpoint)
    if endpoint == "local":
        assert (await proposer.propose(banking_request())).components == {"system_prompt": NEW}
    else:
        with pytest.raises(ProposalRejected) as info:
            await proposer.propose(banking_request())
        assert info.value.reason == "unchanged"
    assert len(script.requests) == (2 if endpoint == "local" else 1)


async def test_push_back_turns_an_echo_into_an_edit(api) -> None:
    scripted(
        api, completion(text_answer(PARENT_PROMPT)), completion(text_answer(NEW, "Now changed."))
    )
    proposal = await make_proposer(mode="text").propose(banking_request())
    assert proposal.components == {"system_prompt": NEW}
    assert proposal.usage.calls == 2


async def test_a_whitespace_only_edit_counts_as_unchanged(api) -> None:
    # Seen from the 0.5B: the current text copied back with a blank line added.
    spaced = PARENT_PROMPT.replace("\n", "\n\n") + "\n"
    script = scripted(api, completion(text_answer(spaced)), completion(text_answer(spaced)))
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").propose(banking_request())
    assert info.value.reason == "unchanged" and "whitespace" in str(info.value)
    assert len(script.requests) == 2  # pushed back once, like an exact copy


async def test_too_long_is_prompt_too_long(api) -> None:
    scripted(api, completion(text_answer("y" * 600)))
    with pytest.raises(PromptTooLong, match="600 chars, over the cap of 500"):
        await make_proposer(mode="text", max_prompt_chars=500).propose(banking_request())


async def test_duplicate_of_an_existing_candidate_is_rejected(api) -> None:
    scripted(api, completion(text_answer(NEW)))
    existing = frozenset({content_hash({"system_prompt": NEW})})
    with pytest.raises(ProposalRejected) as info:
        await make_proposer(mode="text").propose(banking_request(existing_hashes=existing))
    assert info.value.reason == "duplicate"


async def test_a_failed_call_still_counts_earlier_steps(api) -> None:
    from tests.proposer.fakes import tool_call

    scripted(
        api,
        completion(
            tool_calls=[tool_call("list_failures", {})], prompt_tokens=500, completion_tokens=10
        ),
    )
    proposer = make_proposer(mode="agent")  # the script then answers 500: a ProposerError
    with pytest.raises(Exception) as info:
        await proposer.propose(banking_request())
    assert type(info.value).__name__ == "ProposerError"
    assert info.value.usage.input_tokens == 500
    assert proposer.total_usage.input_tokens == 500


def test_seed_prompt_over_the_cap_may_be_edited_but_not_grow() -> None:
    parent = {"p": "z" * 800}
    check_candidate(
        {"p": "w" * 800}, bases=[parent], targets=["p"], cap=500, existing_hashes=frozenset()
    )
    with pytest.raises(PromptTooLong):
        check_candidate(
            {"p": "w" * 801}, bases=[parent], targets=["p"], cap=500, existing_hashes=frozenset()
        )


def test_unified_diff_per_changed_component() -> None:
    diff = unified_diff({"a": "one\ntwo", "b": "same"}, {"a": "one\nthree", "b": "same"}, "p1")
    assert diff.startswith("--- p1/a\n+++ new/a\n")
    assert "-two\n+three\n" in diff
    assert "b" not in diff.replace("p1/a", "").replace("new/a", "")


def test_a_component_emptied_by_an_edit_is_rejected() -> None:
    # Text mode never hands one over (an empty block is no submission); a tool call can.
    with pytest.raises(ProposalRejected) as info:
        check_candidate(
            {"system_prompt": "  \n"},
            bases=[{"system_prompt": PARENT_PROMPT}],
            targets=["system_prompt"],
            cap=6000,
            existing_hashes=frozenset(),
        )
    assert info.value.reason == "empty"
