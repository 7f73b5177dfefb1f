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

Real reflection models err; ``--worse-rate``, ``--multi-fix-rate``, ``--rewrite-rate`` and
``--off-format-rate`` make a share of the answers to a mutation request (not to a merge) err
the way they do, one mode per answer, drawn from the same seeded draw:

- worse: the answer drops or garbles one rule the text already had and adds nothing (it
  rewrote more than it was asked and lost something);
- multi-fix: the answer adds two or three of the rules it saw asked for, not one;
- rewrite: the answer rewords the text's instructions and lists its rules in another order,
  keeping every rule, and adds one (an edit that overlaps every line of the text);
- off-format: the answer ignores the requested format (no ``<<<COMPONENT`` block, no fence):
  the new text as plain prose after a sentence of preamble.

``--errors realistic`` is 25% worse, 15% multi-fix, 10% rewrite and 5% off-format.

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
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

NEEDED = re.compile(r'Needed rule: \\?"([^"\\]+)\\?"')
FENCED = re.compile(r"```[^\n`]*\n(.*?)\n```", re.S)
TARGET = re.compile(r"<<<COMPONENT ([\w.\-]+)")


@dataclass(frozen=True)
class ErrorMix:
    """The share of mutation answers that err, by mode (the rest are the kind answer)."""

    worse: float = 0.0
    multi_fix: float = 0.0
    rewrite: float = 0.0
    off_format: float = 0.0

    def __post_init__(self) -> None:
        rates = (self.worse, self.multi_fix, self.rewrite, self.off_format)
        if any(r < 0 for r in rates) or sum(rates) > 1:
            raise SystemExit(f"error rates must be >= 0 and sum to at most 1 (got {rates})")

    def draw(self, u: float) -> str:
        """The mode of an answer whose uniform draw is ``u``."""
        for mode, rate in (
            ("worse", self.worse),
            ("multi_fix", self.multi_fix),
            ("rewrite", self.rewrite),
            ("off_format", self.off_format),
        ):
            if u < rate:
                return mode
            u -= rate
        return "kind"


KIND = ErrorMix()
REALISTIC = ErrorMix(worse=0.25, multi_fix=0.15, rewrite=0.10, off_format=0.05)
PRESETS = {"none": KIND, "realistic": REALISTIC}


def _block_after(text: str, marker: str) -> str | None:
    """The first fenced block after ``marker`` in ``text``."""
    at = text.find(marker)
    if at < 0:
        return None
    found = FENCED.search(text, at)
    return found.group(1) if found else None


def _rule_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


def reflect(text: str, fixes: int, errors: ErrorMix = KIND) -> tuple[str, str, str, str]:
    """(format, new text, rationale, mode) for one request's text."""
    if "Provide the new instructions within ``` blocks" in text:
        fmt, current = "gepa", FENCED.search(text)
        current_text = current.group(1) if current else ""
    else:
        fmt = "gepa-runtime"
        if "# Two candidates to merge" in text:
            a = _block_after(text, "# Components of candidate A") or ""
            b = _block_after(text, "# The differing components in candidate B") or ""
            merged = a.rstrip() + "".join(f"\n{line}" for line in _rule_lines(b) if line not in a)
            return fmt, merged, "kept the rules of both candidates", "kind"
        current_text = _block_after(text, "## Component `") or ""
    seen = Counter(
        rule for rule in NEEDED.findall(text) if rule.lower() not in current_text.lower()
    )
    rng = random.Random(hashlib.sha256(text.encode()).hexdigest())
    mode = errors.draw(rng.random()) if errors != KIND else "kind"
    if mode == "worse" and _rule_lines(current_text):
        return fmt, *_worsened(current_text, rng), mode
    wanted = rng.choice((2, 3)) if mode == "multi_fix" else fixes
    pool, chosen = dict(seen), []
    while pool and len(chosen) < wanted:
        rule = rng.choices(list(pool), weights=list(pool.values()), k=1)[0]
        chosen.append(rule)
        del pool[rule]
    base = _reworded(current_text, rng) if mode == "rewrite" else current_text
    new = base.rstrip() + "".join(f"\n- {rule}" for rule in chosen)
    if len(chosen) > 1:
        why = f"added the rules the feedback asked for: {'; '.join(chosen)}"
    else:
        why = f"added a rule the feedback asked for: {chosen[0]}" if chosen else "no new rule"
    return fmt, new, why, mode if mode != "worse" else "kind"


def _worsened(current: str, rng: random.Random) -> tuple[str, str]:
    """The text with one of its rules dropped or garbled, and a rationale that hides it."""
    lines = current.splitlines()
    at = rng.choice([i for i, line in enumerate(lines) if line.startswith("- ")])
    if rng.random() < 0.5:
        del lines[at]
    else:
        words = lines[at][2:].split()
        cut = rng.randrange(1, len(words))
        lines[at] = "- " + " ".join(words[cut:] + words[:cut])  # garbled: words rotated
    return "\n".join(lines), "tightened the rules"


def _reworded(current: str, rng: random.Random) -> str:
    """The same rules in another order, the instructions around them in other words."""
    rules = _rule_lines(current)
    rng.shuffle(rules)
    queues = re.search(r"one queue: ([^.]+)\.", current)
    head = (
        f"You sort support tickets. Pick exactly one of these queues: {queues.group(1)}."
        if queues
        else "You sort support tickets into queues."
    )
    return "\n".join([head, "Reply with nothing but the queue's name.", "Routing rules:", *rules])


def _answer(fmt: str, new: str, rationale: str, target: str, mode: str = "kind") -> str:
    if mode == "off_format":
        return f"Sure! Here is an improved version of the prompt.\n\n{new}\n\nHope this helps."
    if fmt == "gepa":
        return f"```\n{new}\n```"
    return f"<<<COMPONENT {target}\n{new}\n>>>\nRATIONALE: {rationale}"


def create_app(latency: float, fixes: int, errors: ErrorMix = KIND) -> Starlette:
    """The OpenAI-compatible app."""
    stats: dict[str, Any] = {"calls": 0, "in_flight": 0, "max_in_flight": 0, "busy_s": 0.0}
    modes: Counter[str] = Counter()

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
        fmt, new, rationale, mode = reflect(text, fixes, errors)
        modes[mode] += 1
        target = (TARGET.findall(text) or ["system_prompt"])[-1]
        content = _answer(fmt, new, rationale, target, mode)
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
        return JSONResponse({**stats, "modes": dict(modes)})

    async def reset(_: Request) -> JSONResponse:
        stats.update(calls=0, in_flight=0, max_in_flight=0, busy_s=0.0)
        modes.clear()
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
    parser.add_argument("--errors", choices=sorted(PRESETS), default=None, help="a preset mix")
    parser.add_argument("--worse-rate", type=float, default=0.0)
    parser.add_argument("--multi-fix-rate", type=float, default=0.0)
    parser.add_argument("--rewrite-rate", type=float, default=0.0)
    parser.add_argument("--off-format-rate", type=float, default=0.0)
    args = parser.parse_args()
    errors = (
        PRESETS[args.errors]
        if args.errors
        else ErrorMix(args.worse_rate, args.multi_fix_rate, args.rewrite_rate, args.off_format_rate)
    )
    uvicorn.run(
        create_app(args.latency, args.fixes_per_call, errors),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
