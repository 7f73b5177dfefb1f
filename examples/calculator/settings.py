"""Which student model the calculator agent calls, and how its ReAct loop is bounded."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from openai import AsyncOpenAI

from container.chat import student_from_env
from schemas import UserError

__all__ = ["AgentSettings"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class AgentSettings:
    """The student endpoint plus the loop's limits.

    ``max_steps`` bounds the model calls of one task and ``max_calls`` its calculator calls.
    ``native_tools`` offers the calculator as an OpenAI tool as well; the text protocol
    (``Action: calculator[...]`` / ``Answer: ...``) is always parsed, because llama.cpp's
    server does not turn Qwen's tool calls into OpenAI ``tool_calls``.
    """

    model: str
    base_url: str | None = None
    api_key: str = "local"
    temperature: float = 0.0
    max_tokens: int = 160
    max_steps: int = 6
    max_calls: int = 8
    native_tools: bool = False
    timeout_s: float = 120.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AgentSettings:
        """From ``GEPA_STUDENT_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
        ``CALC_MAX_STEPS`` and ``CALC_NATIVE_TOOLS``.

        The default model is ``student`` (the alias of ``gepa-runtime models serve``) for a
        local endpoint or without a key, else ``gpt-4o-mini``.
        """
        env = os.environ if environ is None else environ
        endpoint = student_from_env(env)
        steps = env.get("CALC_MAX_STEPS") or str(cls.max_steps)
        if not steps.isdigit() or int(steps) < 1:
            raise UserError(f"CALC_MAX_STEPS must be a positive integer, got {steps!r}")
        native = (env.get("CALC_NATIVE_TOOLS") or "").strip().lower()
        if native not in _TRUE + _FALSE:
            raise UserError(f"CALC_NATIVE_TOOLS must be 1 or 0, got {native!r}")
        return cls(
            model=endpoint.model,
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            max_steps=int(steps),
            native_tools=native in _TRUE,
        )

    def client(self) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` client for these settings (no client-side retries)."""
        return AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=self.timeout_s, max_retries=0
        )
