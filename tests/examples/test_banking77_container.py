"""The Banking77 container in-process, with the student endpoint faked by respx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from openai import AsyncOpenAI

from examples.banking77 import (
    BASELINE,
    SampleConfig,
    StudentSettings,
    create_banking77_app,
    load_labels,
)

BASE = "http://student.test/v1"
SAMPLE = SampleConfig(train_size=6, holdout_size=8, seed=0)


def completion(content: str, model: str = "student") -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 420, "completion_tokens": 5, "total_tokens": 425},
    }


def make_client(tmp_path: Path, model: str = "student") -> httpx.AsyncClient:
    settings = StudentSettings(model=model, base_url=BASE)
    app = create_banking77_app(
        settings=settings,
        sample=SAMPLE,
        client=AsyncOpenAI(base_url=BASE, api_key="local", max_retries=0),
        dataset_dir=tmp_path,
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://container")


async def first_train_seed(client: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    program = (await client.get("/program")).json()
    seed = program["seeds"]["train"][0]
    return seed, program


def seed_row(tmp_path: Path, seed: str) -> dict[str, Any]:
    folder = tmp_path / "train6-holdout8-seed0"
    for line in (folder / "train.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["name"] == seed:
            return row
    raise AssertionError(seed)


async def test_program_exposes_the_prompt_and_the_sampled_seeds(tmp_path: Path) -> None:
    async with make_client(tmp_path) as client:
        _, program = await first_train_seed(client)
    assert program["program_id"] == "banking77-intent"
    assert program["components"] == [
        {
            "name": "system_prompt",
            "kind": "prompt",
            "description": program["components"][0]["description"],
            "text": BASELINE,
        }
    ]
    assert "Labels" not in program["components"][0]["text"]
    assert len(program["seeds"]["train"]) == 6 and len(program["seeds"]["holdout"]) == 8


@respx.mock(base_url=BASE, assert_all_called=True)
async def test_rollout_sends_prompt_then_labels_and_the_query(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    route = respx_mock.post("/chat/completions")
    async with make_client(tmp_path) as client:
        seed, _ = await first_train_seed(client)
        row = seed_row(tmp_path, seed)
        route.respond(json=completion(row["category"]))
        body = {"candidate": {"system_prompt": "Be precise."}, "seed": seed}
        response = await client.post("/rollout", json=body)
    assert response.status_code == 200, response.text
    sent = json.loads(route.calls.last.request.content)
    system, user = sent["messages"]
    assert system["role"] == "system"
    assert system["content"] == "Labels: " + ", ".join(load_labels()) + "\n\nBe precise."
    assert user == {"role": "user", "content": row["text"]}
    assert sent["model"] == "student" and sent["temperature"] == 0 and sent["max_tokens"] <= 24
    result = response.json()
    assert result["reward"] == 1.0
    assert result["output"] == row["category"]
    assert result["feedback"] == f"correct: predicted {row['category']}"
    assert result["usage"]["input_tokens"] == 420 and result["usage"]["output_tokens"] == 5
    roles = [m["role"] for m in result["trace"]["messages"]]
    assert roles == ["system", "user", "assistant"]


@respx.mock(base_url=BASE)
async def test_wrong_answer_and_policy_model(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    route = respx_mock.post("/chat/completions").respond(
        json=completion("I would say this is about fees.")
    )
    async with make_client(tmp_path) as client:
        seed, _ = await first_train_seed(client)
        body = {
            "candidate": {"system_prompt": BASELINE},
            "seed": seed,
            "policy": {"model": "gpt-4o-mini"},
        }
        result = (await client.post("/rollout", json=body)).json()
    assert json.loads(route.calls.last.request.content)["model"] == "gpt-4o-mini"
    assert result["reward"] == 0.0
    assert result["output"] == "unknown"
    assert "'I would say this is about fees.' is not one of the 77 labels" in result["feedback"]
    assert result["usage"]["cost_usd"] > 0  # priced model


@pytest.mark.parametrize(("status", "expected"), [(429, 429), (503, 503)])
async def test_endpoint_faults_become_retryable_statuses(
    tmp_path: Path, status: int, expected: int
) -> None:
    with respx.mock(base_url=BASE) as mock:
        mock.post("/chat/completions").respond(status, json={"error": {"message": "busy"}})
        async with make_client(tmp_path) as client:
            seed, _ = await first_train_seed(client)
            response = await client.post(
                "/rollout", json={"candidate": {"system_prompt": BASELINE}, "seed": seed}
            )
    assert response.status_code == expected
    assert response.json()["error"]["type"] in {"RateLimitError", "InternalServerError"}


async def test_fingerprint_changes_with_the_student_model(tmp_path: Path) -> None:
    async with make_client(tmp_path, "student") as a, make_client(tmp_path, "gpt-4o-mini") as b:
        first = (await a.get("/program")).json()["fingerprint"]
        again = (await a.get("/program")).json()["fingerprint"]
        other = (await b.get("/program")).json()["fingerprint"]
    assert first == again
    assert first != other


def test_student_settings_from_env() -> None:
    assert StudentSettings.from_env({}).model == "student"
    assert StudentSettings.from_env({"OPENAI_API_KEY": "sk-x"}).model == "gpt-4o-mini"
    local = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": "http://127.0.0.1:8012/v1"}
    assert StudentSettings.from_env(local).model == "student"
    env = {"OPENAI_API_KEY": "k", "GEPA_STUDENT_MODEL": "m", "OPENAI_BASE_URL": "http://h/v1"}
    assert StudentSettings.from_env(env) == StudentSettings(
        model="m", base_url="http://h/v1", api_key="k"
    )
