"""One scripted OpenAI-compatible server for the docs' runnable examples: student and reflection.

Whatever the model's name, a request carrying the proposer's block format (``<<<COMPONENT``)
or MIPRO's requests is the reflection model's: it writes a prompt naming every label the
feedback it was shown says was expected, plus those the prompt knew (MIPRO's requests get
:func:`optimizer.testing.scripted_answer`). Any other request is the student's: it knows
which animal makes each sound (``ANIMALS``) and which team a ticket goes to (``TEAMS``), but
answers only when the conversation before the question names that label, else ``unknown``.
``app.state.requests`` keeps every body.
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


LABELS = set(ANIMALS.values()) | set(TEAMS.values())
EXPECTED = re.compile(r"expected[\s'\"`]*([a-z_]+)", re.I)
KNOWN = re.compile(r"Known labels: ([a-z_, ]+)\.")


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def _is_reflection(messages: list[dict[str, Any]]) -> bool:
    text = _text(messages)
    return "<<<COMPONENT" in text or "summarize this data" in text


def _reflection(messages: list[dict[str, Any]]) -> str:
    text = _text(messages)
    if "<<<COMPONENT" not in text or "Write one new, complete instruction" in text:
        return scripted_answer(messages)  # MIPRO's data summary and instructions
    known = {w.strip() for found in KNOWN.findall(text) for w in found.split(",")}
    expected = {w.lower() for w in EXPECTED.findall(text)} & LABELS
    labels = ", ".join(sorted((known | expected) - {""}))
    body = "Answer with the label." + (f" Known labels: {labels}." if labels else " Be precise.")
    return f"<<<COMPONENT system_prompt\n{body}\n>>>\nRATIONALE: name the labels seen"


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
        text = _reflection(messages) if _is_reflection(messages) else _student(messages)
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

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "docs-model", "object": "model"}]})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
        ]
    )
    app.state.requests = []
    return app
