"""A scripted OpenAI-compatible student for DSPy programs, and the program it serves.

The program (:class:`SoundProgram`) has two predictors: ``guess`` names the animal of a
sound (``sound -> label``) and ``answer`` writes the final answer from the sound and the
label (``sound, label -> answer``). The server reads DSPy's chat format: it answers the
field it is asked for (``[[ ## label ## ]]`` ...), in DSPy's markers. Like the toy student
(:mod:`tests.fakes.student_server`), it knows which animal makes each sound but names it only
when the ``guess`` instructions name that animal, else ``unknown``; ``answer`` repeats the
label. ``app.state.requests`` keeps every request body.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.student_server import SOUND, SOUNDS

ASKED = re.compile(r"\[\[ ## (\w+) ## \]\]")
FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\Z)", re.S)
OBJECTIVE = re.compile(r"your objective is:\s*(.*)\Z", re.S)


def _reply(messages: list[dict[str, Any]]) -> str:
    system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    user = str(messages[-1].get("content") or "")
    given, _, ask = user.partition("\n\nRespond with")
    inputs = {k: v.strip() for k, v in FIELD.findall(given)}
    wanted = [f for f in ASKED.findall(ask) if f != "completed"]
    objective = OBJECTIVE.search(system)
    instructions = objective.group(1) if objective else system
    out: dict[str, str] = {}
    for name in wanted:
        if name == "label":
            heard = SOUND.search(inputs.get("sound", ""))
            animal = SOUNDS.get(heard.group(1), "") if heard else ""
            named = set(re.findall(r"[a-z]+", instructions.lower()))
            out[name] = animal if animal and animal in named else "unknown"
        elif name == "answer":
            out[name] = inputs.get("label", "").strip()
        else:
            out[name] = ""
    return "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in out.items()) + "[[ ## completed ## ]]"


def create_app() -> Starlette:
    """The scripted student; ``app.state.requests`` keeps the request bodies."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        request.app.state.requests.append(body)
        content = _reply(body.get("messages", []))
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(request.app.state.requests)}",
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
                "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    app.state.requests = []
    return app
