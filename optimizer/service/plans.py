"""``POST /api/plan``: what a run of a config will spend, before it is created (the console's
create form shows it).

The body is ``{"config": RunConfig}``, as ``POST /api/runs`` takes it; the operator's policy
applies (a plan sends rollouts and asks the reflection model for proposals). The answer is
``optimize plan --json``'s (:mod:`optimizer.checks.plan`): nothing is stored.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from optimizer.checks.plan import make_plan, render_plan
from optimizer.service.auth import error_json
from optimizer.service.manager import RunManager
from optimizer.service.policy import PolicyRefusal
from schemas import GepaError, RunConfig, UserError

__all__ = ["PlanRun", "plan_openapi_paths", "plan_routes"]


class PlanRun(BaseModel):
    """Body of ``POST /api/plan``."""

    model_config = ConfigDict(extra="forbid")

    config: RunConfig


async def plan(request: Request) -> Response:
    """``POST /api/plan``: the plan of a config, its figures and their assumptions."""
    try:
        body = PlanRun.model_validate(json.loads(await request.body() or b"null"))
    except json.JSONDecodeError as exc:
        return error_json(422, "InvalidBody", f"body is not JSON: {exc}")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        return error_json(422, "InvalidConfig", f"invalid config: {problems}")
    config = body.config
    if not config.budget_given():
        config = config.model_copy(update={"auto": "light"})  # as POST /api/runs does
    manager: RunManager = request.app.state.manager
    try:
        manager.policy.check(config)
        report = await make_plan(config, http=manager.http)
    except PolicyRefusal as exc:
        return error_json(403, "Forbidden", str(exc))
    except UserError as exc:
        return error_json(400, "UserError", str(exc))
    except GepaError as exc:
        return error_json(502, type(exc).__name__, str(exc))
    return JSONResponse({**report.as_dict(), "text": render_plan(report)})


def plan_routes() -> list[Route]:
    """The plan's route."""
    return [Route("/api/plan", plan, methods=["POST"])]


def plan_openapi_paths() -> dict[str, Any]:
    """The plan's route as an OpenAPI path (for :mod:`optimizer.service.openapi`)."""
    body = {
        "type": "object",
        "required": ["config"],
        "properties": {"config": {"$ref": "#/components/schemas/RunConfig"}},
    }
    return {
        "/api/plan": {
            "post": {
                "summary": "What a run of this config will spend, from a few sample rollouts "
                "and proposals; nothing is stored",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {
                    "200": {"description": "the figures, each with its assumption, and `text`"},
                    "400": {"description": "the container cannot be reached or no sample scored"},
                    "403": {"description": "the operator's policy refuses the config"},
                    "422": {"description": "invalid body"},
                },
            }
        }
    }
