"""How both planes reach a model or a server over HTTP: the ground floor under the SDK,
the proposer and the optimizer, above the contracts of :mod:`schemas`.

- :mod:`transport.http11`: plain ``http://`` as an httpx transport (HTTP/1.1 over asyncio);
- :mod:`transport.chat_http`: OpenAI-compatible chat completions over httpx, with the
  ``openai`` client's retries and error shapes;
- :mod:`transport.chat_client`: the chat clients of a routed model, one for each plane (the
  optimizer's reflection model, the container's student);
- :mod:`transport.routing`: where a model name goes (the provider prefixes LiteLLM users
  write) and each provider's request quirks.

It imports :mod:`schemas` (the exception tree) and nothing else of ours.
"""

from __future__ import annotations

from transport.chat_client import ChatCompletions, open_chat_client, open_chat_completions
from transport.chat_http import (
    OPENAI_URL,
    ChatAPIError,
    ChatConnectionError,
    ChatStatusError,
    ChatTimeout,
    HttpChatCompletions,
    retry_after,
    retry_delay,
    should_retry,
)
from transport.http11 import PlainHTTPTransport
from transport.routing import (
    DEFAULT_KEY_ENV,
    ENDPOINT_KINDS,
    OLLAMA_URL,
    OPENROUTER_KEY_ENV,
    OPENROUTER_URL,
    PROVIDERS,
    ModelRoute,
    Provider,
    Quirks,
    adapt_request,
    is_local_endpoint,
    is_local_url,
    route_model,
)

__all__ = [
    "DEFAULT_KEY_ENV",
    "ENDPOINT_KINDS",
    "OLLAMA_URL",
    "OPENAI_URL",
    "OPENROUTER_KEY_ENV",
    "OPENROUTER_URL",
    "PROVIDERS",
    "ChatAPIError",
    "ChatCompletions",
    "ChatConnectionError",
    "ChatStatusError",
    "ChatTimeout",
    "HttpChatCompletions",
    "ModelRoute",
    "PlainHTTPTransport",
    "Provider",
    "Quirks",
    "adapt_request",
    "is_local_endpoint",
    "is_local_url",
    "open_chat_client",
    "open_chat_completions",
    "retry_after",
    "retry_delay",
    "route_model",
    "should_retry",
]
