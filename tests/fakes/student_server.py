"""A scripted OpenAI-compatible student model for the toy riddles
(optimizer/testing/toy/toy_data.jsonl).

It knows which animal makes each sound but answers with the animal's label only when the
system prompt names that label (else ``unknown``), as the toy container's agent does, so a
prompt improves by naming labels. A system prompt saying ``Always answer WORD`` is answered
WORD; one containing ``RATE-LIMIT-ME`` is answered 429 with ``Retry-After: 4``.
``app.state.calls`` counts chat completions and ``app.state.requests`` keeps their bodies.
"""

from __future__ import annotations

import re

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SOUNDS = {
    "moo": "cow",
    "meow": "cat",
    "woof": "dog",
    "hoot": "owl",
    "buzz": "bee",
    "yip": "fox",
    "oink": "pig",
    "cluck": "hen",
    "zap": "eel",
    "tick": "ant",
    "grunt": "yak",
    "bugle": "elk",
}
SOUND = re.compile(r"goes '([a-z]+)'")
ALWAYS = re.compile(r"Always answer (\S+)")


def _answer(system: str, user: str) -> str:
    always = ALWAYS.search(system)
    if always:
        return always.group(1)
    match = SOUND.search(user)
    animal = SOUNDS.get(match.group(1), "") if match else ""
    named = set(re.findall(r"[a-z]+", system.lower()))
    return animal if animal and animal in named else "unknown"


def create_app() -> Starlette:
    """The fake student; ``app.state.calls`` counts chat completions."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        request.app.state.calls += 1
        request.app.state.requests.append(body)
        messages = body.get("messages", [])
        system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        user = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        if "RATE-LIMIT-ME" in system:
            error = {"error": {"message": "Rate limit reached", "type": "rate_limit"}}
            return JSONResponse(error, status_code=429, headers={"Retry-After": "4"})
        content = _answer(system, user)
        return JSONResponse(
            {
                "id": f"chatcmpl-{request.app.state.calls}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "student"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": len(system.split()) + len(user.split()),
                    "completion_tokens": 1,
                },
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    app.state.calls = 0
    app.state.requests = []
    return app
