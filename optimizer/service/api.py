"""The REST API of the service under ``/api`` (described in :mod:`optimizer.service.openapi`).

Errors are ``{"error": {"type", "message"}}`` with a message that names the fix: ``404`` for
an unknown run or rollout, ``409`` for a request the run's state forbids, ``422`` for an
invalid body or config, ``403`` for a config the operator's policy refuses (see
:mod:`optimizer.service.policy`), ``401`` for the token (see :mod:`optimizer.service.auth`);
the middlewares add ``403`` (Host, Origin), ``413`` and ``415`` (bodies).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from optimizer.runtime.lifecycle.branch import branches_of
from optimizer.service.auth import error_json
from optimizer.service.manager import RunConflict, RunManager
from optimizer.service.policy import PolicyRefusal
from optimizer.service.sse import StreamSettings, event_stream
from optimizer.service.views import candidate_views, run_view, trial_views
from schemas import GepaError, RunConfig, RunRecord, UserError

__all__ = ["CreateRun", "api_routes"]

Handler = Callable[[Request], Awaitable[Response]]
MAX_PAGE = 1000


class CreateRun(BaseModel):
    """Body of ``POST /api/runs``."""

    model_config = ConfigDict(extra="forbid")

    config: RunConfig
    run_id: str | None = None
    start: bool = False


class NotFound(UserError):
    """An unknown run or rollout (404)."""


def _manager(request: Request) -> RunManager:
    return request.app.state.manager  # type: ignore[no-any-return]


def _handled(fn: Handler) -> Handler:
    """Turn the error tree into status codes with the service's error body."""

    async def handler(request: Request) -> Response:
        try:
            return await fn(request)
        except NotFound as exc:
            return error_json(404, "NotFound", str(exc))
        except RunConflict as exc:
            return error_json(409, "Conflict", str(exc))
        except PolicyRefusal as exc:
            return error_json(403, "Forbidden", str(exc))
        except UserError as exc:
            return error_json(400, "UserError", str(exc))
        except GepaError as exc:
            return error_json(500, type(exc).__name__, str(exc))

    return handler


async def _record(request: Request) -> RunRecord:
    run_id = request.path_params["run_id"]
    try:
        return await _manager(request).workspace.get_run(run_id)
    except UserError:
        raise NotFound(
            f"unknown run {run_id!r}: list the runs with GET /api/runs (or open the console at /)"
        ) from None


async def _view(
    manager: RunManager, record: RunRecord, records: list[RunRecord] | None = None
) -> dict[str, Any]:
    digest = await manager.digests.get(record.run_id)
    counts = await manager.workspace.count_trials(record.run_id)
    every = records if records is not None else await manager.workspace.list_runs()
    return run_view(
        record,
        digest,
        counts,
        active=manager.is_active(record.run_id),
        branches=branches_of(every, record.run_id),
    )


def _int(
    request: Request, name: str, default: int, *, low: int = 0, high: int | None = None
) -> int:
    raw = request.query_params.get(name)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        raise UserError(f"query parameter {name}={raw!r} is not a whole number") from None
    return max(low, value if high is None else min(high, value))


@_handled
async def health(request: Request) -> Response:
    """``GET /api/health``."""
    manager = _manager(request)
    return JSONResponse(
        {"status": "ok", "service": "gepa-runtime", "workspace": str(manager.workspace.root)}
    )


@_handled
async def list_runs(request: Request) -> Response:
    """``GET /api/runs``: every run, newest first."""
    manager = _manager(request)
    records = await manager.workspace.list_runs()
    return JSONResponse({"runs": [await _view(manager, r, records) for r in records]})


@_handled
async def create_run(request: Request) -> Response:
    """``POST /api/runs``: validate and store a run; ``"start": true`` starts it too."""
    try:
        body = CreateRun.model_validate(json.loads(await request.body() or b"null"))
    except json.JSONDecodeError as exc:
        return error_json(422, "InvalidBody", f"body is not JSON: {exc}")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        return error_json(422, "InvalidConfig", f"invalid run: {problems}")
    config = body.config
    if not config.containers and not config.module:
        return error_json(
            422,
            "InvalidConfig",
            "config has no task container: give containers [URL, ...] or module",
        )
    if not config.reflection_model and not config.proposer_command:
        return error_json(
            422, "InvalidConfig", "config has no reflection_model (the proposer's model)"
        )
    if not config.budget_given():
        config = config.model_copy(update={"auto": "light"})
    manager = _manager(request)
    record = await manager.create(config, body.run_id)
    if body.start:
        record = await manager.start(record.run_id)
    return JSONResponse(await _view(manager, record), status_code=201)


@_handled
async def get_run(request: Request) -> Response:
    """``GET /api/runs/{run_id}``."""
    return JSONResponse(await _view(_manager(request), await _record(request)))


@_handled
async def start_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/start``: start or resume in the background."""
    record = await _record(request)
    manager = _manager(request)
    return JSONResponse(await _view(manager, await manager.start(record.run_id)), status_code=202)


@_handled
async def cancel_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/cancel``."""
    record = await _record(request)
    manager = _manager(request)
    return JSONResponse(await _view(manager, await manager.cancel(record.run_id)))


@_handled
async def delete_run(request: Request) -> Response:
    """``DELETE /api/runs/{run_id}``: a run that is not running, its rows and its folder."""
    record = await _record(request)
    deleted = await _manager(request).delete(record.run_id)
    return JSONResponse({"run_id": record.run_id, "deleted": deleted})


@_handled
async def candidates(request: Request) -> Response:
    """``GET /api/runs/{run_id}/candidates``: ranked by train mean, then seeds won."""
    record = await _record(request)
    manager = _manager(request)
    digest = await manager.digests.get(record.run_id)
    records = await manager.workspace.list_candidates(record.run_id)
    return JSONResponse({"candidates": candidate_views(records, digest)})


@_handled
async def rollouts(request: Request) -> Response:
    """``GET /api/runs/{run_id}/rollouts?offset=&limit=``: a page of the trials feed."""
    record = await _record(request)
    workspace = _manager(request).workspace
    offset, limit = _int(request, "offset", 0), _int(request, "limit", 100, low=1, high=MAX_PAGE)
    page = await workspace.list_trials(record.run_id, offset=offset, limit=limit)
    total = sum((await workspace.count_trials(record.run_id)).values())
    return JSONResponse(
        {
            "rollouts": await trial_views(workspace, page),
            "offset": offset,
            "limit": limit,
            "total": total,
        }
    )


@_handled
async def rollout(request: Request) -> Response:
    """``GET /api/runs/{run_id}/rollouts/{rollout_id}``: one rollout with its trace."""
    record = await _record(request)
    rollout_id = request.path_params["rollout_id"]
    try:
        found = await _manager(request).workspace.get_run_rollout(record.run_id, rollout_id)
    except UserError:
        raise NotFound(
            f"unknown rollout {rollout_id} of run {record.run_id}: take ids from "
            f"GET /api/runs/{record.run_id}/rollouts"
        ) from None
    return JSONResponse(found.model_dump(mode="json"))


@_handled
async def evidence(request: Request) -> Response:
    """``GET /api/runs/{run_id}/evidence``: the evidence packet of a completed run."""
    record = await _record(request)
    try:
        raw = await _manager(request).workspace.read_file(record.run_id, "evidence.json")
    except UserError:
        raise NotFound(
            f"run {record.run_id} has no evidence packet yet (status {record.status}, phase {record.phase}); "
            "it is written when the run completes"
        ) from None
    return Response(raw, media_type="application/json")


@_handled
async def events(request: Request) -> Response:
    """``GET /api/runs/{run_id}/events``: Server-Sent Events, resumable (``Last-Event-ID``)."""
    record = await _record(request)
    last = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        after = int(last)
    except ValueError:
        raise UserError(
            f"Last-Event-ID / after must be an event seq number, got {last!r}"
        ) from None
    settings: StreamSettings = request.app.state.stream_settings
    return StreamingResponse(
        event_stream(_manager(request), record.run_id, after, settings),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def api_routes() -> list[Route]:
    """The routes of the REST API."""
    return [
        Route("/api/health", health, methods=["GET"]),
        Route("/api/runs", list_runs, methods=["GET"]),
        Route("/api/runs", create_run, methods=["POST"]),
        Route("/api/runs/{run_id}", get_run, methods=["GET"]),
        Route("/api/runs/{run_id}", delete_run, methods=["DELETE"]),
        Route("/api/runs/{run_id}/start", start_run, methods=["POST"]),
        Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
        Route("/api/runs/{run_id}/candidates", candidates, methods=["GET"]),
        Route("/api/runs/{run_id}/rollouts", rollouts, methods=["GET"]),
        Route("/api/runs/{run_id}/rollouts/{rollout_id:int}", rollout, methods=["GET"]),
        Route("/api/runs/{run_id}/evidence", evidence, methods=["GET"]),
        Route("/api/runs/{run_id}/events", events, methods=["GET"]),
    ]
