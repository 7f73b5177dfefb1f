"""The service token: header for the API, ``?token=`` for GETs (pages, EventSource), open assets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.service import ServiceSettings
from tests.service.conftest import service

TOKEN = "s3rvice-token-xyz"


@pytest.fixture
async def guarded(tmp_path: Path, toy_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with service(tmp_path / "ws", toy_app, ServiceSettings(token=TOKEN)) as (client, _):
        yield client


async def test_api_refuses_a_missing_or_wrong_token_and_names_the_fix(
    guarded: httpx.AsyncClient,
) -> None:
    missing = await guarded.get("/api/runs")
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "missing service token" in missing.json()["error"]["message"]
    assert "gepa-runtime serve --token" in missing.json()["error"]["message"]
    wrong = await guarded.get("/api/runs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "wrong service token" in wrong.json()["error"]["message"]
    assert (
        await guarded.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    ).status_code == 200


async def test_query_token_works_for_gets_only(guarded: httpx.AsyncClient) -> None:
    assert (await guarded.get("/api/runs", params={"token": TOKEN})).status_code == 200
    assert (
        await guarded.get("/api/runs/nope/events", params={"token": TOKEN})
    ).status_code == 404  # past the guard
    posted = await guarded.post("/api/runs", params={"token": TOKEN}, json={})
    assert posted.status_code == 401


async def test_console_page_asks_for_the_token_and_opens_with_it(
    guarded: httpx.AsyncClient,
) -> None:
    page = await guarded.get("/")
    assert page.status_code == 401 and "text/html" in page.headers["content-type"]
    assert 'name="token"' in page.text and "GEPA_SERVE_TOKEN" in page.text
    wrong = await guarded.get("/", params={"token": "nope"})
    assert wrong.status_code == 401 and "is wrong" in wrong.text
    assert (await guarded.get("/", params={"token": TOKEN})).status_code == 200


async def test_assets_health_and_openapi_stay_open(guarded: httpx.AsyncClient) -> None:
    for path in ("/static/console.css", "/static/run.js", "/api/health", "/openapi.json"):
        assert (await guarded.get(path)).status_code == 200, path
