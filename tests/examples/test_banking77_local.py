"""One real Banking77 rollout on the local 0.5B student (needs the local model)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI

from examples.banking77 import (
    BASELINE,
    SampleConfig,
    StudentSettings,
    create_banking77_app,
    load_labels,
)

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


async def test_real_rollout_is_scored_with_a_label(local_llm_base_url: str, tmp_path: Path) -> None:
    settings = StudentSettings(model="student", base_url=local_llm_base_url)
    openai_client = AsyncOpenAI(base_url=local_llm_base_url, api_key="local", max_retries=0)
    app = create_banking77_app(
        settings=settings,
        sample=SampleConfig(train_size=2, holdout_size=2),
        client=openai_client,
        dataset_dir=tmp_path,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://c", timeout=180) as client:
        seed = (await client.get("/program")).json()["seeds"]["train"][0]
        body = {"candidate": {"system_prompt": BASELINE}, "seed": seed}
        response = await client.post("/rollout", json=body)
    await openai_client.close()
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["output"] in {*load_labels(), "unknown"}
    assert result["reward"] in (0.0, 1.0)
    assert result["feedback"]
    assert result["usage"]["input_tokens"] > 300  # the 77 labels are in the prompt
    assert [m["role"] for m in result["trace"]["messages"]] == ["system", "user", "assistant"]
