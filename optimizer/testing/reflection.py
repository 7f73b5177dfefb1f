"""A scripted OpenAI-compatible reflection model for end-to-end tests and benches.

It reads the verifier feedback in the proposer's request ("expected cow") and answers a
prompt that names the labels it saw: in the proposer's text-mode block format, as tool calls
(``rewrite_component`` then ``submit``) when the request offers tools (agent mode), and as
one ``RULE:`` line when the request asks for one (rule mode). Being a pure function of the
request, two identical runs get identical proposals, which is what makes "a second identical
run makes zero container calls" testable. It counts its calls; ``record=True`` also keeps
every request it was sent (``app.state.requests``), for tests of what the model was shown,
and a :class:`Hold` keeps its answers from one call on until the test releases them (a run
with one proposal in flight then waits at a known point, nothing else in flight).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["Hold", "reflection_app", "scripted_answer", "scripted_reply"]

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


RULE_ASKED = "RULE: If the input is about"
BLOCK = re.compile(r"<<<COMPONENT (\S+)\n(.*?)\n>>>", re.S)


def _rule(messages: list[dict[str, Any]]) -> str:
    """Rule mode's answer: a rule naming the first expected label the prompt lacks."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    labels = [m.lower() for m in EXPECTED.findall(text) if m.lower() not in ("the", "one")]
    label = labels[0] if labels else "unknown"
    return f"RULE: If the input is about the {label} sound, the answer is {label}."


def scripted_reply(body: dict[str, Any], n: int) -> tuple[dict[str, Any], str, str]:
    """(the assistant message, its text for the usage count, the finish reason) answering a
    chat completion request; ``n`` numbers the call."""
    messages = body.get("messages", [])
    if any(RULE_ASKED in str(m.get("content") or "") for m in messages):
        content = _rule(messages)
        return {"role": "assistant", "content": content}, content, "stop"
    content = scripted_answer(messages)
    if not body.get("tools"):
        return {"role": "assistant", "content": content}, content, "stop"
    name, text = BLOCK.search(content).groups()  # type: ignore[union-attr]
    calls = [
        ("rewrite_component", {"name": name, "text": text}),
        ("submit", {"rationale": content.rsplit("RATIONALE:", 1)[-1].strip()}),
    ]
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call-{n}-{i}",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)},
            }
            for i, (tool, arguments) in enumerate(calls)
        ],
    }
    return message, json.dumps(calls), "tool_calls"


@dataclass
class Hold:
    """Hold the answers from the ``at``-th call on (1-based) until ``released`` is set;
    ``reached`` is set when that call arrives. Thread-safe: the model serves from a thread."""

    at: int
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    async def wait(self, call: int) -> None:
        """Until released, when ``call`` is held."""
        if call < self.at:
            return
        self.reached.set()
        while not self.released.is_set():
            await asyncio.sleep(0.01)


def reflection_app(*, record: bool = False, hold: Hold | None = None) -> Starlette:
    """The scripted reflection model as an app; ``app.state.calls`` counts chat completions,
    and with ``record`` ``app.state.requests`` keeps their bodies in order."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        request.app.state.calls += 1
        call = request.app.state.calls
        if record:
            request.app.state.requests.append(body)
        if hold is not None:
            await hold.wait(call)
        message, content, finish = scripted_reply(body, call)
        return JSONResponse(
            {
                "id": f"chatcmpl-{call}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
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
    app.state.requests = []
    return app
