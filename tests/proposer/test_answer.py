"""Reading text-mode answers: the block format, small-model mistakes, cut-off salvage, echoes."""

from __future__ import annotations

import pytest

from proposer.answer import Shown, parse_reply
from schemas import ProposalRejected

NEW = "Classify the banking intent. Questions about delivery *time* are card_delivery_estimate."
CURRENT = "Classify the user's banking intent. Return the best matching label."
# Lines of a request as the proposer writes it: the evidence and the answer format.
REQUEST = (
    f"## Component `system_prompt` (kind: prompt, 70 chars; you may change this one)\n"
    f"Purpose: System prompt of the intent classifier.\n```\n{CURRENT}\n```\n\n"
    "### seed b77-train-0000 (reward 0.00)\nInput:\nHow long does it take for a new card to "
    "get here?\nStudent output:\ncard_arrival\nVerifier feedback:\npredicted card_arrival, "
    "expected card_delivery_estimate\n\n# Answer format (follow it exactly)\n"
    "<<<COMPONENT system_prompt\n<the complete new text of system_prompt, at most 3,000 "
    "characters>\n>>>\nRATIONALE: <optional: one short sentence on the mistake pattern the new "
    "text fixes>"
)
SHOWN = Shown(REQUEST, own=(CURRENT,))


def _rejected(
    content: str,
    targets: tuple[str, ...] = ("a",),
    *,
    cut_off_at: int | None = None,
    shown: Shown | None = None,
) -> ProposalRejected:
    with pytest.raises(ProposalRejected) as info:
        parse_reply(content, targets, cut_off_at=cut_off_at, shown=shown)
    return info.value


# The format asked for: the new text first, an optional rationale after.


def test_block_first_then_rationale() -> None:
    content = f"<<<COMPONENT system_prompt\n{NEW}\n>>>\nRATIONALE: Delivery time is its own intent."
    found, rationale = parse_reply(content, ("system_prompt",))
    assert found == {"system_prompt": NEW}
    assert rationale == "Delivery time is its own intent."


def test_the_rationale_is_optional() -> None:
    assert parse_reply(f"<<<COMPONENT a\n{NEW}\n>>>", ("a",)) == (
        {"a": NEW},
        "(no rationale given)",
    )
    # A copied placeholder is no rationale either, even when cut off before its ">".
    for tail in ("<optional: one short sentence>", "<optional: one short sentence on the"):
        found, rationale = parse_reply(f"<<<COMPONENT a\n{NEW}\n>>>\nRATIONALE: {tail}", ("a",))
        assert (found, rationale) == ({"a": NEW}, "(no rationale given)")


def test_commentary_after_the_block_is_the_rationale_when_none_is_labelled() -> None:
    content = f"<<<COMPONENT a\n{NEW}\n>>>\n\nThis separates delivery time from arrival.\n\nMore."
    assert parse_reply(content, ("a",))[1] == "This separates delivery time from arrival."


def test_the_old_order_rationale_first_still_parses() -> None:
    content = f"RATIONALE: Delivery time is its own intent.\n<<<COMPONENT a\n{NEW}\n>>>"
    assert parse_reply(content, ("a",)) == ({"a": NEW}, "Delivery time is its own intent.")


def test_parse_several_blocks_and_last_repeat_wins() -> None:
    content = (
        "Thinking...\n<<<COMPONENT a\nfirst draft\n>>>\n<<<COMPONENT b\nB text\n>>>\n"
        "<<<COMPONENT a\nfinal A\n>>>\nRATIONALE: both changed\n"
    )
    found, rationale = parse_reply(content, ("a", "b"))
    assert found == {"a": "final A", "b": "B text"}
    assert rationale == "both changed"


def test_reasoning_before_the_block_is_the_rationale_when_none_is_given() -> None:
    found, rationale = parse_reply(
        "Delivery questions were confused.\n<<<COMPONENT a\nnew\n>>>", ("a",)
    )
    assert found == {"a": "new"} and rationale == "Delivery questions were confused."


def test_a_finished_answer_without_a_block_is_no_submission() -> None:
    rejected = _rejected("I would make the prompt more specific about delivery.")
    assert rejected.reason == "no_submission" and "no <<<COMPONENT block for a" in str(rejected)


# What small models write instead.


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
    # Seen from the 0.5B: four ">" and a "Rationale:" in its own case.
    assert parse_reply("<<<COMPONENT a\nText.\n>>>>\nRationale: r", ("a",)) == ({"a": "Text."}, "r")


def test_parse_handles_blocks_closed_by_a_fence_and_other_openers() -> None:
    # Seen from Qwen2.5-Coder 1.5B: the block closed with a fence, then a comment on it.
    content = "RATIONALE: r\n<<<COMPONENT a\nNew text.\n```\n\nThis new text adds a rule."
    assert parse_reply(content, ("a",)) == ({"a": "New text."}, "r")
    # Seen from the 0.5B: "COMPONENT a" without the <<< marker; or a markdown header.
    assert parse_reply("COMPONENT a\n```\nX\n```\nmore talk", ("a",))[0] == {"a": "X"}
    assert parse_reply("### COMPONENT a\nY\n>>>", ("a",))[0] == {"a": "Y"}
    assert parse_reply("**COMPONENT: `a`**\nZ\n```", ("a",))[0] == {"a": "Z"}


def test_fences_inside_a_well_formed_block_are_part_of_the_text() -> None:
    text = 'Answer as JSON:\n```json\n{"label": "..."}\n```\nNothing else.'
    found, _ = parse_reply(f"<<<COMPONENT a\n{text}\n>>>\nRATIONALE: r", ("a",))
    assert found == {"a": text}
    # Without ">>>" a code example (a fence with a language) does not end the block either.
    found, rationale = parse_reply(f"<<<COMPONENT a\n{text}\nRATIONALE: r", ("a",))
    assert (found, rationale) == ({"a": text}, "r")


def test_a_copied_placeholder_line_is_dropped_and_a_bare_one_ignored() -> None:
    content = (
        "<<<COMPONENT a\n<the complete new text of a, at most 3,000 characters>\n"
        f"{NEW}\n>>>\nRATIONALE: r"
    )
    assert parse_reply(content, ("a",))[0] == {"a": NEW}
    assert parse_reply("<<<COMPONENT a\n<the new instruction>\nBe brief.\n>>>", ("a",))[0] == {
        "a": "Be brief."
    }
    # Seen from the 0.5B: the current text, then the placeholder line copied after it.
    after = (
        f"<<<COMPONENT a\n{CURRENT}\n\n<the complete new text of a, at most 3,000 characters>\n>>>"
    )
    assert parse_reply(after, ("a",))[0] == {"a": CURRENT}
    only = (
        "<<<COMPONENT other\nx\n>>>\n"
        "<<<COMPONENT a\n<the complete new text of a, at most 6,000 characters>\n>>>"
    )
    assert _rejected(only).reason == "no_submission"


def test_an_empty_block_is_no_submission_and_a_later_full_one_counts() -> None:
    rejected = _rejected("<<<COMPONENT a\n   \n>>>\nRATIONALE: r")
    assert rejected.reason == "no_submission" and "its block for a is empty" in str(rejected)
    # An empty block, then the same block with text: the one with text counts.
    again = "<<<COMPONENT a\n>>>\n<<<COMPONENT a\nbetter text\n>>>\nRATIONALE: r"
    assert parse_reply(again, ("a",))[0] == {"a": "better text"}


def test_fenced_block_is_accepted_only_for_a_single_target() -> None:
    content = "Old:\n```\nold prompt\n```\nNew:\n```\nbetter prompt\n```\nRATIONALE: sharper"
    found, rationale = parse_reply(content, ("system_prompt",))
    assert found == {"system_prompt": "better prompt"}
    assert rationale == "sharper"
    assert _rejected(content, ("a", "b")).reason == "no_submission"
    # A last fence left open by a finished answer runs to the end (or to the rationale).
    found, _ = parse_reply("Here it is:\n```\nbetter prompt\nRATIONALE: r", ("a",))
    assert found == {"a": "better prompt"}


# Answers cut off at max_tokens: complete blocks count, a truncated one never does.


def test_a_cut_off_answer_keeps_a_block_completed_before_the_cut() -> None:
    content = f"<<<COMPONENT a\n{NEW}\n>>>\nRATIONALE: Delivery time and arrival are two"
    found, rationale = parse_reply(content, ("a",), cut_off_at=400)
    assert found == {"a": NEW}
    assert rationale == "Delivery time and arrival are two [cut off]"
    # Cut off right after the closing marker: no rationale at all.
    found, rationale = parse_reply(f"<<<COMPONENT a\n{NEW}\n>>>", ("a",), cut_off_at=400)
    assert (found, rationale) == ({"a": NEW}, "(no rationale given)")


def test_a_block_cut_off_before_its_closing_marker_is_rejected() -> None:
    rejected = _rejected(f"<<<COMPONENT a\n{NEW[:40]}", cut_off_at=400)
    assert rejected.reason == "cut_off"
    assert "max_tokens=400" in str(rejected) and "not closed" in str(rejected)
    # The same text, had the answer ended by itself, is accepted (a forgotten marker).
    assert parse_reply(f"<<<COMPONENT a\n{NEW[:40]}", ("a",))[0] == {"a": NEW[:40]}
    # A fenced text whose closing fence never came is cut off too.
    assert _rejected("<<<COMPONENT a\n```\nClassify the", cut_off_at=400).reason == "cut_off"
    assert _rejected("Old:\n```\nold\n```\nNew:\n```\nClassify the", cut_off_at=9).reason == (
        "cut_off"
    )


def test_a_cut_off_answer_without_any_block_is_rejected_as_cut_off() -> None:
    rejected = _rejected("RATIONALE: The student confuses delivery time with", cut_off_at=400)
    assert rejected.reason == "cut_off" and "no <<<COMPONENT block" in str(rejected)


def test_blocks_closed_by_a_fence_or_a_following_header_count_as_complete() -> None:
    closed_by_fence = "COMPONENT a\nNew text.\n```\n\nThis new text adds a rule that"
    assert parse_reply(closed_by_fence, ("a",), cut_off_at=400)[0] == {"a": "New text."}
    fenced = "Here is the new prompt:\n```\nbetter prompt\n```\nIt is better because"
    assert parse_reply(fenced, ("a",), cut_off_at=400)[0] == {"a": "better prompt"}
    # With several targets only the complete blocks are kept.
    content = "<<<COMPONENT a\nA text\n<<<COMPONENT b\nB text, cut"
    assert parse_reply(content, ("a", "b"), cut_off_at=400)[0] == {"a": "A text"}


def test_a_truncated_repeat_falls_back_to_the_complete_block_before_it() -> None:
    # Seen from the 0.5B: a good block, a rationale, then a second block it never finished.
    content = f"<<<COMPONENT a\n{NEW}\n>>>\nRATIONALE: r\n\n<<<COMPONENT a\nImprove the student"
    assert parse_reply(content, ("a",), cut_off_at=700) == ({"a": NEW}, "r")


# Echoes of the request are not proposals.


def test_a_block_that_echoes_the_request_is_not_a_proposal() -> None:
    # Seen from the 0.5B at temperature 0: the header, then the request copied from the
    # component's purpose onwards until max_tokens.
    echo = (
        "<<<COMPONENT system_prompt\nSystem prompt of the intent classifier.\n```\n"
        f"{CURRENT}\n```\n\n### seed b77-train-0000 (reward 0.00)\nInput:\nHow long does it "
        "take for a new card to get here?\nStudent output:\ncard_arrival\n"
    )
    targets = ("system_prompt",)
    rejected = _rejected(echo, targets, cut_off_at=700, shown=SHOWN)
    assert rejected.reason == "cut_off" and "copies the request" in str(rejected)
    # Closed and followed by the copied answer format: still an echo, also when it ended.
    closed = (
        "<<<COMPONENT system_prompt\nInput:\nHow long does it take for a new card to get here?\n"
        "Student output:\ncard_arrival\nVerifier feedback:\n"
        "<<<COMPONENT system_prompt\n<the complete new text of system_prompt, at most 3,000 "
        "characters>\n>>>"
    )
    assert _rejected(closed, targets, shown=SHOWN).reason == "no_submission"
    # Without ``shown`` nothing is known about the request, and the block is taken as is.
    assert parse_reply(closed, targets)[0]["system_prompt"].startswith("Input:")


def test_a_fence_that_is_part_of_a_copied_request_does_not_close_a_block() -> None:
    # Seen from the 0.5B: the component's purpose reworded, then the request copied from the
    # fence around the current text onwards. The fence is no closing marker there.
    echo = (
        "<<<COMPONENT system_prompt\nSystem prompt to classify a customer message.\n```\n"
        f"{CURRENT}\n```\n\n### seed b77-train-0000 (reward 0.00)\nInput:\nHow long does it "
        "take for a new card to get here?\nStudent output:\ncard_arrival\nVerifier feedback:\n"
    )
    targets = ("system_prompt",)
    assert _rejected(echo, targets, cut_off_at=700, shown=SHOWN).reason == "cut_off"
    # The current text copied in its own fences, then the request: that is an unchanged text,
    # which the proposer pushes back once, not an echo.
    fenced = echo.replace("System prompt to classify a customer message.\n", "")
    assert parse_reply(fenced, targets, cut_off_at=700, shown=SHOWN)[0] == {
        "system_prompt": CURRENT
    }
    # A fence followed by the model's own comment still closes the block.
    own = "<<<COMPONENT system_prompt\nNew text.\n```\n\nThis new text adds a rule for delivery"
    assert parse_reply(own, targets, cut_off_at=700, shown=SHOWN)[0] == {
        "system_prompt": "New text."
    }


def test_a_copy_of_the_request_is_an_echo_and_copied_commentary_no_rationale() -> None:
    targets = ("system_prompt",)
    evidence = (
        "\n\n### seed b77-train-0000 (reward 0.00)\nInput:\n"
        "How long does it take for a new card to get here?"
    )
    # Seen from the 0.5B: the component's purpose (its case changed) and the evidence copied
    # above the current text. One copied line is an edit (the gate judges it); three are not.
    described = (
        "<<<COMPONENT system_prompt\nsystem prompt OF THE intent classifier.\nInput:\n"
        "How long does it take for a new card to get here?\nStudent output:\ncard_arrival\n"
        f"```\n{CURRENT}\n```\n>>>{evidence}"
    )
    assert _rejected(described, targets, shown=SHOWN).reason == "no_submission"
    one = f"<<<COMPONENT system_prompt\nsystem prompt OF THE intent classifier.\n{CURRENT}\n>>>"
    assert parse_reply(one, targets, shown=SHOWN)[0]["system_prompt"].startswith("system prompt")
    # A good block followed by a copy of the evidence: the copy is not its rationale.
    good = f"<<<COMPONENT system_prompt\n{NEW}\n>>>{evidence}"
    assert parse_reply(good, targets, shown=SHOWN) == (
        {"system_prompt": NEW},
        "(no rationale given)",
    )


def test_repeating_the_current_text_or_quoting_one_input_is_not_an_echo() -> None:
    targets = ("system_prompt",)
    # Unchanged text reaches the guards (which push back once, then reject it as unchanged).
    same = f"<<<COMPONENT system_prompt\n{CURRENT}\n>>>"
    assert parse_reply(same, targets, shown=SHOWN)[0] == {"system_prompt": CURRENT}
    edited = (
        f"<<<COMPONENT system_prompt\n{CURRENT}\nDelivery *time* questions are "
        "card_delivery_estimate, for example:\nHow long does it take for a new card to get "
        "here?\n>>>"
    )
    assert "for example" in parse_reply(edited, targets, shown=SHOWN)[0]["system_prompt"]


def test_a_block_closed_by_a_rationale_on_the_marker_line_is_salvaged_from_a_cut_off_repeat() -> (
    None
):
    # Seen from the 0.5B: an end tag, ">>>Rationale: ..." on one line, then the block again,
    # cut off. The first block is complete; neither the tag nor the rationale is prompt text.
    answer = (
        "<<<COMPONENT system_prompt\nRoute tickets.\n- Outages go to outages.\n"
        "</system_prompt>\n\n>>>Rationale: adds the outage rule.\n\n"
        "<<<COMPONENT system_prompt\nRoute tickets.\n- Outa"
    )
    found, _ = parse_reply(answer, ("system_prompt",), cut_off_at=400)
    assert found == {"system_prompt": "Route tickets.\n- Outages go to outages."}


def test_a_prompts_own_tags_and_repl_lines_are_kept() -> None:
    text = "Answer in <rules> form.\n>>> print(1)\n<rules>\n- a\n</rules>"
    found, _ = parse_reply(
        f"<<<COMPONENT system_prompt\n{text}\n>>>\nRATIONALE: x", ("system_prompt",)
    )
    assert found == {"system_prompt": text}


def test_a_new_rule_quoted_from_the_feedback_is_an_edit_not_an_echo() -> None:
    current = "Route the ticket.\n- Card charges go to billing."
    request = (
        f"## Component `system_prompt`\n```\n{current}\n```\n"
        "Verifier feedback: routed to general, expected refunds. Needed rule:\n"
        "- Requests to get money back go to refunds.\n"
        "# Other candidates on the Pareto frontier\n+- Sending an item back goes to returns."
    )
    new = f"{current}\n- Requests to get money back go to refunds.\n- Sending an item back goes to returns."
    found, _ = parse_reply(
        f"<<<COMPONENT system_prompt\n{new}\n>>>",
        ("system_prompt",),
        shown=Shown(request, (current,)),
    )
    assert found == {"system_prompt": new}
