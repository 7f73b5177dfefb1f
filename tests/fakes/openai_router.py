"""One fake OpenAI-compatible endpoint serving several scripted models, chosen by name.

What ``OPENAI_BASE_URL`` points at in tests of the product docs' examples: the student and
the reflection model behind one URL, as with OpenAI itself. A model name it does not serve
(``openai/gpt-4.1-mini`` sent with its routing prefix) gets OpenAI's 404, so a prefix that
reaches the wire fails the test. ``seen`` lists the model names asked for, in order.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]  # fmt: skip


class ModelRouter:
    """An ASGI app: ``/v1/chat/completions`` forwarded to the app of the body's ``model``."""

    def __init__(self, models: dict[str, ASGIApp]) -> None:
        self.models = models
        self.seen: list[str] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"].endswith("/models"):
            data = [{"id": name, "object": "model"} for name in self.models]
            await _json(send, 200, {"object": "list", "data": data})
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":  # a search that stopped dropped its call
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        model = str(json.loads(body or b"{}").get("model"))
        self.seen.append(model)
        app = self.models.get(model)
        if app is None:
            error = {"message": f"The model `{model}` does not exist", "code": "model_not_found"}
            await _json(send, 404, {"error": error})
            return

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)


async def _json(send: Any, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
