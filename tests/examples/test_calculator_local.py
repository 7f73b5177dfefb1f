"""The calculator container on the real local 0.5B student, through its ReAct loop.

What the student writes is its own business; what the container does with it is asserted:
each action is run by the calculator and answered with its observation, the answer is scored
on the number it gives, and the feedback counts the calls.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from examples.calculator import BASELINE, AgentSettings, create_calculator_app
from examples.calculator.protocol import first_number
from examples.calculator.tools import Calculator, format_number

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

# Three short train problems (one multiplication each): about 2 s per rollout on 2 cores.
SEEDS = ("calc-002", "calc-011", "calc-019")


def _expected(seed: str) -> float:
    data = Path(__file__).resolve().parents[2] / "examples" / "calculator" / "data.jsonl"
    rows = (json.loads(line) for line in data.read_text().splitlines() if line.strip())
    return float(next(row["expected"] for row in rows if row["name"] == seed))


def _observation(call: dict[str, Any]) -> str:
    """What the student must have been told for a logged call: the calculator's own result."""
    if call["result"] is None:
        return f"Error: {call['error']}"
    assert call["result"] == format_number(Calculator().evaluate(call["arguments"]["expression"]))
    return str(call["result"])


async def test_the_student_runs_through_the_react_loop_and_is_scored_on_its_answer(
    local_llm_base_url: str,
) -> None:
    settings = AgentSettings(model="student", base_url=local_llm_base_url, max_tokens=64)
    openai_client = AsyncOpenAI(base_url=local_llm_base_url, api_key="local", max_retries=0)
    app = create_calculator_app(settings=settings, client=openai_client)
    transport = httpx.ASGITransport(app=app)
    results = []
    async with httpx.AsyncClient(transport=transport, base_url="http://c", timeout=180) as client:
        for seed in SEEDS:
            body = {"candidate": BASELINE.to_components(), "seed": seed}
            response = await client.post("/rollout", json=body)
            assert response.status_code == 200, response.text
            results.append(response.json())
    await openai_client.close()

    for seed, result in zip(SEEDS, results, strict=True):
        trace, calls = result["trace"], result["trace"]["tool_calls"]
        assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
        steps = [e for e in trace["events"] if e.get("type") == "step"]
        assert 1 <= len(steps) <= settings.max_steps  # one model call per step, bounded
        # Every action the student wrote was run by the calculator and answered once, in order.
        observations = [
            m["content"].removeprefix("Observation: ")
            for m in trace["messages"]
            if m["role"] == "user" and m["content"].startswith("Observation: ")
        ]
        assert observations == [_observation(call) for call in calls]
        # Scored on the number it answered, whatever it was; the feedback counts the calls.
        answered = first_number(str(result["output"] or ""))
        right = bool(answered) and math.isclose(float(answered), _expected(seed), abs_tol=0.01)
        assert result["reward"] == (1.0 if right else 0.0), (seed, result["output"])
        count = len(calls)
        assert f"({count} calculator call{'' if count == 1 else 's'})" in result["feedback"]
