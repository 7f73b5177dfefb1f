"""A scripted OpenAI-compatible reflection model for end-to-end tests and benches (text mode).

It reads the verifier feedback in the proposer's request ("expected cow") and answers a
prompt that names the labels it saw, in the proposer's text-mode block format. Being a
pure function of the request, two identical runs get identical proposals, which is what
makes "a second identical run makes zero container calls" testable. It counts its calls.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["reflection_app", "scripted_answer"]

EXPECTED = re.compile(r"expected[\s'\"`]*([a-z]{3})\b", re.I)
PROMPT = re.compile(r"Known labels: ([a-z, ]+)\.")


CORRECT = re.compile(r"correct output: ([a-z]{3})\b")


def _mipro_answer(text: str) -> str | None:
    """Answers to MIPRO's dataset summary and instruction requests, else None."""
    if "summarize this data" in text:
        return "Riddles about animals; the output is the animal's three-letter label."
    if "Write one new, complete instruction" not in text:
        return None
    labels = sorted(set(CORRECT.findall(text)))
    body = f"Answer with the label. Known labels: {', '.join(labels)}." if labels else "Be precise."
    return f"<<<COMPONENT system_prompt\n{body}\n>>>\nRATIONALE: name labels seen in the data"


def scripted_answer(messages: list[dict[str, Any]]) -> str:
    """The answer to a chat: MIPRO's summary and instructions, else a text-mode proposal that
    names up to two labels the feedback says were expected (detailed failures first)."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    mipro = _mipro_answer(text)
    if mipro is not None:
        return mipro
    # Like a model, it fixes the failures shown in detail (the minibatch) before the ones
    # listed briefly from the rest of the train split.
    detailed, _, brief = text.partition("## Other training examples")
    labels = [
        *sorted({m.lower() for m in EXPECTED.findall(detailed)} - {"the", "one"}),
        *sorted({m.lower() for m in EXPECTED.findall(brief)} - {"the", "one"}),
    ]
    known = set()
    for found in PROMPT.findall(text):
        known |= {w.strip() for w in found.split(",") if w.strip()}
    # Add at most two new labels per proposal, so the search needs several steps.
    new = list(dict.fromkeys(label for label in labels if label not in known))[:2]
    words = sorted(known | set(new))
    body = "Answer with the label." + (
        f" Known labels: {', '.join(words)}." if words else " Be precise."
    )
    return f"<<<COMPONENT system_prompt\n{body}\n>>>\nRATIONALE: name the labels the student missed: {', '.join(new) or 'none'}"


def reflection_app() -> Starlette:
    """The scripted reflection model as an app; ``app.state.calls`` counts chat completions."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        request.app.state.calls += 1
        content = scripted_answer(body.get("messages", []))
        return JSONResponse(
            {
                "id": f"chatcmpl-{request.app.state.calls}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": len(str(body)) // 4,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": len(str(body)) // 4 + len(content) // 4,
                },
            }
        )

    async def models(request: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": "fake-reflection", "object": "model"}]}
        )

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
        ]
    )
    app.state.calls = 0
    return app
