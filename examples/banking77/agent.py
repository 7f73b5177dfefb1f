"""The Banking77 student: one chat completion against any OpenAI-compatible endpoint.

The system message is the FIXED label list (``Labels: a, b, ...``), which the optimizer never
edits, followed by the candidate's ``system_prompt`` (the mutable component); the user
message is the query. The list comes first so that what changes from one candidate to the
next is the end of the prompt: llama.cpp (and a hosted model's prompt cache) reuses the
~700 tokens of labels, and a new candidate's first call costs only its own text. On the
local 0.5B it also classified better that way (0.175 against 0.136 on 154 calls). Faults of the endpoint (rate limits, timeouts, dropped connections)
propagate: the container SDK answers 429/503 and the optimizer retries, so the client itself
does not retry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openai import AsyncOpenAI

from container import AgentResult, Candidate, Task
from container.chat import student_from_env
from container.student import StudentClients
from examples.banking77.labels import parse_label

__all__ = ["Banking77Agent", "StudentSettings", "build_messages", "system_message"]

# USD per million (input, output) tokens, for the spend the optimizer caps.
_PRICES = {"gpt-4o-mini": (0.15, 0.60), "gpt-4.1-mini": (0.40, 1.60), "gpt-4.1-nano": (0.10, 0.40)}


@dataclass(frozen=True)
class StudentSettings:
    """Which student model to call and how."""

    model: str
    base_url: str | None = None
    api_key: str = "local"
    temperature: float = 0.0
    max_tokens: int = 20
    timeout_s: float = 120.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StudentSettings:
        """From ``GEPA_STUDENT_MODEL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.

        The default model is ``student`` (the alias of ``gepa-runtime models serve``) for a
        local endpoint or without a key, else ``gpt-4o-mini``.
        """
        endpoint = student_from_env(environ)
        return cls(model=endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key)

    def client(self) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` client for these settings (no client-side retries)."""
        return AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=self.timeout_s, max_retries=0
        )


def system_message(prompt: str, labels: Sequence[str]) -> str:
    """The fixed label list, then the candidate prompt."""
    return f"Labels: {', '.join(labels)}\n\n{prompt.rstrip()}"


def build_messages(prompt: str, labels: Sequence[str], query: str) -> list[dict[str, str]]:
    """The chat messages of one classification."""
    return [
        {"role": "system", "content": system_message(prompt, labels)},
        {"role": "user", "content": query},
    ]


def _cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    price = _PRICES.get(model.removeprefix("openai/"))
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


class Banking77Agent:
    """Classify one query with the candidate prompt; ``run`` is the container target's body."""

    def __init__(
        self, client: AsyncOpenAI, settings: StudentSettings, labels: Sequence[str]
    ) -> None:
        self.client = client
        self.settings = settings
        self.labels = tuple(labels)
        # ``client`` serves unprefixed and openai/ names; openrouter/... gets its own client
        self.clients = StudentClients(
            base_url=settings.base_url, api_key=settings.api_key, default_client=client
        )

    async def run(self, task: Task, candidate: Candidate) -> AgentResult:
        """One chat completion; the output is the parsed label (``unknown`` if none)."""
        model = candidate.model or self.settings.model
        messages = build_messages(candidate["system_prompt"], self.labels, str(task.input["text"]))
        client, wire_model = self.clients.resolve(model)
        response = await client.chat.completions.create(
            model=wire_model,
            messages=messages,  # type: ignore[arg-type]
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
        )
        raw = (response.choices[0].message.content or "") if response.choices else ""
        usage = response.usage
        input_tokens = usage.prompt_tokens if usage else 0
        output_tokens = usage.completion_tokens if usage else 0
        metadata: dict[str, Any] = {"raw_output": raw, "model": response.model or model}
        return AgentResult(
            output=parse_label(raw, self.labels),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=_cost(model, input_tokens, output_tokens),
            messages=[*messages, {"role": "assistant", "content": raw}],
            metadata=metadata,
        )
