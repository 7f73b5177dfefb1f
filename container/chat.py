"""A ready-made target body for template programs: render the template, one chat completion.

``ChatTarget(model=..., base_url=...)`` is what the Python API serves when the user gives a
template, a dataset and a score function but no agent of their own. The student is reached
over any OpenAI-compatible endpoint, its name routed by provider prefix (``openai/``,
``openrouter/``: :mod:`container.student`); its faults propagate (the SDK answers 429/503 and
the optimizer retries), so the client does not retry itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from container.results import AgentResult
from container.student import StudentClients
from container.task import Candidate, Task
from schemas.env import read_env
from transport.routing import is_local_url

__all__ = ["ChatTarget", "StudentEndpoint", "student_from_env"]


@dataclass(frozen=True)
class StudentEndpoint:
    """Which student model a container calls, where, and with which key."""

    model: str
    base_url: str | None
    api_key: str


def student_from_env(environ: Mapping[str, str] | None = None) -> StudentEndpoint:
    """From ``GEPA_STUDENT_MODEL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.

    ``GEPA_STUDENT_MODEL`` also answers to the docs' ``ROLLOUT_GEPA_STUDENT_MODEL`` and the
    deprecated ``GEPA_TASK_MODEL`` (:mod:`schemas.env`). The model keeps its provider prefix
    (``openai/...``, ``openrouter/...``); :class:`StudentClients` routes it. The default
    model is ``student`` (the alias of ``gepa-runtime models serve``) for a local endpoint or
    without a key, else ``gpt-4o-mini``; a missing key becomes ``local``.
    """
    env = os.environ if environ is None else environ
    key = env.get("OPENAI_API_KEY") or ""
    base_url = env.get("OPENAI_BASE_URL") or None
    local = base_url is not None and is_local_url(base_url)
    default = "gpt-4o-mini" if key and not local else "student"
    model = read_env("GEPA_STUDENT_MODEL", env) or default
    return StudentEndpoint(model, base_url, key or "local")


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
        self._clients = StudentClients(
            base_url=base_url, api_key=os.environ.get(api_key_env), timeout_s=timeout_s
        )

    async def __call__(self, task: Task, candidate: Candidate) -> AgentResult:
        messages = candidate.template.render(task.fields)
        response = await self._clients.create(
            candidate.model or self.model,
            messages=messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        text = (response.choices[0].message.content or "") if response.choices else ""
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        return AgentResult(
            output=text.strip(),
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            cached_input_tokens=getattr(details, "cached_tokens", None) or 0,
            model=candidate.model or self.model,
            messages=[*messages, {"role": "assistant", "content": text}],
        )

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._clients.aclose()
