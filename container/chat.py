"""A ready-made target body for template programs: render the template, one chat completion.

``ChatTarget(model=..., base_url=...)`` is what the Python API serves when the user gives a
template, a dataset and a score function but no agent of their own. The student is reached
over any OpenAI-compatible endpoint; its faults propagate (the SDK answers 429/503 and the
optimizer retries), so the client does not retry itself.
"""

from __future__ import annotations

import os

from openai import AsyncOpenAI

from container.results import AgentResult
from container.task import Candidate, Task

__all__ = ["ChatTarget"]


class ChatTarget:
    """An async target: ``candidate.template`` rendered for the task, answered by ``model``.

    Call ``aclose()`` when done with it (it holds the HTTP connections of its client).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 256,
        timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=os.environ.get(api_key_env) or "sk-local-no-key",
            timeout=timeout_s,
            max_retries=0,
        )

    async def __call__(self, task: Task, candidate: Candidate) -> AgentResult:
        messages = candidate.template.render(task.input)
        response = await self._client.chat.completions.create(
            model=candidate.model or self.model,
            messages=messages,  # type: ignore[arg-type]
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        text = (response.choices[0].message.content or "") if response.choices else ""
        usage = response.usage
        return AgentResult(
            output=text.strip(),
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            messages=[*messages, {"role": "assistant", "content": text}],
        )

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.close()
