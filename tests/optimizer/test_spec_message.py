"""The spec's ``Message``: a chat message read as ``.content`` and as ``["content"]`` alike."""

from __future__ import annotations

import json

from container import AgentResult, Task
from optimizer import Message, PromptTemplate, Sample, Score, Trajectory, format_prompt
from optimizer.api.spec.agent import score_verifier
from schemas import Demo, Trace


def test_format_prompt_gives_messages_that_read_both_ways() -> None:
    template = PromptTemplate(
        system="Classify.",
        user_template="Query: {query}",
        few_shot_examples=(Demo(input={"query": "lost my card"}, output="card_lost"),),
    )
    messages = format_prompt(template, {"query": "reset my PIN"})
    assert all(isinstance(m, Message) for m in messages)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert [m.content for m in messages] == [m["content"] for m in messages]
    assert messages[-1].content == "Query: reset my PIN"
    assert messages[0] == {"role": "system", "content": "Classify."}  # still the plain dict
    assert json.loads(json.dumps(messages))[-1] == {
        "role": "user",
        "content": "Query: reset my PIN",
    }


def test_a_message_without_a_key_reads_as_nothing() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}
    turn = Message(role="assistant", content=None, tool_calls=[call])
    assert turn.content is None and turn.tool_calls == [call] and turn.name is None
    assert Message(role="tool", content="4", tool_call_id="c1").tool_call_id == "c1"
    assert Message({"role": "user"}).tool_calls == [] and Message().role == ""


def test_score_fn_reads_the_trajectorys_last_message_as_the_spec_does() -> None:
    seen: list[tuple[object, object]] = []

    def score_fn(trajectory: Trajectory, sample: Sample) -> Score:
        last = trajectory.messages[-1]
        seen.append((last.content, last["content"]))
        return Score(score=float(last.content == sample.ground_truth))

    verifier = score_verifier(score_fn)
    task = Task(name="row-00003", input={"query": "reset my PIN"}, expected="pin_reset")
    chat = [
        {"role": "user", "content": "reset my PIN"},
        {"role": "assistant", "content": "pin_reset"},
    ]
    result = AgentResult(output="pin_reset", trace=Trace(messages=chat))
    score = verifier.fn(task, result)
    assert seen == [("pin_reset", "pin_reset")] and score.score == 1.0
