"""A container written without the SDK (plain Starlette) speaks gepa-container/1 too.

The optimizer only relies on the wire models, so any app whose answers validate against
``Health``, ``Program`` and ``RolloutResponse`` is a task container.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from schemas import PROTOCOL, ErrorBody, Health, Program, RolloutRequest, RolloutResponse

SEEDS = {"q1": ("2+2", "4"), "q2": ("3*3", "9"), "q3": ("10-7", "3")}


def _hand_written_container() -> Starlette:
    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": PROTOCOL})

    async def program(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "protocol": PROTOCOL,
                "program_id": "calc",
                "fingerprint": "v1",
                "components": [{"name": "system_prompt", "kind": "prompt", "text": "Compute."}],
                "seeds": {"train": ["q1", "q2"], "holdout": ["q3"]},
                "x-extension": "ignored by older peers",
            }
        )

    async def rollout(request: Request) -> JSONResponse:
        body = await request.json()
        if body.get("seed") not in SEEDS:
            return JSONResponse({"error": {"type": "UnknownSeed", "message": "no such seed"}}, 404)
        question, answer = SEEDS[body["seed"]]
        output = answer if "python" in body["candidate"]["system_prompt"] else "?"
        reward = float(output == answer)
        return JSONResponse(
            {
                "reward": reward,
                "objectives": {"reward": reward},
                "output": output,
                "feedback": f"predicted {output}, expected {answer}",
                "trace": {"messages": [{"role": "user", "content": question}]},
                "usage": {"input_tokens": 5, "output_tokens": 1},
            }
        )

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/program", program),
            Route("/rollout", rollout, methods=["POST"]),
        ]
    )


async def test_hand_written_container_validates(
    client_for: Callable[..., httpx.AsyncClient],
) -> None:
    async with client_for(_hand_written_container()) as client:
        health = Health.model_validate((await client.get("/health")).json())
        program = Program.model_validate((await client.get("/program")).json())
        request = RolloutRequest(candidate={"system_prompt": "Use python."}, seed="q2")
        ok = await client.post("/rollout", json=request.model_dump())
        baseline = await client.post(
            "/rollout", json={**request.model_dump(), "candidate": program.baseline()}
        )
        unknown = await client.post("/rollout", json={**request.model_dump(), "seed": "zz"})
    assert health.protocol == PROTOCOL
    assert program.baseline() == {"system_prompt": "Compute."} and program.seeds.val == []
    assert RolloutResponse.model_validate(ok.json()).reward == 1.0
    scored = RolloutResponse.model_validate(baseline.json())
    assert (scored.reward, scored.feedback, scored.usage.cost_usd) == (
        0.0,
        "predicted ?, expected 9",
        0.0,
    )
    assert unknown.status_code == 404
    assert ErrorBody.model_validate(unknown.json()).error.type == "UnknownSeed"


@pytest.mark.parametrize(
    ("model", "body", "field"),
    [
        (RolloutResponse, {"objectives": {}, "output": "x"}, "reward"),
        (
            Program,
            {"program_id": "p", "fingerprint": "f", "components": [{"name": "a", "text": "t"}]},
            "seeds",
        ),
        (
            Program,
            {
                "program_id": "p",
                "fingerprint": "f",
                "seeds": {"train": []},
                "components": [{"name": "a"}],
            },
            "components.0.text",
        ),
        (ErrorBody, {"error": {"type": "X"}}, "error.message"),
    ],
)
def test_a_missing_required_field_is_rejected_by_name(
    model: Any, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(body)
    locations = {".".join(str(p) for p in error["loc"]) for error in info.value.errors()}
    assert field in locations
    assert f"{field}\n  Field required" in str(info.value)
