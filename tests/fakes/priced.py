"""A scripted container where longer prompts score a little higher and cost more per call.

Each seed has a label; a rollout scores 0.9 when the prompt has the line ``- <label>`` (else 0,
feedback ``expected <label>``), plus 0.01 for each ``- detail N`` line, up to five. Its usage
reports ``gpt-4o-mini`` tokens: the prompt's characters / 4 plus the item, so every line added
costs more. ``DetailProposer`` adds a missing label while one fails, then one detail line a
proposal: a search climbs from the bare baseline to the longest, best-scoring prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from proposer import ProposalRequest
from tests.fakes.scripted import ScriptedProposer

BASELINE = "Answer with the label."
LABELS = ("ant", "bee", "cat")
MAX_DETAILS = 5
EXPECTED = re.compile(r"expected (\w+)")


def priced_program(train: int = 2, holdout: int = 3) -> dict[str, Any]:
    """``GET /program``: seeds ``<label>-<i>``, a latency objective declared minimised."""
    seeds: dict[str, list[str]] = {"train": [], "val": [], "holdout": []}
    for label in LABELS:
        names = [f"{label}-{i}" for i in range(train + holdout)]
        seeds["train"] += names[:train]
        seeds["holdout"] += names[train:]
    return {
        "program_id": "priced",
        "fingerprint": "fp-priced-1",
        "components": [{"name": "system_prompt", "kind": "prompt", "text": BASELINE}],
        "seeds": seeds,
        "objectives": ["reward", {"name": "words", "direction": "minimize"}],
    }


def details(prompt: str) -> int:
    """The detail lines of a prompt."""
    return sum(1 for line in prompt.splitlines() if line.startswith("- detail "))


@dataclass
class PricedContainer:
    """The container as an ``httpx.MockTransport`` handler for ``http://priced``."""

    program: dict[str, Any] = field(default_factory=priced_program)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "protocol": "gepa-container/1"})
        if request.url.path == "/program":
            return httpx.Response(200, json=self.program)
        body = json.loads(request.content)
        prompt, seed = body["candidate"]["system_prompt"], body["seed"]
        label = seed.rsplit("-", 1)[0]
        ok = f"- {label}" in prompt.splitlines()
        reward = 0.9 + 0.01 * min(details(prompt), MAX_DETAILS) if ok else 0.0
        return httpx.Response(
            200,
            json={
                "reward": reward,
                "objectives": {"reward": reward, "words": float(len(prompt.split()))},
                "output": label if ok else "unknown",
                "feedback": "correct" if ok else f"predicted unknown, expected {label}",
                "usage": {
                    "input_tokens": len(prompt) // 4 + 10,
                    "output_tokens": 2,
                    "model": "gpt-4o-mini",
                },
            },
        )

    def client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` that reaches this container for ``http://priced``."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def _next_text(request: ProposalRequest, n: int) -> str | None:
    text = request.parent.components["system_prompt"]
    lines = text.splitlines()
    failing = sorted(
        {m.group(1) for e in request.evaluations if (m := EXPECTED.search(e.feedback))}
        - {line[2:] for line in lines}
    )
    if failing:
        return f"{text}\n- {failing[0]}"
    count = details(text)
    if count >= MAX_DETAILS or not all(f"- {label}" in lines for label in LABELS):
        return None
    return f"{text}\n- detail {count + 1}: answer in lower case, one word, no punctuation"


def detail_proposer() -> ScriptedProposer:
    """Adds a missing label while one fails, then one detail line per proposal."""
    return ScriptedProposer(script=_next_text)
