"""What a request must look like to reach the API: its Host, its Origin, a JSON body under the
limit. In-process (``httpx.ASGITransport``); the same attacks over a real socket are in
``test_hardening_e2e.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.service import ServiceSettings
from tests.service.conftest import SERVICE_URL, run_config, service

LIMIT = 64 * 1024


@pytest.fixture
async def api(tmp_path: Path, toy_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A tokenless service (the checks must hold without a token) with a small body limit."""
    settings = ServiceSettings(max_body_bytes=LIMIT)
    async with service(tmp_path / "ws", toy_app, settings) as (client, _):
        yield client


async def _runs(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    return (await api.get("/api/runs")).json()["runs"]  # type: ignore[no-any-return]


async def test_a_foreign_host_is_refused_whatever_the_method(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    # DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser sends it as Host.
    for method, path, body in (
        ("GET", "/api/runs", None),
        ("GET", "/api/health", None),
        ("POST", "/api/runs", {"config": run_config(reflection_url)}),
    ):
        response = await api.request(
            method, path, json=body, headers={"Host": "rebind.attacker.example:8700"}
        )
        assert response.status_code == 403, (method, path)
        message = response.json()["error"]["message"]
        assert "'rebind.attacker.example:8700'" in message
        assert "gepa-runtime serve --allowed-host" in message
    assert await _runs(api) == []
    for host in ("localhost:8700", "127.0.0.1", "[::1]:9"):
        ok = await api.get("/api/runs", headers={"Host": host})
        assert ok.status_code == 200, host


async def test_cross_origin_state_changes_are_refused(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    body = {"config": run_config(reflection_url)}
    for header in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # sandboxed frames and file:// pages
        {"Referer": "http://evil.example/page.html"},
        {"Origin": "http://127.0.0.1:9999"},  # another local server is another origin
    ):
        refused = await api.post("/api/runs", json=body, headers=header)
        assert refused.status_code == 403, header
        assert refused.json()["error"]["type"] == "CrossOrigin"
        assert "only the service's own console" in refused.json()["error"]["message"]
    assert await _runs(api) == []
    own = await api.post("/api/runs", json=body, headers={"Origin": SERVICE_URL})
    assert own.status_code == 201, own.text
    run_id = own.json()["run_id"]
    for method in ("POST", "DELETE"):
        path = f"/api/runs/{run_id}" + ("/start" if method == "POST" else "")
        response = await api.request(method, path, headers={"Origin": "https://evil.example"})
        assert response.status_code == 403, method
    # Reads are not state changes: a browser's same-origin policy keeps their answers anyway.
    assert (
        await api.get("/api/runs", headers={"Origin": "https://evil.example"})
    ).status_code == 200
    assert [r["status"] for r in await _runs(api)] == ["created"]


async def test_only_json_bodies_are_accepted(api: httpx.AsyncClient, reflection_url: str) -> None:
    text = json.dumps({"config": run_config(reflection_url)})
    attack = json.dumps({"config": run_config(reflection_url), "start": True})
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        refused = await api.post("/api/runs", content=attack, headers={"Content-Type": kind})
        assert refused.status_code == 415, kind
        message = refused.json()["error"]["message"]
        assert "Content-Type: application/json" in message and kind in message
    untyped = await api.post("/api/runs", content=attack)
    assert untyped.status_code == 415
    assert await _runs(api) == []
    typed = await api.post(
        "/api/runs",
        content=text,
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert typed.status_code == 201, typed.text
    # POST .../start and .../cancel carry no body and no Content-Type (CLI, console): they pass.
    started = await api.post(f"/api/runs/{typed.json()['run_id']}/start")
    assert started.status_code == 202, started.text


async def test_a_body_over_the_limit_is_413_by_its_length(
    api: httpx.AsyncClient, reflection_url: str
) -> None:
    config = run_config(reflection_url, task_model="x" * (LIMIT + 10))
    refused = await api.post("/api/runs", json={"config": config})
    assert refused.status_code == 413
    assert f"limit of {LIMIT} bytes" in refused.json()["error"]["message"]
    assert "--max-body-bytes" in refused.json()["error"]["message"]
    assert await _runs(api) == []
    fits = await api.post(
        "/api/runs", json={"config": run_config(reflection_url, task_model="x" * (LIMIT // 2))}
    )
    assert fits.status_code == 201


async def test_a_chunked_body_is_cut_off_while_it_is_read(api: httpx.AsyncClient) -> None:
    """No Content-Length: the service stops reading once the limit is passed."""
    chunk, sent = b"x" * 4096, []

    async def sixty_megabytes() -> AsyncIterator[bytes]:
        for _ in range(60 * 1024 * 1024 // len(chunk)):
            sent.append(len(chunk))
            yield chunk

    refused = await api.post(
        "/api/runs", content=sixty_megabytes(), headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 413
    assert sum(sent) <= LIMIT + 2 * len(chunk)  # read up to the limit, not the 60 MB
    assert await _runs(api) == []
