"""One scripted OpenAI-compatible server for the docs' runnable examples: student and reflection.

Whatever the model's name, a request carrying the proposer's block format (``<<<COMPONENT``)
or MIPRO's requests is the reflection model's, answered by
:func:`optimizer.testing.scripted_answer`. Any other request is the student's: it knows
which animal makes each sound (``ANIMALS``) but answers with the animal only when the
conversation before the question names it, else ``unknown``; it answers a ticket with the
team the system prompt names for it the same way (``TEAMS``). ``app.state.requests`` keeps
every body.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from optimizer.testing import scripted_answer

ANIMALS = {"moo": "cow", "meow": "cat", "woof": "dog", "hoot": "owl", "buzz": "bee", "oink": "pig"}
TEAMS = {"refund": "billing", "invoice": "billing", "password": "accounts", "login": "accounts"}


def _is_reflection(messages: list[dict[str, Any]]) -> bool:
    text = "\n".join(str(m.get("content") or "") for m in messages)
    return "<<<COMPONENT" in text or "summarize this data" in text


def _student(messages: list[dict[str, Any]]) -> str:
    asked = str(messages[-1].get("content") or "").lower()
    context = " ".join(str(m.get("content") or "") for m in messages[:-1]).lower()
    known = set(re.findall(r"[a-z]+", context))
    world = {**ANIMALS, **TEAMS}
    answer = next((a for cue, a in world.items() if cue in asked), "")
    return answer if answer and answer in known else "unknown"


def create_app() -> Starlette:
    """The fake server; ``app.state.requests`` lists the bodies it was sent."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        request.app.state.requests.append(body)
        messages = body["messages"]
        text = scripted_answer(messages) if _is_reflection(messages) else _student(messages)
        return JSONResponse(
            {
                "id": "chatcmpl-docs",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    app.state.requests = []
    return app
