"""The chat-completions clients of a routed model, one for each plane.

``open_chat_completions(route, ...)`` is the optimizer's (the reflection model): ``await
client.create(body)`` gives the completion's JSON object and ``await client.aclose()`` closes
it; errors are :mod:`transport.chat_http`'s tree. OpenAI-compatible endpoints are called over
httpx directly (:class:`transport.chat_http.HttpChatCompletions`), so the optimizer process
never imports the ``openai`` package for them; ``azure/`` deployments and ``bedrock/`` /
``vertex_ai/`` without a proxy go through the clients below, their errors translated.

``open_chat_client(route, ...)`` is the container's (the student model): an object with the
slice of ``openai.AsyncOpenAI`` user code expects, ``await client.chat.completions.create
(**body)`` and ``await client.close()``: an ``AsyncOpenAI`` for OpenAI-compatible endpoints,
the ``openai`` package's ``AsyncAzureOpenAI`` for ``azure/`` deployments (key sent as
``api-key``), and ``litellm.acompletion`` for ``bedrock/`` and ``vertex_ai/`` without a
proxy (the ``[litellm]`` extra; LiteLLM's errors are ``openai``'s exception classes, so
callers catch them as they do the others). The ``openai`` package is imported on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

import httpx

from schemas.exceptions import UserError
from transport.chat_http import (
    ChatAPIError,
    ChatConnectionError,
    ChatStatusError,
    ChatTimeout,
    HttpChatCompletions,
)
from transport.routing import ModelRoute

__all__ = ["ChatCompletions", "open_chat_client", "open_chat_completions"]


class ChatCompletions(Protocol):
    """What the reflection client calls: one completion, and closing."""

    async def create(self, body: Mapping[str, Any]) -> Any:
        """The completion: a JSON object, or an object with the same attributes."""
        ...

    async def aclose(self) -> None:
        """Close the connections."""
        ...


def open_chat_completions(
    route: ModelRoute,
    *,
    api_key: str | None,
    timeout: float,
    max_retries: int,
    default_headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> ChatCompletions:
    """The optimizer's client for ``route`` (see the module docstring); the caller closes it."""
    if route.client == "openai":
        return HttpChatCompletions(
            base_url=route.base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=default_headers,
            http_client=http_client,
        )
    client = open_chat_client(
        route,
        api_key=api_key,
        timeout=timeout,
        max_retries=max_retries,
        default_headers=default_headers,
        http_client=http_client,
    )
    return _PackageCompletions(client)


def open_chat_client(
    route: ModelRoute,
    *,
    api_key: str | None,
    timeout: float,
    max_retries: int,
    default_headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> Any:
    """The container's client for ``route`` (see the module docstring); the caller closes it."""
    if route.client == "litellm":
        return _LiteLLMClient(timeout=timeout, max_retries=max_retries)
    import openai  # heavy (~0.5 s of CPU): only where an openai-package client is made

    if route.client == "azure":
        return openai.AsyncAzureOpenAI(
            api_key=api_key,
            azure_endpoint=route.base_url or "",
            api_version=route.api_version,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=route.base_url,
        timeout=timeout,
        max_retries=max_retries,
        default_headers=default_headers,
        http_client=http_client,
    )


class _PackageCompletions:
    """An ``openai``-package-shaped client (Azure, LiteLLM) behind ``ChatCompletions``."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def create(self, body: Mapping[str, Any]) -> Any:
        """One completion; ``openai``'s errors (LiteLLM's subclass them) become ours."""
        import openai  # loaded already: the wrapped client is made of it

        try:
            return await self._client.chat.completions.create(**body)
        except openai.APIStatusError as exc:  # the original holds the key it may echo
            raise ChatStatusError(exc.message, response=exc.response, body=exc.body) from None
        except openai.APITimeoutError:
            raise ChatTimeout() from None
        except openai.APIConnectionError as exc:
            raise ChatConnectionError(exc.message) from None
        except openai.APIError as exc:
            raise ChatAPIError(exc.message, body=exc.body) from None

    async def aclose(self) -> None:
        """Close the wrapped client."""
        await self._client.close()


class _LiteLLMClient:
    """``client.chat.completions.create(**body)`` served by ``litellm.acompletion``."""

    def __init__(self, *, timeout: float, max_retries: int) -> None:
        # LiteLLM fetches its price map from the internet on import unless told not to.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            import litellm
        except ImportError:
            raise UserError(
                "bedrock/ and vertex_ai/ models need LiteLLM: pip install "
                "'gepa-runtime[litellm]', or run a LiteLLM proxy and give its URL as the "
                "base URL (or LITELLM_PROXY_API_BASE)"
            ) from None
        self._litellm = litellm
        self._timeout = timeout
        self._retries = max_retries
        self.chat = self
        self.completions = self

    async def create(self, **body: Any) -> Any:
        """One chat completion through LiteLLM; the reply has the OpenAI shape."""
        extra = body.pop("extra_body", None) or {}
        return await self._litellm.acompletion(
            **body, **extra, timeout=self._timeout, num_retries=self._retries
        )

    async def close(self) -> None:
        """Nothing to close: LiteLLM keeps its own connection pools."""
