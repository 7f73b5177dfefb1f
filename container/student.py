"""The student model's clients: one ``AsyncOpenAI`` per endpoint a model name routes to.

A container calls its student with the model it was configured with (``GEPA_STUDENT_MODEL``)
or the one a rollout's policy names (``candidate.model``: the optimizer's ``--task-model``).
Either may carry a provider prefix as LiteLLM users write them (``openai/``, ``openrouter/``,
``ollama/``, ``anthropic/``, ``gemini/``, ``groq/``, ...: the table of :mod:`transport.routing`).
``resolve(model)`` gives the client of that model's endpoint and the name to send, so a
prefix never reaches the wire, and an ``openrouter/`` or ``anthropic/`` policy reaches its
provider with its own key even when the container's endpoint is a local server.
``create(model, **body)`` is one chat completion with the body shaped for the provider
(:func:`transport.routing.adapt_request`: temperature ranges, field names). ``base_url`` and ``api_key`` are the OpenAI endpoint's (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``): they serve unprefixed and ``openai/`` names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from schemas import UserError
from transport.chat_client import open_chat_client
from transport.routing import (
    DEFAULT_KEY_ENV,
    OPENROUTER_URL,
    ModelRoute,
    adapt_request,
    route_model,
)

if TYPE_CHECKING:  # the package loads with the first client (the optimizer never makes one)
    from openai import AsyncOpenAI

__all__ = ["StudentClients"]

_NO_KEY = "sk-local-no-key"  # local servers ignore the key, but the client wants one


class StudentClients:
    """Clients by endpoint, made on first use; call ``aclose()`` when done."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        default_client: AsyncOpenAI | None = None,
        timeout_s: float = 120.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._base_url = base_url
        self._api_key = api_key or _NO_KEY
        self._timeout_s = timeout_s
        self._env = os.environ if environ is None else environ
        self._clients: dict[tuple[str | None, str, str], Any] = {}
        if default_client is not None:
            self._clients[(base_url, DEFAULT_KEY_ENV, "openai")] = default_client
        self._owned: list[Any] = []

    def resolve(self, model: str) -> tuple[AsyncOpenAI, str]:
        """The client for ``model``'s endpoint and the model name to send to it."""
        client, route = self._resolve(model)
        return client, route.model

    async def create(self, model: str, **body: Any) -> Any:
        """One chat completion of ``model`` (routed), its body shaped for the provider."""
        client, route = self._resolve(model)
        request = adapt_request(route, {"model": route.model, **body})
        return await client.chat.completions.create(**request)

    def _resolve(self, model: str) -> tuple[Any, ModelRoute]:
        # The container's base URL is the OpenAI endpoint's: openrouter/, ollama/ and the
        # providers' names go to their own endpoints.
        route = route_model(model, default_base_url=self._base_url, environ=self._env)
        slot = (route.base_url, route.api_key_env, route.client)
        client = self._clients.get(slot)
        if client is None:
            client = open_chat_client(
                route,
                api_key=self._key(route.api_key_env, route.local, model),
                timeout=self._timeout_s,
                max_retries=0,  # faults propagate: the SDK answers 429/503, the optimizer retries
                default_headers={"X-Title": "gepa-runtime"}
                if route.base_url == OPENROUTER_URL
                else None,
            )
            self._clients[slot] = client
            self._owned.append(client)
        return client, route

    def _key(self, variable: str, local: bool, model: str) -> str | None:
        if not variable:  # LiteLLM in process reads its own credentials (AWS, Google)
            return None
        if variable == DEFAULT_KEY_ENV:
            return self._api_key
        key = self._env.get(variable)
        if not key and not local:
            raise UserError(
                f"student model {model!r} needs an API key in ${variable}: set it in the "
                "container's environment"
            )
        return key or _NO_KEY

    async def aclose(self) -> None:
        """Close the clients made here (an injected default client is its owner's)."""
        for client in self._owned:
            await client.close()
        self._owned.clear()
