"""The service's Starlette app: REST API, SSE, the console pages and their static files.

    app = create_app(Workspace(".gepa"), ServiceSettings(token="s3cret"))
    uvicorn.run(app)   # or `gepa-runtime serve`

Every request passes, in order: the Host and Origin checks (:mod:`.origin`), the token
(:mod:`.auth`), the JSON-only body limit (:mod:`.bodies`); run configs then pass the
operator's :class:`RunPolicy` (:mod:`.policy`).

On startup the app opens the workspace (when given a folder) and resumes the service's
runs that were left ``running``; on shutdown it stops the run tasks, which then resume on
the next start.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from optimizer.service.api import api_routes
from optimizer.service.auth import TokenAuth, error_json
from optimizer.service.bodies import DEFAULT_MAX_BODY_BYTES, JsonBodies
from optimizer.service.explore_api import explore_routes
from optimizer.service.manager import RunManager
from optimizer.service.openapi import openapi_spec
from optimizer.service.origin import LOOPBACK_HOSTS, SameOrigin
from optimizer.service.pages import STATIC, index_page, run_page
from optimizer.service.plans import plan_routes
from optimizer.service.policy import RunPolicy
from optimizer.service.sse import StreamSettings
from optimizer.service.steering import steering_routes
from optimizer.service.sweeps import sweep_routes
from workspace import DatabaseURL, Workspace

__all__ = ["ServiceSettings", "create_app"]


@dataclass(frozen=True)
class ServiceSettings:
    """How the service runs: its token, the default container token, the SSE timing, and
    what it accepts: ``allowed_hosts`` (``host`` for any port or ``host:port``; ``serve``
    narrows them to its port), the largest request body, the run ``policy``."""

    token: str | None = None
    container_token: str | None = None
    heartbeat_s: float = 5.0
    quiet_after_s: float = 30.0
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    policy: RunPolicy = field(default_factory=RunPolicy)


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_spec())


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
    hint = "; the API is described at /openapi.json" if status in (404, 405) else ""
    return error_json(status, "HTTPError", f"{request.method} {request.url.path}: {detail}{hint}")


def create_app(
    workspace: Workspace | DatabaseURL | str | Path,
    settings: ServiceSettings | None = None,
    *,
    http: httpx.AsyncClient | None = None,
) -> Starlette:
    """The service for ``workspace``: a folder or a PostgreSQL URL (opened and closed by the
    app's lifespan) or an open ``Workspace``. ``http`` (tests) is the client runs use to reach containers."""
    settings = settings or ServiceSettings()
    owns = not isinstance(workspace, Workspace)
    ws = Workspace(workspace) if not isinstance(workspace, Workspace) else workspace
    ws.scrubber.add(settings.token, settings.container_token)  # never stored, never served
    manager = RunManager(
        ws, container_token=settings.container_token, policy=settings.policy, http=http
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if owns:
            await ws.open()
        try:
            await manager.startup()
            yield
        finally:
            await manager.shutdown()
            if owns:
                await ws.close()

    app = Starlette(
        routes=[
            *api_routes(),
            *steering_routes(),
            *sweep_routes(),
            *explore_routes(),
            *plan_routes(),
            Route("/openapi.json", _openapi, methods=["GET"]),
            Route("/", index_page, methods=["GET"]),
            Route("/runs/{run_id}", run_page, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[
            Middleware(SameOrigin, allowed=settings.allowed_hosts),
            Middleware(TokenAuth, token=settings.token),
            Middleware(JsonBodies, max_bytes=settings.max_body_bytes),
        ],
        exception_handlers={HTTPException: _not_found},
        lifespan=lifespan,
    )
    app.state.manager = manager
    app.state.settings = settings
    app.state.stream_settings = StreamSettings(
        heartbeat_s=settings.heartbeat_s, quiet_after_s=settings.quiet_after_s
    )
    return app
