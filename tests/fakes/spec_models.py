"""A scripted OpenAI-compatible server for the spec API's doc examples: student and reflection.

Model ``student``:
- intents (no ``tools``): it knows each query's intent (``WORLD``) but answers it only when
  the conversation before the query (system prompt, demos) names that intent, else
  ``unknown``;
- calculator (``tools`` offered): when the system prompt mentions the calculator it calls the
  tool with the problem's expression and answers the tool's result; else it guesses ``0``.

Model ``reflection`` writes system prompts in the proposer's text-mode block format: the
intents of every query it sees in the request (plus those the prompt already knew), or, for
calculator problems, an instruction to use the calculator. ``app.state.requests`` keeps every
request body, by model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

INTENTS = ("pin_reset", "balance_inquiry", "card_lost", "transfer_failed", "fee_refund")
PHRASES = {
    "pin_reset": "I forgot the PIN of card {i}",
    "balance_inquiry": "How much money is in account {i}?",
    "card_lost": "I lost card number {i} yesterday",
    "transfer_failed": "Transfer {i} to my landlord bounced",
    "fee_refund": "Please give back the fee on statement {i}",
}
WORLD = {"How do I reset my PIN?": "pin_reset", "What's my balance?": "balance_inquiry"}
WORLD.update({PHRASES[intent].format(i=i): intent for intent in INTENTS for i in range(60)})
PROBLEMS = {f"What is {a} times {a + 7}?": (f"{a} * {a + 7}", a * (a + 7)) for a in range(3, 40)}
KNOWN = re.compile(r"Known intents: ([a-z_, ]+)\.")


def intent_rows(count: int) -> list[dict[str, str]]:
    """``count`` flat rows like the spec's, intents interleaved."""
    queries = [q for q in WORLD if not q.startswith(("How do", "What's"))]
    ordered = sorted(queries, key=lambda q: (int(re.findall(r"\d+", q)[0]), WORLD[q]))
    listed = ", ".join(INTENTS)
    return [{"query": q, "intent": WORLD[q], "intents": listed} for q in ordered[:count]]


def calculator_rows(count: int) -> list[dict[str, Any]]:
    """``count`` word problems with their ``answer``."""
    return [{"question": q, "answer": v} for q, (_, v) in list(PROBLEMS.items())[:count]]


def _student(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    if body.get("tools"):
        if messages[-1]["role"] == "tool":
            return {"role": "assistant", "content": str(messages[-1]["content"])}
        if "calculator" not in str(messages[0]["content"]).lower():
            return {"role": "assistant", "content": "0"}
        question = next(q for q in PROBLEMS if q in str(messages[-1]["content"]))
        arguments = json.dumps({"expression": PROBLEMS[question][0]})
        call = {"name": "calculator", "arguments": arguments}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call-1", "type": "function", "function": call}],
        }
    asked = str(messages[-1]["content"])
    intent = next((i for q, i in WORLD.items() if q in asked), "")
    shown = [str(m["content"]) for m in messages[:-1] if m["role"] in ("system", "assistant")]
    context = set(re.findall(r"[a-z_]+", " ".join(shown)))
    return {"role": "assistant", "content": intent if intent in context else "unknown"}


def _reflection(body: dict[str, Any]) -> str:
    text = "\n".join(str(m.get("content") or "") for m in body["messages"])
    if "summarize this data" in text:
        return "Banking queries; the output is one intent label."
    if any(q in text for q in PROBLEMS):
        body_text = "Solve the problem. Use the calculator tool for the arithmetic."
    else:
        known = {w.strip() for found in KNOWN.findall(text) for w in found.split(",")}
        seen = {intent for query, intent in WORLD.items() if query in text}
        names = ", ".join(sorted((known | seen) - {""}))
        body_text = "Classify the customer query into one of the banking intents."
        body_text += f" Known intents: {names}." if names else ""
    return f"<<<COMPONENT system_prompt\n{body_text}\n>>>\nRATIONALE: name what was missed"


def create_app() -> Starlette:
    """The fake server; ``app.state.requests[model]`` lists the bodies it was sent."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        model = body.get("model", "")
        request.app.state.requests.setdefault(model, []).append(body)
        if model == "student":
            message = _student(body)
        else:
            message = {"role": "assistant", "content": _reflection(body)}
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    app.state.requests = {}
    return app
