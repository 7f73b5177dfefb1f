"""A toy-labels task container with a hidden capacity, for replica and rate-limit tests.

It serves the toy program of ``toy_container.py`` (the same seeds, the same rule: a rollout
is correct when the prompt names the seed's label, its feedback says ``expected <label>``,
so the scripted reflection model of ``optimizer/testing/reflection.py`` learns from it) as a plain
gepa-container/1 app, with what a real deployment has and the SDK's container does not
simulate:

- ``--capacity C``: it works on at most C rollouts at once and answers 429 above that
  (``Retry-After: --retry-after`` when given), like a server with C workers or a provider
  with C concurrent requests;
- ``--latency S``: each rollout takes S seconds (a latency-bound agent);
- ``--limited-for S``: from its first rollout on, every rollout is answered 429 for S
  seconds (a rate limit that takes a while to clear);
- ``GET /stats``: what it accepted, refused, and at most had in flight; with
  ``?timeline=1`` also ``[time.monotonic(), status]`` of every rollout answered (the
  clock every process of the machine shares, so a test can cut windows out of it).

Every replica started with the same data serves the same program fingerprint. A score
depends only on (prompt, seed), never on which replica answered or when.

Run: python tests/fakes/capacity_container.py --port 8301 --capacity 8 --latency 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

HERE = Path(__file__).resolve().parent
BASELINE = "Answer with the label."


def load_program() -> tuple[dict[str, Any], dict[str, str]]:
    rows = [json.loads(line) for line in (HERE / "toy_data.jsonl").read_text().splitlines()]
    splits = json.loads((HERE / "toy_splits.json").read_text())
    labels = {row["name"]: str(row["expected"]) for row in rows}
    fingerprint = hashlib.sha256(json.dumps([rows, splits], sort_keys=True).encode()).hexdigest()
    program = {
        "protocol": "gepa-container/1",
        "program_id": "toy-labels-capacity",
        "fingerprint": fingerprint,
        "description": "Answer with the label of the item. The prompt must teach which labels exist.",
        "components": [{"name": "system_prompt", "kind": "prompt", "text": BASELINE}],
        "seeds": splits,
    }
    return program, labels


def create_app(
    *,
    capacity: int,
    latency: float,
    retry_after: float | None = None,
    limited_for: float = 0.0,
) -> Starlette:
    """The app; see the module docstring for what each setting does."""
    program, labels = load_program()
    stats: dict[str, Any] = {"accepted": 0, "rejected": 0, "in_flight": 0, "max_in_flight": 0}
    first: list[float] = []
    timeline: list[tuple[float, int]] = []
    busy = {"n": 0}
    refusal = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

    async def get_program(request: Request) -> JSONResponse:
        return JSONResponse(program)

    async def get_stats(request: Request) -> JSONResponse:
        if request.query_params.get("timeline"):
            return JSONResponse({**stats, "timeline": timeline})
        return JSONResponse(stats)

    def refuse(message: str) -> JSONResponse:
        stats["rejected"] += 1
        timeline.append((time.monotonic(), 429))
        error = {"type": "RateLimited", "message": message}
        return JSONResponse({"error": error}, status_code=429, headers=refusal)

    async def rollout(request: Request) -> JSONResponse:
        body = await request.json()
        now = time.monotonic()
        if not first:
            first.append(now)
        if now - first[0] < limited_for:
            return refuse(f"rate limited for {limited_for:g} s")
        if busy["n"] >= capacity:
            return refuse(f"at capacity ({capacity} rollouts at once)")
        busy["n"] += 1
        stats["in_flight"] = busy["n"]
        stats["max_in_flight"] = max(stats["max_in_flight"], busy["n"])
        try:
            await asyncio.sleep(latency)
        finally:
            busy["n"] -= 1
            stats["in_flight"] = busy["n"]
        stats["accepted"] += 1
        timeline.append((time.monotonic(), 200))
        return JSONResponse(answer(body, labels, latency))

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/program", get_program),
            Route("/stats", get_stats),
            Route("/rollout", rollout, methods=["POST"]),
        ]
    )


def answer(body: dict[str, Any], labels: dict[str, str], latency: float) -> dict[str, Any]:
    seed = str(body["seed"])
    if seed not in labels:
        return {"reward": 0.0, "error": f"unknown seed {seed!r}"}
    text = str(body["candidate"].get("system_prompt", ""))
    words = set(text.lower().replace(",", " ").replace(".", " ").split())
    expected = labels[seed]
    output = expected if expected in words else "unknown"
    reward = 1.0 if output == expected else 0.0
    return {
        "reward": reward,
        "output": output,
        "feedback": "correct" if reward else f"predicted {output}, expected {expected}",
        "usage": {"latency_ms": latency * 1000},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--retry-after", type=float, default=None)
    parser.add_argument("--limited-for", type=float, default=0.0)
    args = parser.parse_args()
    app = create_app(
        capacity=args.capacity,
        latency=args.latency,
        retry_after=args.retry_after,
        limited_for=args.limited_for,
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
