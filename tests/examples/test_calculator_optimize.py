"""Both optimizers on the calculator container: GEPA and MIPRO runs end to end, in-process.

The student is a scripted OpenAI-compatible server on 127.0.0.1 that answers through the
calculator (``Action: calculator[<right answer>]``, then ``Answer: <observation>``) only when
its system prompt tells it to use the calculator for every step, and guesses 0 otherwise; the
proposers are fakes that learn that sentence. What is real: the ReAct agent, the tool env,
the verifier, the container app, the rollout queue, budget, promotion and evidence.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from examples.calculator.program import DATASET, create_calculator_app
from examples.calculator.settings import AgentSettings
from optimizer.searches import run_optimization
from optimizer.testing import thread_server
from proposer import InstructionRequest, InstructionSet, Proposal, ProposalRequest
from schemas import ModelUsage, RunConfig

HINT = "Use the calculator for every step."
ANSWERS = {
    json.loads(line)["input"]["question"]: json.loads(line)["expected"]
    for line in DATASET.read_text().splitlines()
    if line.strip()
}


def _student() -> Starlette:
    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        messages = body["messages"]
        last = str(messages[-1]["content"])
        if last.startswith("Observation:"):
            content = "Answer: " + last.removeprefix("Observation:").strip()
        else:
            question = next((q for q in ANSWERS if q in last), None)
            follows = HINT in str(messages[0]["content"])
            content = (
                f"Action: calculator[{ANSWERS[question]}]" if follows and question else "Answer: 0"
            )
        return JSONResponse(
            {
                "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
            }
        )  # fmt: skip

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


class Proposer:
    """GEPA: adds the hint to the system prompt. MIPRO: one instruction carries it."""

    total_usage = ModelUsage()  # what the run books: nothing

    async def propose(self, request: ProposalRequest) -> Proposal:
        prompt = request.parent.components["system_prompt"]
        new = prompt if HINT in prompt else f"{prompt}\n{HINT}"
        if new == prompt:
            new = prompt + "\nCheck the units."
        return Proposal(
            components={**request.parent.components, "system_prompt": new},
            rationale="use the tool", usage=ModelUsage(calls=1), diff="+hint", mode="text",
            parents=(request.parent.candidate_id,),
        )  # fmt: skip

    async def merge(self, request: object) -> Proposal:
        raise AssertionError("merges are off")

    async def aclose(self) -> None:
        """Nothing to release."""

    async def instructions(self, request: InstructionRequest) -> InstructionSet:
        made = (f"{request.baseline}\n{HINT}", f"{request.baseline}\nBe brief.")
        return InstructionSet(made[: request.count], "word problems", ModelUsage(calls=3))


@pytest.mark.parametrize("method", ["gepa", "mipro"])
async def test_both_optimizers_improve_the_calculator_agent(tmp_path: Path, method: str) -> None:
    config = RunConfig(
        containers=["http://calculator"], reflection_model="fake", method=method,  # type: ignore[arg-type]
        max_metric_calls=180, minibatch_size=4, seed=0, use_merge=False, max_idle_iterations=4,
        num_instructions=3, num_demo_sets=3, full_eval_every=3, concurrency=1,
    )  # fmt: skip
    with thread_server(_student()) as student:
        settings = AgentSettings(model="student", base_url=f"{student}/v1")
        client = settings.client()
        app = create_calculator_app(settings=settings, client=client)
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport) as http:
                result = await run_optimization(
                    config,
                    workspace=tmp_path,
                    proposer=Proposer(),  # type: ignore[arg-type]
                    http=http,
                )
        finally:
            await client.close()
    packet: dict[str, Any] = result.evidence
    assert packet["method"] == method and packet["status"] == "completed"
    assert packet["baseline"]["holdout"] == 0.0 and packet["best"]["holdout"] == 1.0
    assert HINT in packet["best"]["components"]["system_prompt"] and result.promoted
    traces = [t["trace"] for t in packet["traces"]]
    calls = [c for t in traces for c in t.get("tool_calls", [])]
    assert calls and all(c["name"] == "calculator" and c["result"] is not None for c in calls)
    assert re.search(r"Observation: ", json.dumps(traces))
