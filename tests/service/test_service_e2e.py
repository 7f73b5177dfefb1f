"""End-to-end: ``gepa-runtime serve`` and a toy container as real processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.cli import main
from optimizer.testing import rollout_calls, toy_container
from tests.service.conftest import run_config, run_flags
from tests.service.processes import follow, serve_process, stop
from workspace import Workspace

pytestmark = pytest.mark.e2e


def test_create_start_and_follow_a_run_over_the_api(tmp_path: Path, reflection_url: str) -> None:
    with (
        toy_container(tmp_path / "calls.log", env={"TOY_DELAY": "0.005"}) as container,
        serve_process(tmp_path / "ws") as (url, _),
    ):
        created = httpx.post(
            f"{url}/api/runs", json={"config": run_config(reflection_url, container=container)}
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["run_id"]
        assert httpx.post(f"{url}/api/runs/{run_id}/start").status_code == 202
        events: list[dict[str, Any]] = []
        end = follow(url, run_id, events.append)
        view = httpx.get(f"{url}/api/runs/{run_id}").json()
        evidence = httpx.get(f"{url}/api/runs/{run_id}/evidence").json()
    assert end == {"status": "completed", "phase": "completed", "error": None}
    phases = [e["data"]["phase"] for e in events if e["type"] == "phase"]
    assert phases == [
        "evaluating_baseline",
        "searching",
        "evaluating_best",
        "finalizing",
        "completed",
    ]
    paid = [e["data"]["budget"]["paid"] for e in events if e["type"] == "trials"]
    assert (
        paid == sorted(paid) and paid[-1] == view["budget"]["paid"] == evidence["rollouts"]["paid"]
    )
    assert view["status"] == "completed" and evidence["promotion"]["promoted"] is True
    assert len(rollout_calls(tmp_path / "calls.log")) == view["budget"]["paid"]


def test_a_run_survives_a_service_restart_and_pays_for_nothing_twice(
    tmp_path: Path, reflection_url: str
) -> None:
    root, log = tmp_path / "ws", tmp_path / "calls.log"
    with toy_container(log, env={"TOY_DELAY": "0.03"}) as container:
        with serve_process(root) as (url, proc):
            run_id = httpx.post(
                f"{url}/api/runs",
                json={"config": run_config(reflection_url, container=container), "start": True},
            ).json()["run_id"]
            deadline = time.monotonic() + 60
            while httpx.get(f"{url}/api/runs/{run_id}").json()["budget"]["paid"] < 30:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            stop(proc, signal.SIGTERM)
            assert proc.returncode in (
                0,
                -signal.SIGTERM,
            )  # uvicorn re-raises the signal after a clean shutdown

        async def state() -> tuple[str, int, set[tuple[str, str]]]:
            async with Workspace(root) as ws:
                committed = {
                    (r.candidate_hash[:16], r.seed)
                    for c in await ws.list_candidates(run_id)
                    for r in await ws.rollouts_for_candidate(run_id, c.candidate_id)
                    if r.status == "ok"
                }
                return (
                    (await ws.get_run(run_id)).status,
                    (await ws.count_trials(run_id))["paid"],
                    committed,
                )

        status, paid_before, committed = asyncio.run(state())
        assert status == "running"  # stopped, not cancelled: the next start resumes it
        calls_before = len(rollout_calls(log))
        with serve_process(root) as (url, _):
            events: list[dict[str, Any]] = []
            end = follow(url, run_id, events.append)
            view = httpx.get(f"{url}/api/runs/{run_id}").json()
    assert end["status"] == "completed" and view["status"] == "completed"
    statuses = [e["data"]["status"] for e in events if e["type"] == "status"]
    assert statuses == ["started", "interrupted", "resumed"]
    # Rollouts in flight at the stop were never committed and may run again; committed ones never.
    after = rollout_calls(log)[calls_before:]
    assert after and committed and not committed & set(after), (
        "a committed rollout was paid for twice"
    )
    assert len(after) == len(set(after)) and view["budget"]["paid"] >= paid_before


def test_optimize_run_with_server_follows_the_run_to_its_verdict(
    tmp_path: Path, reflection_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        toy_container(tmp_path / "calls.log") as container,
        serve_process(tmp_path / "ws", token="tok-e2e-123") as (url, _),
    ):
        server = ["--server", url, "--server-token", "tok-e2e-123"]
        flags = ["--container", container, *run_flags(reflection_url)]
        assert main(["optimize", "create", *server, *flags]) == 0
        created = capsys.readouterr().out
        run_id = created.splitlines()[0]
        assert f"gepa-runtime optimize run {run_id} --server {url}" in created
        assert main(["optimize", "run", run_id, *server]) == 0
        ran = capsys.readouterr()
        # The console link opens the token-protected page as printed.
        assert "PROMOTED" in ran.out and f"{url}/runs/{run_id}?token=tok-e2e-123" in ran.out
        page = httpx.get(f"{url}/runs/{run_id}?token=tok-e2e-123")
        assert page.status_code == 200
        assert "completed" in ran.err  # the progress lines, fed by the event stream
        assert main(["optimize", "run", "--server", url, *flags]) == 2
        assert "refused the token" in capsys.readouterr().err
        assert main(["optimize", "run", *server, *flags, "--quiet"]) == 0
        assert "PROMOTED" in capsys.readouterr().out
        runs = httpx.get(f"{url}/api/runs", headers={"Authorization": "Bearer tok-e2e-123"}).json()[
            "runs"
        ]
    assert len(runs) == 2 and {r["status"] for r in runs} == {"completed"}
