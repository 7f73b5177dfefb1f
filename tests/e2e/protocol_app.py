"""A container written against the protocol alone (no SDK), for hostile-container tests.

Its seeds are ``<label>-<i>`` with three-letter labels, as the toy container's, so the
scripted reflection model (optimizer/testing/reflection.py) can teach it: a rollout scores
1.0 when the candidate's prompt names the seed's label. What the SDK would never serve is
configurable: any seed lists (overlapping splits, 200,000 seeds), a fingerprint that changes
after some rollouts, slow answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

LABELS = ("cow", "cat", "dog", "owl", "bee", "fox", "pig", "hen")


def seeds(per_label: int, start: int = 0, labels: Sequence[str] = LABELS) -> list[str]:
    """``<label>-<i>`` for every label and ``i`` in ``[start, start + per_label)``."""
    return [f"{label}-{i}" for label in labels for i in range(start, start + per_label)]


@dataclass
class ProtocolContainer:
    """State and knobs of the app: what ``/program`` says, how ``/rollout`` behaves."""

    train: list[str]
    holdout: list[str]
    val: list[str] = field(default_factory=list)
    program_id: str = "plain-labels"
    fingerprint: str = "fp-1"
    new_fingerprint: str | None = None  # served once ``change_after`` rollouts were answered
    change_after: int | None = None
    delay_s: float = 0.0
    rollouts: int = 0
    program_reads: int = 0

    def current_fingerprint(self) -> str:
        """The fingerprint ``/program`` serves now."""
        if self.change_after is not None and self.rollouts >= self.change_after:
            return self.new_fingerprint or f"{self.fingerprint}-changed"
        return self.fingerprint

    def app(self) -> Starlette:
        """The ASGI app over this state."""
        return Starlette(
            routes=[
                Route("/health", self._health),
                Route("/program", self._program),
                Route("/rollout", self._rollout, methods=["POST"]),
            ]
        )

    async def _health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

    async def _program(self, request: Request) -> JSONResponse:
        self.program_reads += 1
        return JSONResponse(
            {
                "protocol": "gepa-container/1",
                "program_id": self.program_id,
                "fingerprint": self.current_fingerprint(),
                "description": "Answer with the label; the prompt must name the labels.",
                "components": [
                    {"name": "system_prompt", "kind": "prompt", "text": "Answer with the label."}
                ],
                "seeds": {"train": self.train, "val": self.val, "holdout": self.holdout},
            }
        )

    async def _rollout(self, request: Request) -> JSONResponse:
        body = await request.json()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.rollouts += 1
        label = str(body["seed"]).split("-")[0]
        words = set(str(body["candidate"]["system_prompt"]).lower().replace(",", " ").split())
        words |= {w.rstrip(".") for w in words}
        right = label in words
        return JSONResponse(
            {
                "reward": 1.0 if right else 0.0,
                "output": label if right else "unknown",
                "feedback": "correct" if right else f"predicted unknown, expected {label}",
                "usage": {"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.0},
            }
        )
