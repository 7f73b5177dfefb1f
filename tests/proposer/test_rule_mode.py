"""Rule mode: one sentence per proposal, appended to the target component."""

from __future__ import annotations

import pytest

from proposer import CandidateView, MergeRequest
from proposer.rulemode import MAX_FAILURES, parse_rule
from schemas import ProposalRejected
from tests.proposer.fakes import (
    PARENT_PROMPT,
    SPECS,
    banking_evaluations,
    banking_request,
    completion,
    make_proposer,
    scripted,
)

RULE = "Questions about how long a new card takes to arrive are card_delivery_estimate."


async def test_the_rule_is_appended_to_the_text_from_a_short_request(api) -> None:
    script = scripted(api, completion(f"RULE: {RULE}"))
    request = banking_request(evaluations=banking_evaluations(n_failures=6, n_successes=2))
    proposal = await make_proposer(mode="rule").propose(request)
    assert proposal.mode == "rule"
    assert proposal.components == {"system_prompt": f"{PARENT_PROMPT}\n{RULE}"}  # no answer named
    assert RULE in proposal.rationale and "+" + RULE in proposal.diff
    sent = script.requests[0]
    user = sent["messages"][-1]["content"]
    assert sent["max_tokens"] <= 120  # one sentence, not a whole text
    assert (
        "RULE: If the input is about <what it is about>, the answer is <the correct answer>."
        in user
    )
    # One failure: the minibatch's first, with its input, the answer given and the feedback.
    assert user.count("- Input: ") == MAX_FAILURES == 1
    assert "How long does it take for a new card to get here?" in user
    assert "Student's answer: 'card_arrival'" in user
    assert "Feedback: predicted card_arrival, expected card_delivery_estimate" in user
    assert PARENT_PROMPT not in user  # the text is not shown: small models copy it back
    assert "What is today's euro exchange rate?" not in user  # successes are not shown


@pytest.mark.parametrize(
    "rule",
    [
        "If the input is about when an ordered card arrives, the answer is card_delivery_estimate.",
        "If the input is about when an ordered card arrives, the answer is 'card_delivery_estimate'",
    ],
)
async def test_the_rule_comes_with_the_failing_input_labelled_with_its_answer(api, rule) -> None:
    scripted(api, completion(f"RULE: {rule}"))
    request = banking_request(evaluations=banking_evaluations(n_failures=3, n_successes=1))
    proposal = await make_proposer(mode="rule").propose(request)
    # The input shown is the one the example quotes, labelled with the answer the rule names.
    example = (
        'Example: "How long does it take for a new card to get here?" -> card_delivery_estimate'
    )
    assert proposal.components == {"system_prompt": f"{PARENT_PROMPT}\n{rule}\n{example}"}


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        (f"RULE: {RULE}", RULE),
        (f"Here is my rule.\n\n**RULE:** {RULE}\n", RULE),
        (f'"{RULE}"', RULE),  # the format ignored: its first line of text
        (
            "RULE: If the input is about <what it is about>, the answer is <the correct answer>.",
            None,
        ),
        ("", None),
    ],
)
def test_the_rule_is_read_from_what_small_models_write(answer: str, rule: str | None) -> None:
    assert parse_rule(answer) == rule


async def test_a_rule_the_text_already_has_is_unchanged_and_no_rule_is_no_submission(api) -> None:
    scripted(
        api, completion("RULE: Return the best matching label."), completion("RULE: <the sentence>")
    )
    proposer = make_proposer(mode="rule")
    with pytest.raises(ProposalRejected) as info:
        await proposer.propose(banking_request())
    assert info.value.reason == "unchanged"
    with pytest.raises(ProposalRejected) as info:
        await proposer.propose(banking_request())
    assert info.value.reason == "no_submission"


async def test_a_merge_in_rule_mode_keeps_both_texts_lines_without_a_call(api) -> None:
    script = scripted(api)
    a = CandidateView("a0000001", {"system_prompt": f"{PARENT_PROMPT}\nRule one."})
    b = CandidateView("b0000001", {"system_prompt": f"{PARENT_PROMPT}\nRule two."})
    merged = await make_proposer(mode="rule").merge(
        MergeRequest(program_description="", components=SPECS, a=a, b=b)
    )
    assert merged.components == {"system_prompt": f"{PARENT_PROMPT}\nRule one.\nRule two."}
    assert script.requests == []
