"""A gepa-container/1 app that does nothing but wait ``--latency`` seconds: for benchmarks.

Run: python bench/noop_container.py --port 8199 --latency 0.1
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def create_app(latency: float, seeds: int) -> Starlette:
    """The no-op container: every rollout scores 1.0 after ``latency`` seconds."""
    program = {
        "protocol": "gepa-container/1",
        "program_id": "noop",
        "fingerprint": f"noop-{latency}",
        "components": [{"name": "system_prompt", "kind": "prompt", "text": "noop"}],
        "seeds": {"train": [f"s{i}" for i in range(seeds)], "val": [], "holdout": ["h0"]},
    }

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

    async def get_program(request: Request) -> JSONResponse:
        return JSONResponse(program)

    async def rollout(request: Request) -> JSONResponse:
        await request.body()
        if latency:
            await asyncio.sleep(latency)
        return JSONResponse(
            {"reward": 1.0, "output": "ok", "feedback": "", "usage": {"latency_ms": latency * 1000}}
        )

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/program", get_program),
            Route("/rollout", rollout, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8199)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--seeds", type=int, default=10000)
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.latency, args.seeds),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        backlog=2048,
    )


if __name__ == "__main__":
    main()
