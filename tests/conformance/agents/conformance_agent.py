"""The conformance suite's agent, the twin of container/typescript/test/fixtures/conformance-agent.ts.

Both SDKs serve the same behaviour, so the suite can demand the same answers from both. The
row's ``mode`` column picks what the target does: echo, a rate limit, a provider fault, a
refused connection, a crash, a wrong return type, a misused candidate or a user mistake.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai

from container import AgentResult, Candidate, Retryable, Task, UserMistake, optimize
from schemas import PromptTemplate


def _provider_error(status: int, headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, headers=headers, request=request)
    kind = openai.RateLimitError if status == 429 else openai.InternalServerError
    return kind(f"{status} from the model provider", response=response, body=None)


@optimize(id="conformance", description="Echo the input when told to.", baseline="Say nothing.")
def conformance(task: Task, candidate: Candidate) -> Any:
    """Echo the input if the prompt says "echo"; other modes fail in the way they are named."""
    mode = task.metadata.get("mode", "echo")
    if mode == "rate_limit":
        raise Retryable("rate limited by the test", rate_limited=True, retry_after=7)
    if mode == "unavailable":
        raise Retryable("warming up", retry_after=2.5)
    if mode == "provider_429":
        raise _provider_error(429, {"retry-after": "5"})
    if mode == "provider_5xx":
        raise _provider_error(502, {})
    if mode == "connection":
        httpx.post(f"http://127.0.0.1:{task.input['input']}/v1/chat/completions")
        return "unreachable"
    if mode == "crash":
        raise RuntimeError("the agent crashed")
    if mode == "bad_type":
        return 42
    if mode == "candidate_misuse":
        return candidate.template.system_prompt
    if mode == "user_mistake":
        raise UserMistake("MissingRubric", f"seed {task.name!r} has no rubric; add a rubric column")
    text = str(task.input["input"])
    output = text if "echo" in candidate.text.lower() else "unknown"
    return AgentResult(
        output=output,
        input_tokens=len(candidate.text.split(" ")) + 1,
        output_tokens=1,
        cost_usd=0.0001,
        trace_id=f"trace-{task.name}",
        metadata={"mode": "echo", "model": candidate.model},
        messages=[
            {"role": "system", "content": candidate.text},
            {"role": "user", "content": text},
            {"role": "assistant", "content": output},
        ],
    )


@optimize(
    id="conformance-template",
    description="Add two numbers.",
    baseline=PromptTemplate(system_prompt="Add the numbers.", user_template="Question: {question}"),
)
def template(task: Task, candidate: Candidate) -> Any:
    """Render the task through the candidate's template, then add the two numbers it asks about."""
    messages = candidate.template.render(task.fields)
    a, b = messages[-1]["content"].removeprefix("Question: ").split("+")
    return {"output": str(int(a) + int(b)), "messages": messages}
