"""Branch, compare and why over the REST API in-process, on a finished run of the toy container."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.service import ServiceSettings
from tests.service.conftest import run_config, service, wait_status


@pytest.fixture
async def finished(tmp_path: Path, toy_app: Any, reflection_url: str) -> Any:
    """(API client, the finished run's view, its candidates best first)."""
    async with service(tmp_path / "ws", toy_app) as (api, _):
        made = await api.post(
            "/api/runs", json={"config": run_config(reflection_url), "start": True}
        )
        assert made.status_code == 201, made.text
        view = await wait_status(api, made.json()["run_id"], {"completed", "failed"})
        assert view["status"] == "completed", view["error"]
        ranked = (await api.get(f"/api/runs/{view['run_id']}/candidates")).json()["candidates"]
        assert len(ranked) >= 2
        yield api, view, ranked


async def test_why_names_every_candidates_decision_and_its_numbers(finished: Any) -> None:
    api, view, ranked = finished
    run_id = view["run_id"]
    why = (await api.get(f"/api/runs/{run_id}/why")).json()
    assert why["run_id"] == run_id and why["method"] == "gepa" and why["status"] == "completed"
    by_id = {c["candidate_id"]: c for c in why["candidates"]}
    assert set(by_id) == {c["candidate_id"] for c in ranked}
    best = ranked[0]["candidate_id"]
    assert by_id[best]["decision"].startswith("winner")
    assert by_id[best]["scores"]["train"] == pytest.approx(ranked[0]["train_mean"])
    assert all(c["decision"] and c["because"] for c in by_id.values())
    one = (await api.get(f"/api/runs/{run_id}/why", params={"candidate": best[:8]})).json()
    assert [c["candidate_id"] for c in one["candidates"]] == [best]
    missing = await api.get(f"/api/runs/{run_id}/why", params={"candidate": "zzzzzz"})
    assert missing.status_code == 404 and "runs show" in missing.json()["error"]["message"]
    assert (await api.get("/api/runs/nope/why")).status_code == 404


async def test_compare_shows_the_diff_and_the_seeds_where_they_differ(finished: Any) -> None:
    api, view, ranked = finished
    run_id, best, base = view["run_id"], ranked[0]["candidate_id"], view["baseline"]["candidate_id"]
    paid = view["budget"]["paid"]
    found = await api.get(f"/api/runs/{run_id}/compare", params={"a": base, "b": best[:10]})
    assert found.status_code == 200, found.text
    doc = found.json()
    assert (doc["a"]["candidate_id"], doc["b"]["candidate_id"]) == (base, best)
    assert doc["diff"] and doc["splits"]["train"]["seeds"] and doc["differing"]
    assert doc["splits"]["train"]["b_mean"] > doc["splits"]["train"]["a_mean"]
    assert (await api.get(f"/api/runs/{run_id}")).json()["budget"]["paid"] == paid  # free
    half = await api.get(f"/api/runs/{run_id}/compare", params={"a": base})
    assert half.status_code == 422 and "?a=CANDIDATE&b=CANDIDATE" in half.json()["error"]["message"]
    same = await api.get(f"/api/runs/{run_id}/compare", params={"a": base, "b": base})
    assert same.status_code == 422 and "same candidate" in same.json()["error"]["message"]
    unknown = await api.get(f"/api/runs/{run_id}/compare", params={"a": base, "b": "zzzzzz"})
    assert unknown.status_code == 404
    page = await api.get(f"/runs/{run_id}/compare", params={"a": base, "b": best})
    assert page.status_code == 200 and "/static/compare.js" in page.text
    assert (await api.get("/runs/nope/compare")).status_code == 404


async def test_a_branch_is_created_linked_both_ways_and_run(finished: Any) -> None:
    api, view, ranked = finished
    run_id = view["run_id"]
    start = next(c["candidate_id"] for c in ranked if c["origin"] != "seed")
    made = await api.post(
        f"/api/runs/{run_id}/branch",
        json={"candidate_id": start[:8], "config": {"max_metric_calls": 120}, "start": True},
    )
    assert made.status_code == 201, made.text
    branch = made.json()
    assert branch["branch_of"] == {"run_id": run_id, "candidate_id": start}
    assert branch["config"]["max_metric_calls"] == 120 and branch["active"]
    done = await wait_status(api, branch["run_id"], {"completed", "failed"})
    assert done["status"] == "completed", done["error"]
    assert done["baseline"]["candidate_id"] == start
    origin = (await api.get(f"/api/runs/{run_id}")).json()
    assert origin["branches"] == [{"run_id": branch["run_id"], "candidate_id": start}]
    listed = {r["run_id"]: r for r in (await api.get("/api/runs")).json()["runs"]}
    assert listed[run_id]["branches"] == origin["branches"]


async def test_a_bad_branch_is_refused_with_its_fix(finished: Any) -> None:
    api, view, ranked = finished
    run_id, cid = view["run_id"], ranked[0]["candidate_id"]

    async def branch(body: dict[str, Any], run: str = run_id) -> httpx.Response:
        return await api.post(f"/api/runs/{run}/branch", json=body)

    assert (await branch({"candidate_id": cid}, "nope")).status_code == 404
    unknown = await branch({"candidate_id": "zzzzzz"})
    assert unknown.status_code == 404 and "has no candidate" in unknown.json()["error"]["message"]
    bad = await branch({"candidate_id": cid, "config": {"concurrency": 0}})
    assert bad.status_code == 422 and "concurrency" in bad.json()["error"]["message"]
    typo = await branch({"candidate_id": cid, "confg": {}})
    assert typo.status_code == 422
    refused = await branch({"candidate_id": cid, "config": {"proposer_command": "echo"}})
    assert refused.status_code == 403 and "--allow-proposer-command" in refused.text
    runs = (await api.get("/api/runs")).json()["runs"]
    assert [r["run_id"] for r in runs] == [run_id]  # nothing was stored
    stray = await api.post(
        "/api/runs",
        json={"config": {**view["config"], "container_token": None,
                         "branch_of": {"run_id": run_id, "candidate_id": "zzzzzz"}}},
    )  # fmt: skip
    assert stray.status_code == 400 and "has no candidate" in stray.json()["error"]["message"]


async def test_the_branch_routes_pass_the_token(tmp_path: Path, toy_app: Any) -> None:
    async with service(tmp_path / "ws", toy_app, ServiceSettings(token="t0k")) as (api, _):
        for method, path in (
            ("POST", "/api/runs/r/branch"),
            ("GET", "/api/runs/r/compare?a=x&b=y"),
            ("GET", "/api/runs/r/why"),
        ):
            response = await api.request(method, path, json={} if method == "POST" else None)
            assert response.status_code == 401, (path, response.text)
