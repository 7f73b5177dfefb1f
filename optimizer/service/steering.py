"""A person steering a run through the service: ``POST /api/runs/{run_id}/actions`` and
``GET /api/runs/{run_id}/steering``.

``POST`` takes one action (:class:`schemas.Action`: ``{"action": "pause"}``,
``{"action": "reject", "candidate_id": ..., "reason": ...}``, ...; ``source`` is ``rest``
unless the console says ``console``) and answers ``{"event": <the stored action event>,
"steering": <the state folded from the run's actions>}``; ``GET`` answers that state. The
run's process reads the action from the log within half a second, whichever process runs it
(:mod:`optimizer.runtime.steering`). Refusals: ``404`` for an unknown run or candidate, ``409``
for an action the run's state does not allow, ``422`` for a body that is not an action; each
message names the fix. The token and same-origin rules apply as to every route.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from optimizer.runtime.steering import parse_action, read_steering
from optimizer.service.auth import error_json
from optimizer.service.manager import RunManager
from schemas import Action, ActionRefused

__all__ = ["steering_openapi_paths", "steering_routes"]

# How each kind of refusal answers: status and error type.
REFUSALS = {
    "unknown": (404, "NotFound"),
    "conflict": (409, "Conflict"),
    "invalid": (422, "InvalidAction"),
}
REST_SOURCES = ("console", "rest")


def _manager(request: Request) -> RunManager:
    return request.app.state.manager  # type: ignore[no-any-return]


def _refused(exc: ActionRefused) -> Response:
    status, kind = REFUSALS.get(exc.kind, (400, "UserError"))
    return error_json(status, kind, str(exc))


async def act(request: Request) -> Response:
    """``POST /api/runs/{run_id}/actions``: record one action."""
    run_id = request.path_params["run_id"]
    try:
        body = json.loads(await request.body() or b"null")
    except json.JSONDecodeError as exc:
        return error_json(422, "InvalidAction", f"body is not JSON: {exc}")
    try:
        action = parse_action(body)
        if action.source not in REST_SOURCES:
            raise ActionRefused(
                "invalid", f"source: the REST API takes {' or '.join(REST_SOURCES)}"
            )
        event, steering = await _manager(request).act(run_id, action)
    except ActionRefused as exc:
        return _refused(exc)
    return JSONResponse({"event": event.model_dump(mode="json"), "steering": steering.as_dict()})


async def steering(request: Request) -> Response:
    """``GET /api/runs/{run_id}/steering``: the state the run's actions fold into."""
    try:
        state = await read_steering(_manager(request).workspace, request.path_params["run_id"])
    except ActionRefused as exc:
        return _refused(exc)
    return JSONResponse(state.as_dict())


def steering_routes() -> list[Route]:
    """The routes a person steers a run with."""
    return [
        Route("/api/runs/{run_id}/actions", act, methods=["POST"]),
        Route("/api/runs/{run_id}/steering", steering, methods=["GET"]),
    ]


STEERING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What a run's actions say so far (folded from its action events).",
    "properties": {
        "paused": {"type": "boolean"},
        "rejected": {"type": "object", "additionalProperties": {"type": "string"}},
        "pinned": {"type": ["string", "null"]},
        "notes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "candidate_id": {"type": ["string", "null"]},
                    "ts": {"type": "number"},
                    "seq": {"type": "integer"},
                    "source": {"type": "string"},
                    "keep": {"type": "boolean"},
                },
            },
        },
        "stop": {
            "type": ["object", "null"],
            "properties": {
                "reason": {"type": ["string", "null"]},
                "source": {"type": "string"},
                "ts": {"type": "number"},
            },
        },
        "seq": {"type": "integer", "description": "the last action folded in"},
    },
}


def steering_openapi_paths() -> dict[str, Any]:
    """The steering routes as OpenAPI paths, and the schemas they use."""
    run_id = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}
    errors = {
        "401": {"description": "missing or wrong token"},
        "403": {"description": "foreign Host or Origin"},
        "404": {"description": "unknown run or candidate"},
    }
    return {
        "/api/runs/{run_id}/actions": {
            "post": {
                "summary": "Steer a run: pause, resume, reject, pin, unpin, note or stop",
                "parameters": [run_id],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": Action.model_json_schema()}},
                },
                "responses": {
                    "200": {"description": "the stored action event and the steering state"},
                    **errors,
                    "409": {"description": "the action does not fit the run's state"},
                    "422": {"description": "not an action, or a field it needs is missing"},
                },
            }
        },
        "/api/runs/{run_id}/steering": {
            "get": {
                "summary": "What a run's actions say so far",
                "parameters": [run_id],
                "responses": {
                    "200": {
                        "description": "the steering state",
                        "content": {"application/json": {"schema": STEERING_SCHEMA}},
                    },
                    **errors,
                },
            }
        },
    }
