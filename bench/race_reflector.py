"""A simulated hosted reflection model for the race: OpenAI-compatible, fixed latency, concurrent.

It behaves like a capable but bounded model on ``bench/race_tasks.py``: it reads the verifier
feedback in the request, collects the rules the feedback says were needed (``Needed rule:
"..."``) that the current text does not state yet, and writes the current text plus one of
them, drawn with weights = how often it saw each (a model attends to the commonest failure
more often), so each reflection fixes one thing. Asked to
merge two candidates, it keeps every rule line of both. It answers in the format it is asked
for: gepa-runtime's ``<<<COMPONENT name`` blocks, or gepa-ai's fenced block ("Provide the new
instructions within ``` blocks"). The draw is seeded by the request's text, so a request asked
twice gets the same answer, and a run is reproducible.

Each call waits ``--latency`` seconds; concurrent calls overlap, as on a hosted API.
``GET /stats`` returns the number of calls and the most that were in flight at once;
``POST /reset`` zeroes them.

    python bench/race_reflector.py --port 8702 --latency 4
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import re
import time
from collections import Counter
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

NEEDED = re.compile(r'Needed rule: \\?"([^"\\]+)\\?"')
FENCED = re.compile(r"```[^\n`]*\n(.*?)\n```", re.S)
TARGET = re.compile(r"<<<COMPONENT ([\w.\-]+)")


def _block_after(text: str, marker: str) -> str | None:
    """The first fenced block after ``marker`` in ``text``."""
    at = text.find(marker)
    if at < 0:
        return None
    found = FENCED.search(text, at)
    return found.group(1) if found else None


def _rule_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


def reflect(text: str, fixes: int) -> tuple[str, str, str]:
    """(format, new text, rationale) for one request's text."""
    if "Provide the new instructions within ``` blocks" in text:
        fmt, current = "gepa", FENCED.search(text)
        current_text = current.group(1) if current else ""
    else:
        fmt = "gepa-runtime"
        if "# Two candidates to merge" in text:
            a = _block_after(text, "# Components of candidate A") or ""
            b = _block_after(text, "# The differing components in candidate B") or ""
            merged = a.rstrip() + "".join(f"\n{line}" for line in _rule_lines(b) if line not in a)
            return fmt, merged, "kept the rules of both candidates"
        current_text = _block_after(text, "## Component `") or ""
    seen = Counter(
        rule for rule in NEEDED.findall(text) if rule.lower() not in current_text.lower()
    )
    rng = random.Random(hashlib.sha256(text.encode()).hexdigest())
    pool, chosen = dict(seen), []
    while pool and len(chosen) < fixes:
        rule = rng.choices(list(pool), weights=list(pool.values()), k=1)[0]
        chosen.append(rule)
        del pool[rule]
    new = current_text.rstrip() + "".join(f"\n- {rule}" for rule in chosen)
    why = f"added a rule the feedback asked for: {chosen[0]}" if chosen else "no new rule"
    return fmt, new, why


def _answer(fmt: str, new: str, rationale: str, target: str) -> str:
    if fmt == "gepa":
        return f"```\n{new}\n```"
    return f"<<<COMPONENT {target}\n{new}\n>>>\nRATIONALE: {rationale}"


def create_app(latency: float, fixes: int) -> Starlette:
    """The OpenAI-compatible app."""
    stats: dict[str, Any] = {"calls": 0, "in_flight": 0, "max_in_flight": 0, "busy_s": 0.0}

    async def completions(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ClientDisconnect:  # a search that stopped dropped its pending calls
            return JSONResponse({"error": "client went away"}, status_code=499)
        messages = body.get("messages") or []
        text = "\n".join(str(m.get("content") or "") for m in messages)
        stats["calls"] += 1
        stats["in_flight"] += 1
        stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        started = time.monotonic()
        try:
            await asyncio.sleep(latency)
        finally:
            stats["in_flight"] -= 1
            stats["busy_s"] += time.monotonic() - started
        fmt, new, rationale = reflect(text, fixes)
        target = (TARGET.findall(text) or ["system_prompt"])[-1]
        content = _answer(fmt, new, rationale, target)
        return JSONResponse(
            {
                "id": f"sim-{stats['calls']}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "sim"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(text) // 4,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": (len(text) + len(content)) // 4,
                },
            }
        )

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "sim", "object": "model"}]})

    async def get_stats(_: Request) -> JSONResponse:
        return JSONResponse(stats)

    async def reset(_: Request) -> JSONResponse:
        stats.update(calls=0, in_flight=0, max_in_flight=0, busy_s=0.0)
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
            Route("/stats", get_stats),
            Route("/reset", reset, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=4.0, help="seconds per call")
    parser.add_argument("--fixes-per-call", type=int, default=1)
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.latency, args.fixes_per_call),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
