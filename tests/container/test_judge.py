"""The llm_judge verifier against a faked OpenAI-compatible endpoint (respx)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
import respx

from container import AgentResult, Retryable, Task, load_verifier
from container.judge import parse_judge_answer
from schemas import UserError

BASE = "http://judge.test/v1"
SPEC = {
    "type": "llm_judge",
    "model": "judge-model",
    "rubric": "Must name the city.",
    "base_url": BASE,
    "api_key_env": "TEST_JUDGE_KEY",
    "max_retries": 0,
}


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "judge-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-judge")


@respx.mock
async def test_judge_scores_and_sends_rubric_reference_and_output() -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(
            200, json=_completion('{"score": 0.8, "feedback": "names Paris but adds noise"}')
        )
    )
    task = Task(name="s1", input="Capital of France?", expected="Paris", instruction="Answer.")
    score = await load_verifier(SPEC).score(task, AgentResult(output="Paris, I think"))
    assert score.score == 0.8
    assert score.feedback == (
        "predicted Paris, I think, expected Paris; judge score 0.80: names Paris but adds noise"
    )
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer sk-judge"
    body = json.loads(request.content)
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    user = body["messages"][1]["content"]
    for part in ("Must name the city.", "Capital of France?", "Paris", "Paris, I think", "Answer."):
        assert part in user


@respx.mock
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('```json\n{"score": 7, "feedback": "ok"}\n```', 0.7),
        ('{"score": 10}', 1.0),
        ("Score: 0.25 because it is vague", 0.25),
        ('{"score": "0.5", "reason": "half"}', 0.5),
    ],
)
async def test_judge_parses_0_to_1_and_0_to_10(content: str, expected: float) -> None:
    respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(200, json=_completion(content))
    )
    score = await load_verifier(SPEC).score(
        Task(name="s", input="q", expected="a"), AgentResult(output="a")
    )
    assert score.score == pytest.approx(expected)


@pytest.mark.parametrize(
    "answer", ["I like it", '{"score": 11}', '{"score": -1}', '{"verdict": "yes"}']
)
def test_unreadable_judge_answers_are_retryable(answer: str) -> None:
    with pytest.raises(Retryable, match="no score"):
        parse_judge_answer(answer)


@respx.mock
async def test_judge_rate_limit_propagates_as_openai_error() -> None:
    respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(
            429, headers={"retry-after": "3"}, json={"error": {"message": "slow down"}}
        )
    )
    with pytest.raises(openai.RateLimitError):
        await load_verifier(SPEC).score(Task(name="s", input="q"), AgentResult(output="a"))


def test_judge_needs_a_key_without_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_JUDGE_KEY")
    spec = {**SPEC, "base_url": None}
    with pytest.raises(UserError, match=r"\$TEST_JUDGE_KEY"):
        load_verifier(spec)
    with pytest.raises(UserError, match="model: Field required"):
        load_verifier({"type": "llm_judge"})
