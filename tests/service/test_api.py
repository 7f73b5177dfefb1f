"""The REST API in-process (httpx.ASGITransport): create, start, follow, inspect, cancel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from optimizer.service import RunPolicy, ServiceSettings
from optimizer.testing import thread_server
from optimizer.testing.toy import TOY, TOY_CONTAINER, TOY_DATA, TOY_SPLITS
from schemas import RunConfig
from tests.service.conftest import parse_sse, run_config, service, wait_status
from workspace import Workspace


async def _create(
    api: httpx.AsyncClient, reflection_url: str, *, start: bool = False, **extra: Any
) -> dict[str, Any]:
    response = await api.post(
        "/api/runs", json={"config": run_config(reflection_url, **extra), "start": start}
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_create_stores_the_run_without_secrets_and_does_not_start_it(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    view = await _create(api, reflection_url, container_token="tok-very-secret-123")
    assert view["status"] == "created" and view["phase"] == "created" and view["active"] is False
    assert view["config"]["container_token"] == "***"
    assert "tok-very-secret-123" not in json.dumps(view)
    assert view["budget"] == {
        "paid": 0,
        "cached": 0,
        "errors": 0,
        "limit": 200,
        "retries": 0,
        "cost_usd": 0.0,
        "max_cost_usd": None,
    }
    listed = (await api.get("/api/runs")).json()["runs"]
    assert [r["run_id"] for r in listed] == [view["run_id"]]
    assert "tok-very-secret-123" not in (await api.get("/api/runs")).text


async def test_invalid_configs_are_422_naming_the_field(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    bad = await api.post("/api/runs", json={"config": run_config(reflection_url, concurrency=0)})
    assert bad.status_code == 422 and "concurrency" in bad.json()["error"]["message"]
    typo = await api.post(
        "/api/runs", json={"config": run_config(reflection_url, max_metric_cals=5)}
    )
    assert typo.status_code == 422 and "max_metric_cals" in typo.json()["error"]["message"]
    no_source = await api.post("/api/runs", json={"config": {"reflection_model": "m"}})
    assert no_source.status_code == 422 and "containers" in no_source.json()["error"]["message"]
    no_model = await api.post("/api/runs", json={"config": {"containers": ["http://x"]}})
    assert no_model.status_code == 422 and "reflection_model" in no_model.json()["error"]["message"]
    not_json = await api.post(
        "/api/runs", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code == 422
    assert (await api.get("/api/runs")).json()["runs"] == []


async def test_unknown_run_and_rollout_are_404_naming_the_fix(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    for path in (
        "/api/runs/nope",
        "/api/runs/nope/candidates",
        "/api/runs/nope/events",
        "/api/runs/nope/evidence",
    ):
        response = await api.get(path)
        assert response.status_code == 404, path
        assert "GET /api/runs" in response.json()["error"]["message"]
    assert (await api.post("/api/runs/nope/start")).status_code == 404
    view = await _create(api, reflection_url)
    missing = await api.get(f"/api/runs/{view['run_id']}/rollouts/999999")
    assert missing.status_code == 404 and "unknown rollout" in missing.json()["error"]["message"]
    evidence = await api.get(f"/api/runs/{view['run_id']}/evidence")
    assert (
        evidence.status_code == 404
        and "when the run completes" in evidence.json()["error"]["message"]
    )
    page = await api.get("/runs/nope")
    assert page.status_code == 404 and "list of runs" in page.text
    route = await api.get("/api/nothing-here")
    assert route.status_code == 404 and "/openapi.json" in route.json()["error"]["message"]


async def test_a_started_run_completes_and_everything_about_it_is_served(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    created = await _create(api, reflection_url)
    run_id = created["run_id"]
    started = await api.post(f"/api/runs/{run_id}/start")
    assert started.status_code == 202 and started.json()["status"] == "running"
    view = await wait_status(api, run_id, {"completed", "failed"})
    assert view["status"] == "completed", view["error"]
    assert view["phase"] == "completed" and view["program_id"] == "toy-labels"
    assert 0 < view["budget"]["paid"] <= 200 and view["budget"]["limit"] == 200
    assert view["best"]["mean"] > view["baseline"]["mean"] == 0.0
    assert view["promotion"]["promoted"] is True

    candidates = (await api.get(f"/api/runs/{run_id}/candidates")).json()["candidates"]
    assert (
        candidates[0]["candidate_id"] == view["best"]["candidate_id"] and candidates[0]["is_best"]
    )
    means = [c["train_mean"] for c in candidates if c["train_mean"] is not None]
    assert means == sorted(means, reverse=True)
    assert {c["origin"] for c in candidates} >= {"seed", "mutation"}
    assert all(c["parents"] for c in candidates if c["origin"] == "mutation")

    first = (await api.get(f"/api/runs/{run_id}/rollouts", params={"limit": 5})).json()
    second = (
        await api.get(f"/api/runs/{run_id}/rollouts", params={"offset": 5, "limit": 5})
    ).json()
    assert (
        first["total"]
        == view["budget"]["paid"] + view["budget"]["cached"] + view["budget"]["errors"]
    )
    assert len(first["rollouts"]) == 5 and [r["seq"] for r in first["rollouts"]] < [
        r["seq"] for r in second["rollouts"]
    ]
    everything = (await api.get(f"/api/runs/{run_id}/rollouts", params={"limit": 1000})).json()[
        "rollouts"
    ]
    assert len(everything) == first["total"]
    assert all(
        r["rollout_id"] is not None and r["reward"] is not None for r in everything
    )  # cached ones too
    trial = everything[0]
    rollout = (await api.get(f"/api/runs/{run_id}/rollouts/{trial['rollout_id']}")).json()
    assert rollout["seed"] == trial["seed"] and rollout["trace"]["messages"][0]["role"] == "system"
    assert rollout["feedback"] == trial["feedback"]

    packet = (await api.get(f"/api/runs/{run_id}/evidence")).json()
    assert (
        packet["run_id"] == run_id
        and packet["best"]["candidate_id"] == view["best"]["candidate_id"]
    )

    again = await api.post(f"/api/runs/{run_id}/start")
    assert again.status_code == 409 and "already completed" in again.json()["error"]["message"]
    assert (await api.post(f"/api/runs/{run_id}/cancel")).status_code == 409


async def test_sse_replays_the_log_and_resumes_after_last_event_id(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    run_id = (await _create(api, reflection_url, start=True))["run_id"]
    await wait_status(api, run_id, {"completed"})
    body = (await api.get(f"/api/runs/{run_id}/events")).text
    messages = parse_sse(body)
    events = [json.loads(data) for name, _, data in messages if name is None]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert [int(ident) for name, ident, _ in messages if name is None] == [e["seq"] for e in events]
    types = {e["type"] for e in events}
    assert {
        "status",
        "program",
        "phase",
        "trials",
        "scored",
        "iteration",
        "candidate",
        "gate",
        "frontier",
        "promotion",
    } <= types
    assert messages[-1][0] == "end" and json.loads(messages[-1][2])["status"] == "completed"
    middle = events[len(events) // 2]["seq"]
    resumed = parse_sse(
        (await api.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": str(middle)})).text
    )
    resumed_seqs = [json.loads(d)["seq"] for n, _, d in resumed if n is None]
    assert resumed_seqs == [e["seq"] for e in events if e["seq"] > middle]
    by_query = parse_sse(
        (await api.get(f"/api/runs/{run_id}/events", params={"after": middle})).text
    )
    assert [json.loads(d)["seq"] for n, _, d in by_query if n is None] == resumed_seqs
    bad = await api.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400


async def test_concurrent_runs_do_not_block_each_other(
    api: httpx.AsyncClient, reflection_url: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("TOY_DELAY", "0.002")
    a = (await _create(api, reflection_url, start=True, seed=1))["run_id"]
    b = (await _create(api, reflection_url, start=True, seed=2))["run_id"]
    views = (await api.get("/api/runs")).json()["runs"]
    assert {v["run_id"] for v in views if v["active"]} == {a, b}  # both in flight at once
    done = await asyncio.gather(
        wait_status(api, a, {"completed", "failed"}), wait_status(api, b, {"completed", "failed"})
    )
    assert [v["status"] for v in done] == ["completed", "completed"], [v["error"] for v in done]


async def test_cancel_then_start_again_resumes_the_run(
    api: httpx.AsyncClient, reflection_url: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("TOY_DELAY", "0.02")
    run_id = (await _create(api, reflection_url, start=True, concurrency=2))["run_id"]
    while (await api.get(f"/api/runs/{run_id}")).json()["budget"]["paid"] < 10:
        await asyncio.sleep(0.02)
    cancelled = await api.post(f"/api/runs/{run_id}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["active"] is False
    paid_before = cancelled.json()["budget"]["paid"]
    events = parse_sse((await api.get(f"/api/runs/{run_id}/events")).text)
    assert events[-1][0] == "end" and json.loads(events[-1][2])["status"] == "cancelled"
    monkeypatch.setenv("TOY_DELAY", "0")
    assert (await api.post(f"/api/runs/{run_id}/start")).status_code == 202
    view = await wait_status(api, run_id, {"completed", "failed"})
    assert view["status"] == "completed", view["error"]
    assert view["budget"]["paid"] >= paid_before


async def test_unreachable_container_fails_the_run_with_the_fix(
    tmp_path: Path, reflection_url: str
) -> None:
    async with service(tmp_path / "ws", None) as (api, _):
        run_id = (
            await _create(api, reflection_url, start=True, containers=["http://127.0.0.1:9"])
        )["run_id"]
        view = await wait_status(api, run_id, {"failed"}, timeout=20)
        assert (
            "no container answers GET /health" in view["error"]
            and "gepa-runtime container" in view["error"]
        )
        events = parse_sse((await api.get(f"/api/runs/{run_id}/events")).text)
    assert json.loads(events[-1][2])["status"] == "failed"


async def test_module_run_is_served_in_process(
    tmp_path: Path, toy_app: Any, reflection_url: str
) -> None:
    """A module inside a folder the operator allowed (``serve --allow-modules DIR``)."""
    config = run_config(
        reflection_url,
        containers=[],
        module=str(TOY_CONTAINER),
        dataset=str(TOY_DATA),
        splits_file=str(TOY_SPLITS),
    )
    allowed = ServiceSettings(policy=RunPolicy(module_roots=(TOY,)))
    async with service(tmp_path / "ws", toy_app, allowed) as (api, _):
        created = await api.post("/api/runs", json={"config": config, "start": True})
        assert created.status_code == 201, created.text
        view = await wait_status(api, created.json()["run_id"], {"completed", "failed"})
    assert view["status"] == "completed", view["error"]
    assert view["program_id"] == "toy-labels" and view["config"]["module"].endswith(
        "toy_container.py"
    )


async def test_openapi_describes_every_route(api: httpx.AsyncClient) -> None:
    spec = (await api.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.")
    assert {
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/start",
        "/api/runs/{run_id}/cancel",
        "/api/runs/{run_id}/candidates",
        "/api/runs/{run_id}/rollouts",
        "/api/runs/{run_id}/rollouts/{rollout_id}",
        "/api/runs/{run_id}/evidence",
        "/api/runs/{run_id}/events",
    } <= set(spec["paths"])
    schemas = spec["components"]["schemas"]
    assert "max_metric_calls" in schemas["RunConfig"]["properties"]
    refs = {ref for ref in json.dumps(spec).split('"') if ref.startswith("#/components/schemas/")}
    assert {r.rsplit("/", 1)[1] for r in refs} <= set(schemas)


async def test_console_pages_and_static_files_are_served(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    run_id = (await _create(api, reflection_url))["run_id"]
    index = await api.get("/")
    assert index.status_code == 200 and "/static/index.js" in index.text
    page = await api.get(f"/runs/{run_id}")
    assert page.status_code == 200 and "/static/run.js" in page.text
    for name in ("console.css", "common.js", "run.js", "widgets.js", "index.js"):
        assert (await api.get(f"/static/{name}")).status_code == 200, name


async def test_restart_resumes_the_services_running_runs_only(
    tmp_path: Path, toy_app: Any, reflection_url: str, monkeypatch: Any
) -> None:
    root = tmp_path / "ws"
    monkeypatch.setenv("TOY_DELAY", "0.02")
    async with service(root, toy_app) as (client, _):
        run_id = (await _create(client, reflection_url, start=True, concurrency=2))["run_id"]
        while (await client.get(f"/api/runs/{run_id}")).json()["budget"]["paid"] < 6:
            await asyncio.sleep(0.02)
    # The service stopped mid-run: the run stays "running" (not cancelled) for the next start.
    async with Workspace(root) as ws:
        assert (await ws.get_run(run_id)).status == "running"
        foreign = await ws.create_run(
            RunConfig(containers=["http://127.0.0.1:9"], reflection_model="m")
        )
        await ws.update_run(
            foreign.run_id, status="running"
        )  # as a CLI process in the workspace would
    monkeypatch.setenv("TOY_DELAY", "0")
    async with service(root, toy_app) as (client, _):
        assert (await client.get(f"/api/runs/{run_id}")).json()["active"] is True
        view = await wait_status(client, run_id, {"completed", "failed"})
        assert view["status"] == "completed", view["error"]
        other = (await client.get(f"/api/runs/{foreign.run_id}")).json()
        assert other["status"] == "running" and other["active"] is False
    async with Workspace(root, readonly=True) as ws:
        events = await ws.events_since(run_id, 0, 10000)
    statuses = [e.data["status"] for e in events if e.type == "status"]
    assert statuses[:3] == ["started", "interrupted", "resumed"]


async def test_the_container_token_reaches_the_container_but_is_never_stored(
    tmp_path: Path, reflection_url: str
) -> None:
    from container import create_app as container_app
    from container import load_target

    guarded = container_app(
        load_target(str(TOY_CONTAINER)),
        dataset=TOY_DATA,
        splits=TOY_SPLITS,
        token="ctok-abcdef",
    )
    # A real socket, and no shared client: each run's ContainerClient carries its own token.
    with thread_server(guarded) as url:
        async with service(tmp_path / "ws", None) as (api, _):
            with_token = await _create(
                api, reflection_url, start=True, containers=[url], container_token="ctok-abcdef"
            )
            without = await _create(api, reflection_url, start=True, containers=[url])
            ok = await wait_status(api, with_token["run_id"], {"completed", "failed"})
            refused = await wait_status(api, without["run_id"], {"completed", "failed"})
    assert ok["status"] == "completed", ok["error"]
    assert refused["status"] == "failed" and "refused the token" in refused["error"]
    assert "--token" in refused["error"]
    async with Workspace(tmp_path / "ws", readonly=True) as ws:
        stored = await ws.get_run(with_token["run_id"])
    assert stored.config["container_token"] == "***"
    assert "ctok-abcdef" not in (tmp_path / "ws" / "workspace.sqlite").read_bytes().decode(
        "latin-1"
    )


async def test_two_starts_at_once_start_the_run_once(
    api: httpx.AsyncClient, reflection_url: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("TOY_DELAY", "0.005")
    run_id = (await _create(api, reflection_url))["run_id"]
    first, second = await asyncio.gather(
        api.post(f"/api/runs/{run_id}/start"), api.post(f"/api/runs/{run_id}/start")
    )
    assert sorted([first.status_code, second.status_code]) == [202, 409]
    conflict = first if first.status_code == 409 else second
    assert "already running" in conflict.json()["error"]["message"]
    view = await wait_status(api, run_id, {"completed", "failed"})
    assert view["status"] == "completed", view["error"]


async def test_the_service_token_is_never_stored_even_where_a_config_repeats_it(
    tmp_path: Path, reflection_url: str
) -> None:
    token = "svc-Token-0123456789"  # no known key shape: only the service knows it is secret
    async with service(tmp_path / "ws", None, ServiceSettings(token=token)) as (api, _):
        api.headers["Authorization"] = f"Bearer {token}"
        view = await _create(api, reflection_url, task_model=f"student ({token})")
    assert token not in json.dumps(view)
    stored = (tmp_path / "ws" / "workspace.sqlite").read_bytes().decode("latin-1")
    assert token not in stored and view["config"]["task_model"] == "student (***)"
