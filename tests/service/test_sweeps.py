"""Sweeps on the service: POST /api/sweeps runs one run per student model, then compares them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.fakes.model_container import MODELS, ModelContainer
from tests.service.conftest import run_config, service


async def test_a_sweep_runs_each_model_and_serves_the_comparison(
    tmp_path: Path, reflection_url: str
) -> None:
    box = ModelContainer()
    async with service(tmp_path / "ws", box.app()) as (api, _):
        body = {
            "config": run_config(reflection_url, max_metric_calls=120, proposals_in_flight=1),
            "student_models": ",".join(MODELS),
            "target_score": 0.8,
        }
        created = await api.post("/api/sweeps", json=body)
        assert created.status_code == 201, created.text
        sweep = created.json()
        assert list(sweep["runs"]) == list(MODELS)
        deadline = time.monotonic() + 120
        while not (view := (await api.get(f"/api/sweeps/{sweep['sweep_id']}")).json())["finished"]:
            assert time.monotonic() < deadline, view
            await asyncio.sleep(0.1)
        page = await api.get(f"/sweeps/{sweep['sweep_id']}")
        missing = await api.get("/api/sweeps/sweep-nope")
        spec = (await api.get("/openapi.json")).json()
    comparison = view["comparison"]
    assert comparison["winner"] == "gpt-4.1-mini"
    assert [m["status"] for m in comparison["models"]] == ["completed"] * 3
    assert [m["run_id"] for m in comparison["models"]] == list(sweep["runs"].values())
    assert page.status_code == 200 and "/static/sweep.js" in page.text
    assert missing.status_code == 404 and "POST /api/sweeps" in missing.json()["error"]["message"]
    assert {"/api/sweeps", "/api/sweeps/{sweep_id}"} <= set(spec["paths"])
    assert (tmp_path / "ws" / "sweeps" / sweep["sweep_id"] / "comparison.md").exists()


async def test_a_sweep_without_models_is_refused(tmp_path: Path, reflection_url: str) -> None:
    async with service(tmp_path / "ws", ModelContainer().app()) as (api, _):
        answer = await api.post(
            "/api/sweeps", json={"config": run_config(reflection_url), "student_models": []}
        )
    assert answer.status_code == 422 and "at least one model" in answer.json()["error"]["message"]
