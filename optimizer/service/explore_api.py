"""Branch, compare and why on the service: ``POST /api/runs/{run_id}/branch``,
``GET /api/runs/{run_id}/compare?a=&b=``, ``GET /api/runs/{run_id}/why[?candidate=]`` and the
console's compare page ``/runs/{run_id}/compare?a=&b=``.

``branch`` stores a new run whose baseline is the candidate, its config the origin's with
``config`` (overrides) on top, as ``gepa-runtime runs branch`` does; ``"start": true`` starts
it too. ``compare`` and ``why`` answer from what the run stored (:mod:`.explain`): nothing is
paid, and a finished run answers. Errors: ``404`` for an unknown run or candidate, ``422`` for
an invalid body or overrides, ``403`` for a config the operator's policy refuses.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from optimizer.runtime.lifecycle.branch import find_candidate
from optimizer.service.auth import error_json
from optimizer.service.explain import compare_document, why_document
from optimizer.service.manager import RunConflict, RunManager
from optimizer.service.pages import STATIC, run_page
from optimizer.service.policy import PolicyRefusal
from optimizer.service.views import run_view
from schemas import GepaError, RunRecord, UserError

__all__ = ["BranchRun", "explore_openapi_paths", "explore_routes"]


class BranchRun(BaseModel):
    """Body of ``POST /api/runs/{run_id}/branch``."""

    model_config = ConfigDict(extra="forbid")

    candidate_id: str = Field(min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)  # RunConfig fields to override
    run_id: str | None = None
    start: bool = False


class _NotFound(UserError):
    """An unknown run or candidate (404)."""


def _manager(request: Request) -> RunManager:
    return request.app.state.manager  # type: ignore[no-any-return]


async def _run(request: Request) -> RunRecord:
    run_id = request.path_params["run_id"]
    try:
        return await _manager(request).workspace.get_run(run_id)
    except UserError:
        raise _NotFound(
            f"unknown run {run_id!r}: list the runs with GET /api/runs (or open the console at /)"
        ) from None


async def _candidate(request: Request, run_id: str, candidate: str) -> str:
    try:
        return (await find_candidate(_manager(request).workspace, run_id, candidate)).candidate_id
    except UserError as exc:
        raise _NotFound(str(exc)) from None


def _errors(exc: GepaError) -> Response:
    if isinstance(exc, _NotFound):
        return error_json(404, "NotFound", str(exc))
    if isinstance(exc, RunConflict):
        return error_json(409, "Conflict", str(exc))
    if isinstance(exc, PolicyRefusal):
        return error_json(403, "Forbidden", str(exc))
    if isinstance(exc, UserError):
        return error_json(422, "InvalidConfig", str(exc))
    return error_json(500, type(exc).__name__, str(exc))


async def branch_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/branch``: a new run whose baseline is the candidate."""
    try:
        origin = await _run(request)
        try:
            body = BranchRun.model_validate(json.loads(await request.body() or b"null"))
        except (json.JSONDecodeError, ValidationError) as exc:
            return error_json(422, "InvalidBody", f"invalid branch: {exc}")
        manager = _manager(request)
        cid = await _candidate(request, origin.run_id, body.candidate_id)
        record = await manager.branch(origin.run_id, cid, body.config, body.run_id)
        if body.start:
            record = await manager.start(record.run_id)
        digest = await manager.digests.get(record.run_id)
        counts = await manager.workspace.count_trials(record.run_id)
        view = run_view(record, digest, counts, active=manager.is_active(record.run_id))
        return JSONResponse(view, status_code=201)
    except GepaError as exc:
        return _errors(exc)


async def compare_runs(request: Request) -> Response:
    """``GET /api/runs/{run_id}/compare?a=A&b=B``: two candidates side by side."""
    try:
        record = await _run(request)
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not a or not b:
            return error_json(
                422,
                "InvalidQuery",
                "name two candidates: ?a=CANDIDATE&b=CANDIDATE (ids or prefixes)",
            )
        first = await _candidate(request, record.run_id, a)
        second = await _candidate(request, record.run_id, b)
        document = await compare_document(_manager(request).workspace, record.run_id, first, second)
        return JSONResponse(document)
    except GepaError as exc:
        return _errors(exc)


async def why(request: Request) -> Response:
    """``GET /api/runs/{run_id}/why[?candidate=C]``: why each candidate was kept or dropped."""
    try:
        record = await _run(request)
        named = request.query_params.get("candidate")
        candidate = await _candidate(request, record.run_id, named) if named else None
        document = await why_document(_manager(request).workspace, record.run_id, candidate)
        return JSONResponse(document)
    except GepaError as exc:
        return _errors(exc)


async def compare_page(request: Request) -> Response:
    """``GET /runs/{run_id}/compare?a=&b=``: the console's page of two candidates."""
    page = await run_page(request)  # an unknown run: the console's own 404 page
    if page.status_code != 200:
        return page
    return HTMLResponse((STATIC / "compare.html").read_text(encoding="utf-8"))


def explore_routes() -> list[Route]:
    """The branch, compare and why routes, and the compare page."""
    return [
        Route("/api/runs/{run_id}/branch", branch_run, methods=["POST"]),
        Route("/api/runs/{run_id}/compare", compare_runs, methods=["GET"]),
        Route("/api/runs/{run_id}/why", why, methods=["GET"]),
        Route("/runs/{run_id}/compare", compare_page, methods=["GET"]),
    ]


def explore_openapi_paths() -> dict[str, Any]:
    """The routes above as OpenAPI paths (for :mod:`optimizer.service.openapi`)."""
    run_id = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}

    def query(name: str, required: bool) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": required, "schema": {"type": "string"}}

    def answers(ok: str, *codes: tuple[str, str]) -> dict[str, Any]:
        return {ok.split(" ", 1)[0]: {"description": ok.split(" ", 1)[1]}} | {
            code: {"description": what} for code, what in codes
        }

    missing = ("404", "unknown run or candidate")
    return {
        "/api/runs/{run_id}/branch": {
            "post": {
                "summary": "A new run whose baseline is a candidate of this run",
                "parameters": [run_id],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": BranchRun.model_json_schema()}},
                },
                "responses": answers(
                    "201 the new run",
                    missing,
                    ("403", "the operator's policy refuses the config"),
                    ("422", "invalid body or overrides"),
                ),
            }
        },
        "/api/runs/{run_id}/compare": {
            "get": {
                "summary": "Two candidates: prompt diff, per-seed scores, traces where they differ",
                "parameters": [run_id, query("a", True), query("b", True)],
                "responses": answers("200 the comparison", missing, ("422", "a or b missing")),
            }
        },
        "/api/runs/{run_id}/why": {
            "get": {
                "summary": "Why each candidate (or one) was created and kept or dropped",
                "parameters": [run_id, query("candidate", False)],
                "responses": answers("200 each candidate's decisions", missing),
            }
        },
    }
