"""The chat-completions client of a routed model, the same on both planes.

``open_chat_client(route, ...)`` gives an object with the slice of ``openai.AsyncOpenAI``
both planes use, ``await client.chat.completions.create(**body)`` and ``await
client.close()``: an ``AsyncOpenAI`` for OpenAI-compatible endpoints, the ``openai``
package's ``AsyncAzureOpenAI`` for ``azure/`` deployments (key sent as ``api-key``), and
``litellm.acompletion`` for ``bedrock/`` and ``vertex_ai/`` without a proxy (the
``[litellm]`` extra; LiteLLM's errors are ``openai``'s exception classes, so callers catch
them as they do the others).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx
import openai

from schemas.exceptions import UserError
from schemas.routing import ModelRoute

__all__ = ["open_chat_client"]


def open_chat_client(
    route: ModelRoute,
    *,
    api_key: str | None,
    timeout: float,
    max_retries: int,
    default_headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> Any:
    """A client for ``route`` (see the module docstring); the caller closes it."""
    if route.client == "litellm":
        return _LiteLLMClient(timeout=timeout, max_retries=max_retries)
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
