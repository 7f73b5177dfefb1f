"""Bearer-token protection of the service (``serve --token T`` or ``GEPA_SERVE_TOKEN``).

The API takes ``Authorization: Bearer T``. A browser cannot set headers on a page load or
on an ``EventSource``, so ``GET`` requests may carry ``?token=T`` instead; the console reads
it from its own URL and passes it on. Static assets, ``/api/health`` and ``/openapi.json``
hold no run data and stay open. A refusal names the fix: a JSON error for the API, a page
with a token field for the console.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from optimizer.service.pages import message_page

__all__ = ["TokenAuth", "error_json"]

OPEN_PATHS = ("/static/", "/api/health", "/openapi.json", "/favicon.ico")


def error_json(
    status: int, type_: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The service's error body ``{"error": {"type", "message"}}``."""
    return JSONResponse(
        {"error": {"type": type_, "message": message}}, status_code=status, headers=headers
    )


class TokenAuth:
    """ASGI middleware: refuse requests without the service token (when one is set)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self._expected = token.encode() if token else None

    def _given(self, scope: Scope) -> bytes | None:
        for name, value in scope.get("headers", []):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return bytes(value[7:].strip())
        if scope.get("method") == "GET":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if query.get("token"):
                return query["token"][0].encode()
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if self._expected is None or scope["type"] != "http" or path.startswith(OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        given = self._given(scope)
        if given is not None and hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        await self._refuse(path, wrong=given is not None)(scope, receive, send)

    @staticmethod
    def _refuse(path: str, *, wrong: bool) -> Response:
        reason = "wrong" if wrong else "missing"
        if path.startswith("/api/"):
            return error_json(
                401,
                "Unauthorized",
                f"{reason} service token: send Authorization: Bearer <token> (the value given to "
                "`gepa-runtime serve --token` or GEPA_SERVE_TOKEN); the CLI takes --server-token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        body = (
            f"<p>This console is protected by a token and the one given is {reason}.</p>"
            "<p>Enter the value passed to <code>gepa-runtime serve --token</code> "
            "(or <code>GEPA_SERVE_TOKEN</code>); it is added to the address as "
            "<code>?token=&hellip;</code>.</p>"
            '<form method="get" class="token-form"><input name="token" type="password" '
            'placeholder="service token" autofocus><button type="submit">Open console</button></form>'
        )
        page = message_page("Token needed", body)
        return HTMLResponse(page, status_code=401, headers={"WWW-Authenticate": "Bearer"})
