"""The calculator container on the real local 0.5B student: does it call the tool?"""

from __future__ import annotations

import httpx
import pytest
from openai import AsyncOpenAI

from examples.calculator import BASELINE, AgentSettings, create_calculator_app

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

# Three short train problems (one multiplication each): about 2 s per rollout on 2 cores.
SEEDS = ("calc-002", "calc-011", "calc-019")


async def test_the_student_follows_the_text_protocol_and_uses_the_calculator(
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

    for result in results:
        assert result["reward"] in (0.0, 1.0) and result["feedback"]
        assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    used = [r for r in results if any(c["result"] for c in r["trace"]["tool_calls"])]
    assert used, [r["trace"]["messages"][2:] for r in results]
    call = used[0]["trace"]["tool_calls"][0]
    messages = used[0]["trace"]["messages"]
    assert {"role": "user", "content": f"Observation: {call['result']}"} in messages
    assert any(r["reward"] == 1.0 for r in results), [r["feedback"] for r in results]
