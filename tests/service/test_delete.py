"""``DELETE /api/runs/{id}``: a run that is not running goes with its rows and its folder;
what another run used of it stays. And a rollout is served only under a run that used it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.cli import main
from optimizer.service import RunManager, StreamSettings
from optimizer.service.sse import event_stream
from schemas import RunConfig
from tests.service.conftest import run_config, service, wait_status
from workspace import Workspace

TABLES = ("runs", "candidates", "events", "frontier", "trials")


def _rows(db: Path, run_id: str) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        counts = {
            table: conn.execute(
                f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            for table in (*TABLES, "rollouts")
        }
    return counts


async def _completed(api: httpx.AsyncClient, reflection_url: str, **extra: Any) -> str:
    created = await api.post(
        "/api/runs", json={"config": run_config(reflection_url, **extra), "start": True}
    )
    assert created.status_code == 201, created.text
    view = await wait_status(api, created.json()["run_id"], {"completed", "failed"})
    assert view["status"] == "completed", view["error"]
    return str(view["run_id"])


async def _feed(api: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    page = await api.get(f"/api/runs/{run_id}/rollouts", params={"limit": 1000})
    return page.json()["rollouts"]  # type: ignore[no-any-return]


async def test_delete_removes_the_run_and_keeps_what_another_run_reused(
    tmp_path: Path, toy_app: Any, reflection_url: str
) -> None:
    root = tmp_path / "ws"
    async with service(root, toy_app) as (api, _):
        first = await _completed(api, reflection_url)
        # The same baseline (served from first's cache) and a smaller budget: part of it reused.
        second = await _completed(api, reflection_url, max_metric_calls=40)
        second_view = (await api.get(f"/api/runs/{second}")).json()
        second_feed = await _feed(api, second)
        assert second_view["budget"]["cached"] > 0
        before = _rows(root / "workspace.sqlite", first)
        assert all(before[t] > 0 for t in (*TABLES, "rollouts"))
        assert (root / "runs" / first / "evidence.json").is_file()

        deleted = await api.delete(f"/api/runs/{first}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["run_id"] == first
        assert deleted.json()["deleted"]["trials"] == before["trials"]

        assert (await api.get(f"/api/runs/{first}")).status_code == 404
        assert (await api.delete(f"/api/runs/{first}")).status_code == 404
        assert [r["run_id"] for r in (await api.get("/api/runs")).json()["runs"]] == [second]
        # The other run reads exactly as before, its cached trials included.
        assert (await api.get(f"/api/runs/{second}")).json()["budget"] == second_view["budget"]
        assert await _feed(api, second) == second_feed
        for trial in second_feed[:5]:
            path = f"/api/runs/{second}/rollouts/{trial['rollout_id']}"
            assert (await api.get(path)).status_code == 200, path
    after = _rows(root / "workspace.sqlite", first)
    assert {t: after[t] for t in TABLES} == dict.fromkeys(TABLES, 0)
    with sqlite3.connect(root / "workspace.sqlite") as conn:
        reused = {t["cache_key"] for t in second_feed}
        kept = {
            k for (k,) in conn.execute("SELECT cache_key FROM rollouts WHERE run_id = ?", (first,))
        }
    assert 0 < after["rollouts"] < before["rollouts"] and kept <= reused
    assert not (root / "runs" / first).exists()


async def test_a_running_run_is_not_deleted(
    tmp_path: Path, toy_app: Any, reflection_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOY_DELAY", "0.05")
    async with service(tmp_path / "ws", toy_app) as (api, app):
        run_id = (
            await api.post("/api/runs", json={"config": run_config(reflection_url), "start": True})
        ).json()["run_id"]
        refused = await api.delete(f"/api/runs/{run_id}")
        assert refused.status_code == 409
        assert (
            f"cancel it first (POST /api/runs/{run_id}/cancel)"
            in refused.json()["error"]["message"]
        )
        assert (await api.post(f"/api/runs/{run_id}/cancel")).status_code == 200
        assert (await api.delete(f"/api/runs/{run_id}")).status_code == 200

        elsewhere = (
            await api.post("/api/runs", json={"config": run_config(reflection_url)})
        ).json()
        await app.state.manager.workspace.update_run(
            elsewhere["run_id"], status="running"
        )  # as a CLI process running it in the same workspace would
        refused = await api.delete(f"/api/runs/{elsewhere['run_id']}")
        assert refused.status_code == 409
        assert "stop the process that runs it first" in refused.json()["error"]["message"]
        assert (await api.get(f"/api/runs/{elsewhere['run_id']}")).status_code == 200


async def test_a_rollout_is_served_only_under_a_run_that_used_it(
    tmp_path: Path, toy_app: Any, reflection_url: str
) -> None:
    async with service(tmp_path / "ws", toy_app) as (api, _):
        first = await _completed(api, reflection_url)
        other = (await api.post("/api/runs", json={"config": run_config(reflection_url)})).json()
        paid = [t["rollout_id"] for t in await _feed(api, first) if not t["cached"]]
        assert paid
        for rollout_id in paid[:5]:
            assert (await api.get(f"/api/runs/{first}/rollouts/{rollout_id}")).status_code == 200
            foreign = await api.get(f"/api/runs/{other['run_id']}/rollouts/{rollout_id}")
            assert foreign.status_code == 404, rollout_id
            assert f"GET /api/runs/{other['run_id']}/rollouts" in foreign.json()["error"]["message"]
        # A later run that reuses the cache is shown the rollouts it reused, under its own id.
        second = await _completed(api, reflection_url)
        reused = [t for t in await _feed(api, second) if t["cached"]]
        assert any(t["rollout_id"] in paid for t in reused)  # the first run's rows
        for trial in reused[:5]:
            shown = await api.get(f"/api/runs/{second}/rollouts/{trial['rollout_id']}")
            assert shown.status_code == 200 and shown.json()["cache_key"] == trial["cache_key"]


async def test_a_followed_run_that_is_deleted_ends_its_stream(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        manager = RunManager(ws)
        run = await manager.create(
            RunConfig(containers=["http://127.0.0.1:9"], reflection_model="m")
        )
        stream = event_stream(manager, run.run_id, 0, StreamSettings(heartbeat_s=10))
        assert await anext(stream) == b"retry: 2000\n\n"
        await anext(stream)  # the first heartbeat
        await manager.delete(run.run_id)
        ending = (await asyncio.wait_for(anext(stream), 5)).decode()
        assert ending.startswith("event: end") and '"status":"deleted"' in ending
        with pytest.raises(StopAsyncIteration):
            await anext(stream)


def test_runs_delete_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    flags = ["--container", "http://127.0.0.1:9", "--reflection-model", "m"]
    assert main(["optimize", "create", "--no-check", *flags, "--workspace", str(root)]) == 0
    run_id = capsys.readouterr().out.splitlines()[0]

    async def mark_running() -> None:
        async with Workspace(root) as ws:
            await ws.write_file(run_id, "report.md", "# partial")
            await ws.update_run(run_id, status="running")

    asyncio.run(mark_running())
    assert main(["runs", "delete", run_id, "--workspace", str(root)]) == 2
    assert "has status running: stop the process that runs it" in capsys.readouterr().err
    assert (root / "runs" / run_id / "report.md").is_file()

    async def mark_cancelled() -> None:
        async with Workspace(root) as ws:
            await ws.update_run(run_id, status="cancelled")

    asyncio.run(mark_cancelled())
    assert main(["runs", "delete", run_id, "--workspace", str(root)]) == 0
    assert f"deleted run {run_id}" in capsys.readouterr().out
    assert main(["runs", "list", "--workspace", str(root), "--json"]) == 0
    assert run_id not in capsys.readouterr().out
    assert not (root / "runs" / run_id).exists()
    assert main(["runs", "delete", run_id, "--workspace", str(root)]) == 2
    assert f"unknown run '{run_id}'" in capsys.readouterr().err
