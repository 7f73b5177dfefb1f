"""The Starlette app that serves a target as a ``gepa-container/1`` task container.

Routes: ``GET /health`` (open), ``GET /program`` and ``POST /rollout`` (bearer token when
one is set). Every non-200 answer has the body ``{"error": {"type", "message"}}``; the
mapping from failures to status codes lives in :mod:`container.faults` (which mistake gives
which status: ``docs/container-errors.md``).
"""

from __future__ import annotations

import hmac
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from container.dataset import Dataset
from container.faults import (
    RequestRejected,
    error_json,
    error_kind,
    error_response,
    fault_status,
)
from container.program import ServedProgram, build_served_program
from container.rollout import run_rollout
from container.splits import Splits
from container.target import Target
from container.tracing import configure_tracing
from schemas import Health, RolloutRequest

__all__ = ["create_app", "served_program"]

logger = logging.getLogger("gepa.container")


def create_app(
    target: Target,
    *,
    dataset: Dataset | str | Path | None = None,
    splits: Splits | str | Path | None = None,
    verifier: Any = None,
    token: str | None = None,
    max_body_bytes: int = 1_000_000,
) -> Starlette:
    """A Starlette app serving ``target``; paths are loaded now, so errors show at startup.

    ``dataset`` defaults to the decorator's; ``splits`` is a ``Splits``, a splits file or
    ``None`` (split files, else the stratified default); ``verifier`` is anything
    ``load_verifier`` takes, defaulting to the decorator's, else ``normalized``.
    """
    served = build_served_program(target, dataset=dataset, splits=splits, verifier=verifier)
    configure_tracing()  # OTLP export when OTEL_EXPORTER_OTLP_* asks for it (optional extra)
    expected_auth = token.encode() if token else None
    program_body = served.program.model_dump(mode="json")
    health_body = Health().model_dump(mode="json")

    def authorize(request: Request) -> None:
        if expected_auth is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        # The scheme is case-insensitive (RFC 7235): "bearer x" is as good as "Bearer x".
        given = credentials.strip().encode() if scheme.lower() == "bearer" else b""
        if not hmac.compare_digest(given, expected_auth):
            reason = "missing" if not header else "wrong"
            raise RequestRejected(
                401,
                "Unauthorized",
                f"{reason} bearer token; send Authorization: Bearer <token>",
                headers={"WWW-Authenticate": "Bearer"},
            )

    async def health(request: Request) -> Response:
        return JSONResponse(health_body)

    async def program(request: Request) -> Response:
        try:
            authorize(request)
        except RequestRejected as exc:
            return error_response(exc)
        return JSONResponse(program_body)

    async def rollout(request: Request) -> Response:
        try:
            authorize(request)
            body = await _read_body(request, max_body_bytes)
            rollout_request = _parse(body)
            response = await run_rollout(served, rollout_request)
        except RequestRejected as exc:
            return error_response(exc)
        except Exception as exc:  # noqa: BLE001 - user code failed: logged, answered, never scored
            _log_fault(target.id, exc)
            return error_response(exc)
        return JSONResponse(response.model_dump(mode="json"))

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
        headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else None
        message = f"{request.method} {request.url.path}: {detail}"
        return error_json(status, "HTTPError", message, headers=headers)  # keeps 405's Allow

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/program", program, methods=["GET"]),
            Route("/rollout", rollout, methods=["POST"]),
        ],
        exception_handlers={HTTPException: http_error},
    )
    app.state.served = served
    return app


def _log_fault(target_id: str, exc: Exception) -> None:
    """A crash with its traceback; a user mistake or a retryable fault in one line."""
    status = fault_status(exc)[0]
    if status == 500:
        logger.exception("rollout of %r failed", target_id)
    elif status < 500 and status != 429:
        logger.warning("rollout of %r refused (%d %s): %s", target_id, status, error_kind(exc), exc)
    else:
        logger.warning("rollout of %r: retryable fault %s: %s", target_id, type(exc).__name__, exc)


def served_program(app: Starlette) -> ServedProgram:
    """The ``ServedProgram`` behind an app made by ``create_app``."""
    return app.state.served  # type: ignore[no-any-return]


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise RequestRejected(400, "InvalidBody", "Content-Length is not a number") from None
        if size > limit:
            raise RequestRejected(
                413, "PayloadTooLarge", f"body of {size} bytes is over the limit of {limit} bytes"
            )
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:  # a lying or missing Content-Length
            raise RequestRejected(
                413, "PayloadTooLarge", f"body is over the limit of {limit} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(body: bytes) -> RolloutRequest:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestRejected(400, "InvalidBody", f"body is not valid JSON: {exc}") from None
    try:
        return RolloutRequest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise RequestRejected(400, "InvalidBody", f"invalid rollout request: {problems}") from None
