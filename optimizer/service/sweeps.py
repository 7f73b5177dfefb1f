"""Sweeps over student models on the service: ``POST /api/sweeps``, ``GET /api/sweeps/{id}``, ``/sweeps/{id}``.

``POST /api/sweeps`` with ``{"config": {...}, "student_models": ["a", "b"], "target_score": 0.8}``
stores one run per model (the operator's policy checks each, as for ``POST /api/runs``) and
runs them one after the other in the background, as the service runs any run; when the last
ends, ``comparison.json`` and ``comparison.md`` are written to ``sweeps/<id>/``.
``GET /api/sweeps/{id}`` answers the models, their runs and the comparison as it stands
(rows of runs still going have no scores yet); ``/sweeps/{id}`` is its console page.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from optimizer.service.auth import error_json
from optimizer.service.manager import RunConflict, RunManager
from optimizer.service.pages import STATIC
from optimizer.service.policy import PolicyRefusal
from optimizer.sweep import gather, parse_models, render_markdown, sweep_dir
from schemas import GepaError, RunConfig, UserError

__all__ = ["CreateSweep", "sweep_routes"]

MANIFEST = "sweep.json"


class CreateSweep(BaseModel):
    """Body of ``POST /api/sweeps``."""

    model_config = ConfigDict(extra="forbid")

    config: RunConfig
    student_models: list[str]
    target_score: float | None = None
    sweep_id: str | None = None

    @field_validator("student_models", mode="before")
    @classmethod
    def _models(cls, value: Any) -> Any:
        return value.split(",") if isinstance(value, str) else value


def _manager(request: Request) -> RunManager:
    return request.app.state.manager  # type: ignore[no-any-return]


async def _write(manager: RunManager, sweep_id: str, name: str, text: str) -> None:
    folder = sweep_dir(manager.workspace, sweep_id)

    def write() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f".{name}.tmp").write_text(text, encoding="utf-8")
        (folder / f".{name}.tmp").replace(folder / name)

    await asyncio.to_thread(write)


async def _manifest(request: Request, sweep_id: str) -> dict[str, Any]:
    path = sweep_dir(_manager(request).workspace, sweep_id) / MANIFEST
    try:
        return json.loads(await asyncio.to_thread(path.read_text, encoding="utf-8"))  # type: ignore[no-any-return]
    except FileNotFoundError:
        raise UserError(f"unknown sweep {sweep_id!r}: create one with POST /api/sweeps") from None


async def _run_all(manager: RunManager, manifest: dict[str, Any]) -> None:
    """Start each run when the one before it ended; then write the comparison."""
    for run_id in manifest["runs"].values():
        if manager.closing.is_set():
            return
        try:
            await manager.start(run_id)
        except RunConflict:  # e.g. already completed: the comparison reads what it left
            continue
        while manager.is_active(run_id) and not manager.closing.is_set():
            await manager.wait_for_news(run_id, 5.0)
    if manager.closing.is_set():
        return
    comparison = await gather(manager.workspace, manifest)
    sweep_id = manifest["sweep_id"]
    await _write(manager, sweep_id, "comparison.json", json.dumps(comparison.to_json(), indent=2))
    await _write(manager, sweep_id, "comparison.md", render_markdown(comparison))


async def create_sweep(request: Request) -> Response:
    """``POST /api/sweeps``: store one run per student model and run them in turn."""
    try:
        body = CreateSweep.model_validate(json.loads(await request.body() or b"null"))
        models = parse_models(body.student_models)
    except (json.JSONDecodeError, ValidationError, UserError) as exc:
        return error_json(422, "InvalidBody", f"invalid sweep: {exc}")
    config = body.config
    if not (config.containers or config.module) or not (
        config.reflection_model or config.proposer_command
    ):
        return error_json(422, "InvalidConfig", "config needs containers (or module) and reflection_model")  # fmt: skip
    if not config.budget_given():
        config = config.model_copy(update={"auto": "light"})
    manager = _manager(request)
    sweep_id = body.sweep_id or f"sweep-{secrets.token_hex(5)}"
    try:
        sweep_dir(manager.workspace, sweep_id)
        records = [
            await manager.create(config.model_copy(update={"task_model": m})) for m in models
        ]
    except PolicyRefusal as exc:
        return error_json(403, "Forbidden", str(exc))
    except GepaError as exc:
        return error_json(400, "UserError", str(exc))
    manifest = {
        "sweep_id": sweep_id,
        "models": models,
        "target_score": body.target_score,
        "runs": {m: r.run_id for m, r in zip(models, records, strict=True)},
    }
    await _write(manager, sweep_id, MANIFEST, json.dumps(manifest, indent=2))
    tasks: set[asyncio.Task[None]] = request.app.state.__dict__.setdefault("sweep_tasks", set())
    task = asyncio.create_task(_run_all(manager, manifest), name=f"sweep:{sweep_id}")
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return JSONResponse(manifest, status_code=201)


async def get_sweep(request: Request) -> Response:
    """``GET /api/sweeps/{sweep_id}``: the models, their runs and statuses, the comparison."""
    try:
        manifest = await _manifest(request, request.path_params["sweep_id"])
    except UserError as exc:
        return error_json(404, "NotFound", str(exc))
    comparison = await gather(_manager(request).workspace, manifest)
    folder = sweep_dir(_manager(request).workspace, manifest["sweep_id"])
    done = await asyncio.to_thread((folder / "comparison.json").exists)
    return JSONResponse({**manifest, "finished": done, "comparison": comparison.to_json()})


async def sweep_page(request: Request) -> Response:
    """``GET /sweeps/{sweep_id}``: the comparison, refreshed while the runs go on."""
    return HTMLResponse((STATIC / "sweep.html").read_text(encoding="utf-8"))


def sweep_routes() -> list[Route]:
    """The sweep routes of the service."""
    return [
        Route("/api/sweeps", create_sweep, methods=["POST"]),
        Route("/api/sweeps/{sweep_id}", get_sweep, methods=["GET"]),
        Route("/sweeps/{sweep_id}", sweep_page, methods=["GET"]),
    ]


def sweep_openapi_paths() -> dict[str, Any]:
    """The sweep routes as OpenAPI paths (for :mod:`optimizer.service.openapi`)."""
    sweep_id = {"name": "sweep_id", "in": "path", "required": True, "schema": {"type": "string"}}
    body = {
        "type": "object",
        "required": ["config", "student_models"],
        "properties": {
            "config": {"$ref": "#/components/schemas/RunConfig"},
            "student_models": {"type": "array", "items": {"type": "string"}},
            "target_score": {"type": ["number", "null"]},
            "sweep_id": {"type": ["string", "null"]},
        },
    }
    return {
        "/api/sweeps": {
            "post": {
                "summary": "One run per student model on one container, run in turn, then compared",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {
                    "201": {"description": "the sweep's id and its runs by model"},
                    "400": {"description": "bad config"},
                    "403": {"description": "the operator's policy refuses the config"},
                    "422": {"description": "invalid body"},
                },
            }
        },
        "/api/sweeps/{sweep_id}": {
            "get": {
                "summary": "A sweep: its models, runs, and the comparison as it stands",
                "parameters": [sweep_id],
                "responses": {
                    "200": {"description": "OK"},
                    "404": {"description": "unknown sweep"},
                },
            }
        },
    }
