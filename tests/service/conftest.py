"""Fixtures of the service tests: the toy container in-process, the scripted reflection model
in a thread, the service app driven through ``httpx.ASGITransport`` with its lifespan, and a
headless Chromium for the console tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from container import create_app as container_app
from container import load_target
from optimizer.service import ServiceSettings, create_app
from optimizer.testing import reflection_app, thread_server
from optimizer.testing.toy import TOY_CONTAINER, TOY_DATA, TOY_SPLITS
from tests.service.console import chromium

TOY_URL = "http://toy-container"
SERVICE_URL = "http://127.0.0.1:8700"  # a loopback Host, as the service's Host check wants


@pytest.fixture(scope="session")
def reflection_url() -> Iterator[str]:
    """Base URL (``.../v1``) of the scripted reflection model."""
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="session")
def toy_app() -> Any:
    """The toy task container as an ASGI app (served in-process, no socket)."""
    target = load_target(str(TOY_CONTAINER))
    return container_app(target, dataset=TOY_DATA, splits=TOY_SPLITS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (see :mod:`tests.service.console`)."""
    with chromium() as launched:
        yield launched


def run_config(reflection_url: str, *, container: str = TOY_URL, **extra: Any) -> dict[str, Any]:
    """A small, fast run config against the toy container (JSON, as the API takes it)."""
    config: dict[str, Any] = {
        "containers": [container],
        "reflection_model": "fake-reflection",
        "reflection_base_url": reflection_url,
        "proposer_mode": "text",
        "max_metric_calls": 200,
        "max_idle_iterations": 4,
        "minibatch_size": 4,
        "seed": 3,
        "use_merge": False,
        "retry_base_delay_s": 0.01,
    }
    config.update(extra)
    return config


@contextlib.asynccontextmanager
async def service(
    root: Path, toy_app: Any | None, settings: ServiceSettings | None = None
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The service app with its lifespan running; yields (API client, app).

    With ``toy_app`` every container request of its runs goes to that ASGI app; with
    ``None`` runs use real HTTP.
    """
    container_http = (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=toy_app)) if toy_app else None
    )
    app = create_app(root, settings or ServiceSettings(), http=container_http)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=SERVICE_URL) as client:
                yield client, app
    finally:
        if container_http is not None:
            await container_http.aclose()


@pytest.fixture
async def api(tmp_path: Path, toy_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An API client of a fresh service."""
    async with service(tmp_path / "ws", toy_app) as (client, _):
        yield client


async def wait_status(
    client: httpx.AsyncClient, run_id: str, statuses: set[str], timeout: float = 60.0
) -> dict[str, Any]:
    """Poll ``GET /api/runs/{id}`` until its status is one of ``statuses`` and it is not active."""
    deadline = time.monotonic() + timeout
    while True:
        view = (await client.get(f"/api/runs/{run_id}")).json()
        if view["status"] in statuses and not view["active"]:
            return view  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(
                f"run {run_id} still {view['status']}/{view['phase']} after {timeout}s: {view['error']}"
            )
        await asyncio.sleep(0.05)


def parse_sse(text: str) -> list[tuple[str | None, str | None, str]]:
    """(event name, id, data) of every message in an SSE body."""
    messages = []
    for block in text.split("\n\n"):
        name = ident = None
        data = []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("id:"):
                ident = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            messages.append((name, ident, "\n".join(data)))
    return messages


def run_flags(reflection_url: str) -> list[str]:
    """``run_config``'s search settings as ``optimize`` command-line flags."""
    config = run_config(reflection_url)
    flags = {
        "--reflection-model": config["reflection_model"],
        "--reflection-base-url": config["reflection_base_url"],
        "--proposer-mode": config["proposer_mode"],
        "--max-metric-calls": config["max_metric_calls"],
        "--max-idle-iterations": config["max_idle_iterations"],
        "--seed": config["seed"],
        "--use-merge": str(config["use_merge"]).lower(),
    }
    return [str(part) for pair in flags.items() for part in pair]
