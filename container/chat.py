"""A ready-made target body for template programs: render the template, one chat completion.

``ChatTarget(model=..., base_url=...)`` is what the Python API serves when the user gives a
template, a dataset and a score function but no agent of their own. The student is reached
over any OpenAI-compatible endpoint; its faults propagate (the SDK answers 429/503 and the
optimizer retries), so the client does not retry itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from openai import AsyncOpenAI

from container.results import AgentResult
from container.task import Candidate, Task

__all__ = ["ChatTarget", "StudentEndpoint", "student_from_env"]

_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


@dataclass(frozen=True)
class StudentEndpoint:
    """Which student model a container calls, where, and with which key."""

    model: str
    base_url: str | None
    api_key: str


def student_from_env(environ: Mapping[str, str] | None = None) -> StudentEndpoint:
    """From ``GEPA_STUDENT_MODEL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.

    The default model is ``student`` (the alias of ``gepa-runtime models serve``) for a
    local endpoint or without a key, else ``gpt-4o-mini``; a missing key becomes ``local``.
    """
    env = os.environ if environ is None else environ
    key = env.get("OPENAI_API_KEY") or ""
    base_url = env.get("OPENAI_BASE_URL") or None
    local = base_url is not None and urlsplit(base_url).hostname in _LOCAL_HOSTS
    default = "gpt-4o-mini" if key and not local else "student"
    return StudentEndpoint(env.get("GEPA_STUDENT_MODEL") or default, base_url, key or "local")


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
        messages = candidate.template.render(task.fields)
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
