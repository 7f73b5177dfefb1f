"""The OpenAPI 3.1 description of the service's API, served at ``/openapi.json``.

Paths are written by hand; the body schemas come from the pydantic models that cross the
wire (``RunConfig``, records), so they cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from optimizer.service.api import CreateRun
from optimizer.service.explore_api import explore_openapi_paths
from optimizer.service.plans import plan_openapi_paths
from optimizer.service.steering import steering_openapi_paths
from optimizer.service.sweeps import sweep_openapi_paths
from schemas import CandidateRecord, Event, RolloutRecord, RunConfig, TrialView

__all__ = ["openapi_spec"]

REF = "#/components/schemas/{model}"


def _schemas() -> dict[str, Any]:
    models: tuple[type[BaseModel], ...] = (
        CreateRun,
        RunConfig,
        CandidateRecord,
        RolloutRecord,
        TrialView,
        Event,
    )
    out: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template=REF)
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    out["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    }
    out["Run"] = {
        "type": "object",
        "description": "A run: stored config without secrets, status, phase, budget used, best so far.",
        "properties": {
            "run_id": {"type": "string"},
            "status": {
                "type": "string",
                "enum": ["created", "running", "completed", "failed", "cancelled"],
            },
            "phase": {"type": "string"},
            "error": {"type": ["string", "null"]},
            "active": {"type": "boolean"},
            "config": {"type": "object"},
            "budget": {
                "type": "object",
                "properties": {
                    "paid": {"type": "integer"},
                    "cached": {"type": "integer"},
                    "errors": {"type": "integer"},
                    "limit": {"type": ["integer", "null"]},
                    "cost_usd": {"type": "number"},
                },
            },
            "best": {
                "type": ["object", "null"],
                "properties": {"candidate_id": {"type": "string"}, "mean": {"type": "number"}},
            },
            "promotion": {"type": ["object", "null"]},
            "links": {"type": "object"},
        },
    }
    return out


def _json(schema: str, description: str = "OK") -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=schema)}}},
    }


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "bad request",
        401: "missing or wrong token",
        403: "refused: foreign Host or Origin, or a config field the operator did not allow",
        404: "unknown run or rollout",
        409: "not allowed in the run's state",
        413: "request body over the service's limit (serve --max-body-bytes)",
        415: "body is not application/json",
        422: "invalid body or config",
    }
    return {str(c): _json("Error", text[c]) for c in codes}


RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _paths() -> dict[str, Any]:
    """Every route of the API, in the order the document lists them."""
    return {
        **_run_list_paths(),
        **_run_paths(),
        **_rollout_paths(),
        **_output_paths(),
        **steering_openapi_paths(),
        **sweep_openapi_paths(),
        **explore_openapi_paths(),
        **plan_openapi_paths(),
    }


def _run_list_paths() -> dict[str, Any]:
    """Health, and the collection of runs."""
    return {
        "/api/health": {
            "get": {
                "summary": "Service health (no token needed)",
                "security": [],
                "responses": {"200": {"description": "OK"}},
            }
        },
        "/api/runs": {
            "get": {
                "summary": "List runs, newest first",
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "runs": {
                                            "type": "array",
                                            "items": {"$ref": REF.format(model="Run")},
                                        }
                                    },
                                }
                            }
                        },
                    },
                    **_errors(401),
                },
            },
            "post": {
                "summary": "Create a run (and start it with start=true)",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": REF.format(model="CreateRun")}}
                    },
                },
                "responses": {
                    "201": _json("Run", "created"),
                    **_errors(400, 401, 403, 413, 415, 422),
                },
            },
        },
    }


def _run_paths() -> dict[str, Any]:
    """One run: read, delete, start, cancel, its candidates."""
    run = [RUN_ID]
    return {
        "/api/runs/{run_id}": {
            "get": {
                "summary": "One run",
                "parameters": run,
                "responses": {"200": _json("Run"), **_errors(401, 404)},
            },
            "delete": {
                "summary": "Delete a run that is not running: its rows and its run folder",
                "description": (
                    "Rollouts another run used stay in the cache. A running run is 409: "
                    "cancel it first."
                ),
                "parameters": run,
                "responses": {"200": {"description": "deleted"}, **_errors(401, 403, 404, 409)},
            },
        },
        "/api/runs/{run_id}/start": {
            "post": {
                "summary": "Start or resume the run in the background",
                "parameters": run,
                "responses": {"202": _json("Run", "started"), **_errors(401, 403, 404, 409)},
            }
        },
        "/api/runs/{run_id}/cancel": {
            "post": {
                "summary": "Cancel a running run",
                "parameters": run,
                "responses": {"200": _json("Run", "cancelled"), **_errors(401, 404, 409)},
            }
        },
        "/api/runs/{run_id}/candidates": {
            "get": {
                "summary": "Candidates with lineage, ranked by train mean then seeds won",
                "parameters": run,
                "responses": {"200": {"description": "OK"}, **_errors(401, 404)},
            }
        },
    }


def _rollout_paths() -> dict[str, Any]:
    """The run's trials, a page at a time, and one rollout with its trace."""
    return {
        "/api/runs/{run_id}/rollouts": _trial_page(),
        "/api/runs/{run_id}/rollouts/{rollout_id}": {
            "get": {
                "summary": "One rollout with its trace",
                "parameters": [
                    RUN_ID,
                    {
                        "name": "rollout_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                    },
                ],
                "responses": {"200": _json("RolloutRecord"), **_errors(401, 404)},
            }
        },
    }


def _trial_page() -> dict[str, Any]:
    """``GET /api/runs/{run_id}/rollouts``: a page of trials with its offset and total."""
    return {
        "get": {
            "summary": "A page of the run's trials (rollouts paid or reused), in order",
            "parameters": [
                RUN_ID,
                {
                    "name": "offset",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 0, "default": 0},
                },
                {
                    "name": "limit",
                    "in": "query",
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 1000,
                        "default": 100,
                    },
                },
            ],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "rollouts": {
                                        "type": "array",
                                        "items": {"$ref": REF.format(model="TrialView")},
                                    },
                                    "offset": {"type": "integer"},
                                    "limit": {"type": "integer"},
                                    "total": {"type": "integer"},
                                },
                            }
                        }
                    },
                },
                **_errors(400, 401, 404),
            },
        }
    }


def _output_paths() -> dict[str, Any]:
    """What a run produced: its evidence packet and its event stream."""
    run = [RUN_ID]
    return {
        "/api/runs/{run_id}/evidence": {
            "get": {
                "summary": "The evidence packet (evidence.json) of a completed run",
                "parameters": run,
                "responses": {"200": {"description": "OK"}, **_errors(401, 404)},
            }
        },
        "/api/runs/{run_id}/events": {
            "get": {
                "summary": "The run's events as Server-Sent Events",
                "description": (
                    "Each runner event is an SSE message with `id: <seq>` and the Event as JSON in `data`. "
                    "Named events from the service: `heartbeat` (every few seconds: time, last_event_at, status, "
                    "phase, active) and `end` (the run finished; the stream closes). Resume with the "
                    "`Last-Event-ID` header or `?after=<seq>`. `?token=` is accepted for EventSource."
                ),
                "parameters": [
                    RUN_ID,
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}},
                    {"name": "after", "in": "query", "schema": {"type": "integer"}},
                ],
                "responses": {
                    "200": {
                        "description": "event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    **_errors(400, 401, 404),
                },
            }
        },
    }


def openapi_spec() -> dict[str, Any]:
    """The OpenAPI document."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "gepa-runtime service",
            "version": "1",
            "description": "Runs GEPA optimizations in the background; REST API and live console.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "`gepa-runtime serve --token` / GEPA_SERVE_TOKEN; GET also takes ?token=",
                }
            },
        },
        "security": [{"bearer": []}],
    }
