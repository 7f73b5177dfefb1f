"""A task container whose student models differ in what they know and what they cost.

Seeds are ``<label>-<i>``; a rollout is correct when the prompt names the label (any word of
it) and the student model of the rollout (``policy.model``) knows that label. Models and
prices are :data:`MODELS`; the feedback says ``expected <label>`` (what the scripted
reflection models read). ``calls`` counts rollouts per (candidate hash, seed, model);
``ignore_policy=True`` makes it answer every rollout with :data:`DEFAULT` whatever the
policy says, as a container that ignores ``policy.model`` does.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from schemas import content_hash

LABELS = ("ant", "bee", "cat", "dog", "eel")
# model -> (labels it knows, dollars per rollout, latency in ms)
MODELS: dict[str, tuple[frozenset[str], float, float]] = {
    "gpt-4.1-nano": (frozenset({"ant", "bee"}), 0.0001, 120.0),
    "gpt-4.1-mini": (frozenset({"ant", "bee", "cat", "dog"}), 0.0004, 300.0),
    "gpt-4.1": (frozenset(LABELS), 0.002, 900.0),
}
DEFAULT = "gpt-4.1-mini"


@dataclass
class ModelContainer:
    """The container's state; ``app()`` serves it."""

    ignore_policy: bool = False
    train: int = 2
    holdout: int = 2
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def program(self) -> dict[str, object]:
        seeds: dict[str, list[str]] = {"train": [], "val": [], "holdout": []}
        for label in LABELS:
            names = [f"{label}-{i}" for i in range(self.train + self.holdout)]
            seeds["train"] += names[: self.train]
            seeds["holdout"] += names[self.train :]
        return {
            "program_id": "models",
            "fingerprint": "fp-models-1",
            "description": "Name the animal of the item; the prompt must list the labels.",
            "components": [
                {"name": "system_prompt", "kind": "prompt", "text": "Answer with the label."}
            ],
            "seeds": seeds,
        }

    def rollout(self, body: dict[str, object]) -> dict[str, object]:
        candidate = body["candidate"]
        assert isinstance(candidate, dict)
        policy = body.get("policy") or {}
        asked = policy.get("model") if isinstance(policy, dict) else None
        model = DEFAULT if self.ignore_policy or asked is None else str(asked)
        seed = str(body["seed"])
        self.calls[(content_hash(candidate), seed, str(asked))] += 1
        known, price, latency = MODELS[model]
        label = seed.rsplit("-", 1)[0]
        named = set(re.findall(r"[a-z]+", str(candidate["system_prompt"]).lower()))
        ok = label in named and label in known
        return {
            "reward": 1.0 if ok else 0.0,
            "output": label if ok else "unknown",
            "feedback": "correct" if ok else f"predicted unknown, expected {label}",
            "trace": {"messages": [{"role": "user", "content": f"item {seed}"}]},
            "usage": {
                "input_tokens": 20,
                "output_tokens": 1,
                "cost_usd": price,
                "latency_ms": latency,
            },
        }

    def app(self) -> Starlette:
        async def health(request: Request) -> JSONResponse:
            return JSONResponse({"status": "ok", "protocol": "gepa-container/1"})

        async def program(request: Request) -> JSONResponse:
            return JSONResponse(self.program())

        async def rollout(request: Request) -> JSONResponse:
            return JSONResponse(self.rollout(await request.json()))

        return Starlette(
            routes=[
                Route("/health", health),
                Route("/program", program),
                Route("/rollout", rollout, methods=["POST"]),
            ]
        )
