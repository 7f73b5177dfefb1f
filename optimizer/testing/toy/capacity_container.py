"""A toy-labels task container with a hidden capacity, for replica and rate-limit tests.

It serves the toy program of ``toy_container.py`` (the same seeds, the same rule: a rollout is
correct when the prompt names the seed's label, its feedback says ``expected <label>``, so the
scripted reflection model of :mod:`optimizer.testing.reflection` learns from it) as a plain
gepa-container/1 app, with what a real deployment has and the SDK's container does not simulate:

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

Run: python optimizer/testing/toy/capacity_container.py --port 8301 --capacity 8 --latency 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["answer", "create_app", "load_program", "main"]

HERE = Path(__file__).resolve().parent
BASELINE = "Answer with the label."


def load_program() -> tuple[dict[str, Any], dict[str, str]]:
    """The program it serves (``GET /program``) and each seed's label."""
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


@dataclass
class _Server:
    """The app's settings, its counters and its timeline of answers."""

    capacity: int
    latency: float
    limited_for: float
    refusal: dict[str, str]  # headers of a 429
    program: dict[str, Any]
    labels: dict[str, str]
    stats: dict[str, Any] = field(
        default_factory=lambda: {"accepted": 0, "rejected": 0, "in_flight": 0, "max_in_flight": 0}
    )
    timeline: list[tuple[float, int]] = field(default_factory=list)
    first: float | None = None  # when the first rollout came
    busy: int = 0

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

    async def get_program(self, request: Request) -> JSONResponse:
        return JSONResponse(self.program)

    async def get_stats(self, request: Request) -> JSONResponse:
        if request.query_params.get("timeline"):
            return JSONResponse({**self.stats, "timeline": self.timeline})
        return JSONResponse(self.stats)

    def refuse(self, message: str) -> JSONResponse:
        self.stats["rejected"] += 1
        self.timeline.append((time.monotonic(), 429))
        error = {"type": "RateLimited", "message": message}
        return JSONResponse({"error": error}, status_code=429, headers=self.refusal)

    async def rollout(self, request: Request) -> JSONResponse:
        body = await request.json()
        now = time.monotonic()
        if self.first is None:
            self.first = now
        if now - self.first < self.limited_for:
            return self.refuse(f"rate limited for {self.limited_for:g} s")
        if self.busy >= self.capacity:
            return self.refuse(f"at capacity ({self.capacity} rollouts at once)")
        self.busy += 1
        self.stats["in_flight"] = self.busy
        self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self.busy)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.busy -= 1
            self.stats["in_flight"] = self.busy
        self.stats["accepted"] += 1
        self.timeline.append((time.monotonic(), 200))
        return JSONResponse(answer(body, self.labels, self.latency))


def create_app(
    *,
    capacity: int,
    latency: float,
    retry_after: float | None = None,
    limited_for: float = 0.0,
) -> Starlette:
    """The app; see the module docstring for what each setting does."""
    program, labels = load_program()
    refusal = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    server = _Server(capacity, latency, limited_for, refusal, program, labels)
    return Starlette(
        routes=[
            Route("/health", server.health),
            Route("/program", server.get_program),
            Route("/stats", server.get_stats),
            Route("/rollout", server.rollout, methods=["POST"]),
        ]
    )


def answer(body: dict[str, Any], labels: dict[str, str], latency: float) -> dict[str, Any]:
    """The rollout answer to ``body``: the label when the prompt names it, else ``unknown``."""
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
    """Serve it on 127.0.0.1 (see the module docstring for the flags)."""
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
