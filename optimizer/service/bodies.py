"""Request bodies: JSON only, and never more than a limit, checked while they are read.

A browser may send ``text/plain`` or form bodies across sites without asking first (only a
JSON body needs a CORS preflight, which this service never grants), so a body of any other
type is refused with 415. A body larger than ``max_bytes`` is refused with 413 as soon as
its ``Content-Length`` says so or, for a chunked body, as soon as that many bytes arrived:
the service never holds more than ``max_bytes`` of one request in memory.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from optimizer.service.auth import error_json

__all__ = ["DEFAULT_MAX_BODY_BYTES", "JsonBodies"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class JsonBodies:
    """ASGI middleware: 415 for a non-JSON body, 413 for one over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        problem, replay = self._check_headers(scope["method"], headers), receive
        if problem is None:
            problem, replay = await self._read(receive)
        if problem is not None:
            await problem(scope, receive, send)
            return
        await self.app(scope, replay, send)

    def _check_headers(self, method: str, headers: dict[str, str]) -> JSONResponse | None:
        """The refusal the headers alone justify, if any."""
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        length = headers.get("content-length")
        has_body = "transfer-encoding" in headers or (length is not None and length != "0")
        if (kind or has_body) and kind != "application/json":
            return error_json(
                415,
                "UnsupportedMediaType",
                f"{method} bodies must be JSON: send Content-Type: application/json "
                f"(got {kind or 'no Content-Type'})",
            )
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return self._too_large(length)
        return None

    async def _read(self, receive: Receive) -> tuple[JSONResponse | None, Receive]:
        """Read the whole body up to ``max_bytes``: (a refusal, -) or (None, a receive replaying it)."""
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                return None, _replay([message])
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return self._too_large(f"over {self.max_bytes}"), receive
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        return None, _replay([{"type": "http.request", "body": body, "more_body": False}], receive)

    def _too_large(self, size: str) -> JSONResponse:
        return error_json(
            413,
            "PayloadTooLarge",
            f"request body of {size} bytes is over this service's limit of {self.max_bytes} "
            "bytes: a run config is a few kilobytes; send less, or start the service with a "
            "larger `gepa-runtime serve --max-body-bytes N`",
        )


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A ``receive`` that gives ``messages`` first, then defers to ``then`` (disconnects)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive
