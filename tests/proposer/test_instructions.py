"""MIPRO's instruction proposals: grounded requests, parsing, rejections and usage."""

from __future__ import annotations

import httpx

from proposer import ComponentSpec, InstructionRequest, TaskExample
from tests.proposer.fakes import completion, make_proposer, scripted

EXAMPLES = tuple(
    TaskExample(input=f"How do I top up {i}?", expected="top_up_failed") for i in range(10)
)


def _request(count: int = 3) -> InstructionRequest:
    return InstructionRequest(
        program_description="Banking77 intent classification.",
        component=ComponentSpec("system_prompt", "prompt", "System prompt of the classifier."),
        baseline="Classify the intent.",
        examples=EXAMPLES,
        count=count,
        examples_per_call=4,
    )


def _block(text: str) -> dict[str, object]:
    return completion(f"<<<COMPONENT system_prompt\n{text}\n>>>\nRATIONALE: clearer")


async def test_summary_then_one_grounded_call_per_instruction(api) -> None:
    script = scripted(
        api,
        completion("Customer banking questions; the output is one intent label."),
        _block("You classify banking intents. Pick exactly one label."),
        _block("Classify the intent."),  # the baseline again: rejected as a duplicate
        _block("As a bank support expert, choose the single best intent label."),
    )
    proposer = make_proposer(mode="text")
    result = await proposer.instructions(_request())
    assert result.instructions == (
        "You classify banking intents. Pick exactly one label.",
        "As a bank support expert, choose the single best intent label.",
    )
    assert result.summary.startswith("Customer banking questions")
    assert len(result.rejected) == 1 and "repeats an existing one" in result.rejected[0]
    assert len(script.requests) == 4
    summary_request = script.last_user_text(0)
    assert (
        "summarize this data" in summary_request
        and summary_request.count("correct output: top_up_failed") == 4
    )
    second = script.last_user_text(1)
    assert "Summary of the data: Customer banking questions" in second
    assert (
        "Current instruction:\nClassify the intent." in second
        and "<<<COMPONENT system_prompt" in second
    )
    # Later calls see what was proposed already, and a different tip.
    third = script.last_user_text(2)
    assert "You classify banking intents." in third and "Tip: Be creative" in third
    # Usage of every call, rejected ones included, is on the result and on the proposer.
    assert result.usage.calls == 4 and proposer.total_usage.calls == 4


async def test_failed_calls_are_reported_and_do_not_stop_the_rest(api) -> None:
    scripted(
        api,
        httpx.Response(500, json={"error": {"message": "boom"}}),
        completion("no block here"),
        completion("<<<COMPONENT system_prompt\nx\n", finish_reason="length"),
        _block("A fine new instruction."),
    )
    result = await make_proposer(mode="text").instructions(_request())
    assert result.instructions == ("A fine new instruction.",)
    assert result.summary == ""
    reasons = " | ".join(result.rejected)
    assert "summary:" in reasons and "no <<<COMPONENT block" in reasons and "cut off" in reasons


async def test_a_cut_off_answer_keeps_its_complete_block_and_the_block_comes_first(api) -> None:
    script = scripted(
        api,
        completion("Customer banking questions."),
        completion(
            "<<<COMPONENT system_prompt\nPick the one intent label that fits best.\n>>>\n"
            "RATIONALE: it names the",
            finish_reason="length",
        ),
        completion("<<<COMPONENT system_prompt\nPick the one", finish_reason="length"),
    )
    result = await make_proposer(mode="text").instructions(_request(count=2))
    assert result.instructions == ("Pick the one intent label that fits best.",)
    assert len(result.rejected) == 1 and "not closed" in result.rejected[0]
    asked = script.last_user_text(1)
    fmt = asked[asked.index("Answer exactly in this format") :]
    assert fmt.index("<<<COMPONENT system_prompt") < fmt.index("RATIONALE: <optional")
