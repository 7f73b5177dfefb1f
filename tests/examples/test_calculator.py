"""The calculator ReAct agent and its container, with the chat endpoint scripted by respx."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx
import pytest
import respx
from openai import AsyncOpenAI

from container import Candidate, Task
from examples.calculator import (
    BASELINE,
    AgentSettings,
    CalculatorAgent,
    create_calculator_app,
)
from examples.calculator.__main__ import main

BASE = "http://student.test/v1"
_ids = itertools.count()


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 10,
) -> dict[str, Any]:
    """A chat completion body as an OpenAI-compatible server returns it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"cmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": "student",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def tool_call(arguments: str, name: str = "calculator") -> dict[str, Any]:
    """One native OpenAI tool call."""
    return {
        "id": f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


class Script:
    """Scripted replies of the fake endpoint; records every request body it got."""

    def __init__(self, *replies: dict[str, Any] | httpx.Response) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        if not self.replies:
            return httpx.Response(500, json={"error": {"message": "script exhausted"}})
        reply = self.replies.pop(0)
        return reply if isinstance(reply, httpx.Response) else httpx.Response(200, json=reply)


@pytest.fixture
def api() -> Any:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def script(api: respx.MockRouter, *replies: dict[str, Any] | httpx.Response) -> Script:
    scripted = Script(*replies)
    api.post("/chat/completions").mock(side_effect=scripted)
    return scripted


def openai_client() -> AsyncOpenAI:
    return AsyncOpenAI(base_url=BASE, api_key="local", max_retries=0)


def agent(**settings: Any) -> CalculatorAgent:
    return CalculatorAgent(openai_client(), AgentSettings(model="student", **settings))


TASK = Task(
    name="calc-001",
    input={"question": "A bookstore sells 347 notebooks at $12.85 each. What is the revenue?"},
    expected=4458.95,
)
CANDIDATE = Candidate(components=BASELINE.to_components(), template_=BASELINE)


async def test_text_protocol_runs_the_tool_and_feeds_back_the_observation(
    api: respx.MockRouter,
) -> None:
    fake = script(
        api,
        completion("Thought: multiply.\nAction: calculator[347 * 12.85]", prompt_tokens=150),
        completion("Answer: $4,458.95", prompt_tokens=180, completion_tokens=6),
    )
    result = await agent().run(TASK, CANDIDATE)

    assert result.output == "4458.95"
    assert (result.input_tokens, result.output_tokens) == (330, 16)
    first, second = fake.requests
    assert first["messages"] == BASELINE.render(TASK.input)
    assert first["temperature"] == 0 and first["max_tokens"] == 160
    assert first["stop"] == ["\nObservation:"] and "tools" not in first
    assert second["messages"][-2:] == [
        {"role": "assistant", "content": "Thought: multiply.\nAction: calculator[347 * 12.85]"},
        {"role": "user", "content": "Observation: 4458.95"},
    ]
    assert result.trace is not None
    assert result.trace.messages == [
        *second["messages"],
        {"role": "assistant", "content": "Answer: $4,458.95"},
    ]
    assert result.trace.tool_calls == [
        {
            "name": "calculator",
            "arguments": {"expression": "347 * 12.85"},
            "result": "4458.95",
            "error": None,
        }
    ]
    assert [(e["type"], e["step"], e["kind"]) for e in result.trace.events] == [
        ("step", 1, "action"),
        ("step", 2, "answer"),
    ]
    assert result.metadata == {
        "model": "student",
        "steps": 2,
        "stop_reason": "answer",
        "tool_calls": 1,
        "tool_errors": 0,
        "max_steps": 6,
    }
    assert result.cost_usd is None  # a local model has no price


async def test_a_refused_expression_is_an_observation_the_model_can_fix(
    api: respx.MockRouter,
) -> None:
    fake = script(
        api,
        completion("Action: calculator[1,284 * 36]"),
        completion("Action: calculator[1284 * 36]"),
        completion("Answer: 46224"),
    )
    result = await agent().run(TASK, CANDIDATE)
    assert fake.requests[1]["messages"][-1] == {
        "role": "user",
        "content": "Observation: Error: commas are not allowed in numbers: write 1284, not 1,284",
    }
    assert result.output == "46224"
    assert result.metadata is not None and result.metadata["tool_errors"] == 1


async def test_text_written_after_an_action_is_kept_out_of_the_conversation(
    api: respx.MockRouter,
) -> None:
    fake = script(
        api,
        completion("Action: calculator[347 * 12.85]\nObservation 4000\nAnswer: 4000"),
        completion("Answer: 4458.95"),
    )
    result = await agent().run(TASK, CANDIDATE)
    assert fake.requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": "Action: calculator[347 * 12.85]"},
        {"role": "user", "content": "Observation: 4458.95"},
    ]
    assert result.trace is not None
    assert result.trace.events[0]["dropped"] == "Observation 4000\nAnswer: 4000"
    assert result.output == "4458.95"


async def test_native_tool_calls_are_answered_with_tool_messages(api: respx.MockRouter) -> None:
    first_call = tool_call('{"expression": "347 * 12.85"}')
    fake = script(
        api,
        completion(None, tool_calls=[first_call, tool_call("{}", name="search")]),
        completion(None, tool_calls=[tool_call("not json")]),
        completion("The revenue is $4,458.95."),
    )
    result = await agent(native_tools=True).run(TASK, CANDIDATE)

    assert fake.requests[0]["tools"][0]["function"]["name"] == "calculator"
    sent = fake.requests[1]["messages"]
    assert sent[-3]["role"] == "assistant" and sent[-3]["tool_calls"][0]["id"] == first_call["id"]
    assert sent[-2] == {"role": "tool", "tool_call_id": first_call["id"], "content": "4458.95"}
    assert sent[-1]["content"] == "Error: unknown tool 'search'; the only tool is calculator"
    assert fake.requests[2]["messages"][-1]["content"].startswith("Error: arguments must be JSON")
    # a plain-text reply ends the task; its last number is the answer
    assert result.output == "4458.95"
    assert result.metadata is not None and result.metadata["stop_reason"] == "no_answer_line"
    assert result.trace is not None
    assert [c["result"] for c in result.trace.tool_calls] == ["4458.95", None, None]


async def test_the_step_limit_stops_the_loop_with_the_last_number(api: respx.MockRouter) -> None:
    fake = script(
        api,
        completion("Action: calculator[1 + 1]"),
        completion("Action: calculator[2 + 2]"),
        completion("It is roughly 4,400.\nAction: calculator[3 + 3]"),
        completion("Answer: 1"),  # never asked for
    )
    result = await agent(max_steps=3).run(TASK, CANDIDATE)
    assert len(fake.requests) == 3
    assert result.output == "4400"
    assert result.metadata is not None
    assert (result.metadata["steps"], result.metadata["stop_reason"]) == (3, "max_steps")


async def test_step_limit_without_a_number_gives_an_empty_output(api: respx.MockRouter) -> None:
    script(api, completion("Action: calculator[1 + 1]"))
    result = await agent(max_steps=1).run(TASK, CANDIDATE)
    assert result.output == ""


async def test_policy_model_overrides_the_default(api: respx.MockRouter) -> None:
    fake = script(api, completion("Answer: 3"))
    candidate = Candidate(components={}, model="gpt-4o-mini", template_=BASELINE)
    result = await agent().run(TASK, candidate)
    assert fake.requests[0]["model"] == "gpt-4o-mini"
    assert result.cost_usd == pytest.approx((100 * 0.15 + 10 * 0.60) / 1e6)


def container(**settings: Any) -> httpx.AsyncClient:
    app = create_calculator_app(
        settings=AgentSettings(model="student", base_url=BASE, **settings),
        client=openai_client(),
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://container")


def rollout_body(seed: str, **candidate: str) -> dict[str, Any]:
    return {"candidate": {**BASELINE.to_components(), **candidate}, "seed": seed}


async def test_program_serves_the_template_components_and_shipped_splits() -> None:
    async with container() as client:
        program = (await client.get("/program")).json()
    assert program["program_id"] == "calculator-react"
    assert [(c["name"], c["kind"]) for c in program["components"]] == [
        ("system_prompt", "agent"),
        ("demos", "agent"),
    ]
    assert program["components"][0]["text"] == BASELINE.system_prompt
    assert (len(program["seeds"]["train"]), len(program["seeds"]["holdout"])) == (24, 16)
    assert program["metadata"]["template"]["user_template"] == "Problem: {question}"


async def test_rollout_trace_shows_the_tool_call_and_the_verifier_reward(
    api: respx.MockRouter,
) -> None:
    script(
        api,
        completion("Action: calculator[347 * 12.85]"),
        completion("Answer: 4458.95"),
        completion("Answer: 4000"),
    )
    async with container() as client:
        good = (await client.post("/rollout", json=rollout_body("calc-001"))).json()
        bad = (await client.post("/rollout", json=rollout_body("calc-001"))).json()

    assert (good["reward"], good["output"]) == (1.0, "4458.95")
    assert good["feedback"] == "correct: answered 4458.95 (1 calculator call)"
    assert good["trace"]["tool_calls"] == [
        {
            "name": "calculator",
            "arguments": {"expression": "347 * 12.85"},
            "result": "4458.95",
            "error": None,
        }
    ]
    assert {"role": "user", "content": "Observation: 4458.95"} in good["trace"]["messages"]
    assert good["usage"]["input_tokens"] == 200
    # a fresh tool environment per task: the second rollout does not see the first one's call
    assert bad["trace"]["tool_calls"] == []
    assert bad["reward"] == 0.0
    assert bad["feedback"].startswith("answered 4000, expected 4458.95 (0 calculator calls).")


async def test_concurrent_rollouts_keep_their_tool_calls_apart(api: respx.MockRouter) -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        messages = json.loads(request.content)["messages"]
        question = messages[1]["content"]
        if messages[-1]["content"].startswith("Observation:"):
            return httpx.Response(200, json=completion("Answer: 1"))
        expression = "1284 * 36" if "warehouse" in question else "347 * 12.85"
        return httpx.Response(200, json=completion(f"Action: calculator[{expression}]"))

    api.post("/chat/completions").mock(side_effect=reply)
    async with container() as client:
        first, second = await asyncio.gather(
            client.post("/rollout", json=rollout_body("calc-001")),
            client.post("/rollout", json=rollout_body("calc-002")),
        )
    assert [c["arguments"]["expression"] for c in first.json()["trace"]["tool_calls"]] == [
        "347 * 12.85"
    ]
    assert [c["arguments"]["expression"] for c in second.json()["trace"]["tool_calls"]] == [
        "1284 * 36"
    ]


@pytest.mark.parametrize(("status", "expected"), [(429, 429), (500, 503)])
async def test_endpoint_faults_become_retryable_answers(
    api: respx.MockRouter, status: int, expected: int
) -> None:
    script(api, httpx.Response(status, json={"error": {"message": "busy"}}))
    async with container() as client:
        response = await client.post("/rollout", json=rollout_body("calc-001"))
    assert response.status_code == expected


async def test_broken_demos_score_zero_without_calling_the_model(api: respx.MockRouter) -> None:
    fake = script(api)
    async with container() as client:
        result = (await client.post("/rollout", json=rollout_body("calc-001", demos="[{"))).json()
    assert result["reward"] == 0.0 and "not valid JSON" in result["feedback"]
    assert fake.requests == []


def test_main_rejects_a_bad_step_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--max-steps", "0"]) == 2
    assert "--max-steps must be at least 1" in capsys.readouterr().err


def test_demo_answers_keep_the_agent_format() -> None:
    from examples.calculator.agent import demos_as_answers
    from schemas import Demo, PromptTemplate

    template = PromptTemplate(
        system_prompt="s",
        user_template="Problem: {question}",
        demos=(
            Demo(input={"question": "2*3?"}, output="6"),
            Demo(input={"question": "1+1?"}, output="Answer: 2"),
        ),
    )
    messages = demos_as_answers(template.render({"question": "7*8?"}))
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        "Answer: 6",
        "Answer: 2",
    ]
    assert messages[-1] == {"role": "user", "content": "Problem: 7*8?"}
