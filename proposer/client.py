"""The reflection model client: OpenAI-compatible chat completions, ``POST /chat/completions``.

Routing is :func:`transport.routing.route_model`'s, the same as the student's: ``openrouter/``
goes to OpenRouter with ``OPENROUTER_API_KEY``, ``anthropic/``, ``gemini/``, ``groq/`` and the
other providers of :data:`transport.routing.PROVIDERS` to their OpenAI-compatible endpoints with
their own keys (``azure/`` through the Azure client, ``bedrock/`` and ``vertex_ai/`` through
a LiteLLM proxy or LiteLLM), ``openai/`` to OpenAI or ``base_url`` (prefix stripped), anything
else to ``base_url`` (OpenAI when unset); each request is shaped for its provider
(:func:`transport.routing.adapt_request`). The key is read from the environment when the
client is built and kept only inside the client instance. A local ``base_url`` (127.0.0.1,
localhost) may run without a key. The request goes over httpx (:mod:`transport.chat_http`: no
``openai`` import in the optimizer process), with the ``openai`` client's retries on
408/409/429/5xx/timeouts (``max_retries``, exponential backoff, ``Retry-After`` honoured).

Every error it raises is scrubbed of the key (:class:`workspace.redact.Scrubber`): an
endpoint that echoes the key in its 401 message ("Incorrect API key provided: ...") must
not get it printed or stored, whatever it looks like; such an error does not chain the
transport's exception, whose text still holds the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

from proposer.types import ProposerConfig
from schemas.config import RunConfig
from schemas.exceptions import ProposerError, UserError
from schemas.usage import ModelUsage
from transport.chat_client import open_chat_completions
from transport.chat_http import ChatAPIError, ChatConnectionError, ChatStatusError, ChatTimeout
from transport.pricing import PriceTable, cost_usd
from transport.routing import (
    OPENROUTER_URL,
    ModelRoute,
    adapt_request,
    is_local_endpoint,
    route_model,
)
from workspace.redact import Scrubber

__all__ = [
    "ChatReply",
    "Endpoint",
    "ModelClient",
    "ToolCall",
    "ToolsUnsupported",
    "UsageMeter",
    "reflection_api_key",
    "reflection_is_local",
    "run_reflection_is_local",
    "resolve_endpoint",
]

# Reasoning models take max_completion_tokens (which also counts hidden reasoning tokens)
# and only their default temperature.
_REASONING = re.compile(r"^(o\d|gpt-5)")
_REASONING_HEADROOM = 4


class ToolsUnsupported(ProposerError):
    """The endpoint rejected a request carrying ``tools`` (a 4xx about tools/functions)."""


@dataclass(frozen=True)
class Endpoint:
    """Where and as what the model is called, after routing."""

    base_url: str | None
    model: str
    api_key_env: str
    local: bool
    route: ModelRoute


def resolve_endpoint(config: ProposerConfig, environ: Mapping[str, str] | None = None) -> Endpoint:
    """Apply the provider-prefix rules (``openrouter/``, ``openai/``, ...) of
    :mod:`transport.routing` and classify the URL as local or remote.

    Without a base URL, an OpenAI model goes where ``OPENAI_BASE_URL`` points (the ``openai``
    client's own rule, as LiteLLM's): said here so checks and defaults see the real endpoint.
    """
    env = os.environ if environ is None else environ
    route = route_model(
        config.model,
        base_url=config.base_url,
        default_base_url=env.get("OPENAI_BASE_URL") or None,
        api_key_env=config.api_key_env,
        environ=env,
    )
    return Endpoint(route.base_url, route.model, route.api_key_env, route.local, route)


def reflection_is_local(config: ProposerConfig) -> bool:
    """Whether the reflection model is served locally (one server on this machine, often a
    small model answering one request at a time): as ``config.endpoint`` says, else by where
    routing sends the model (``ollama/`` and ``OPENAI_BASE_URL`` included)."""
    return is_local_endpoint(config.endpoint, resolve_endpoint(config).base_url)


def run_reflection_is_local(cfg: RunConfig) -> bool:
    """``reflection_is_local`` for a run: by ``cfg.reflection_endpoint`` and the base URL when
    the run has no reflection model to route (an external proposer command, or a config
    that preflight will refuse)."""
    if cfg.reflection_model and not cfg.proposer_command:
        try:
            return reflection_is_local(ProposerConfig.from_run_config(cfg))
        except UserError:
            pass
    return is_local_endpoint(cfg.reflection_endpoint, cfg.reflection_base_url)


def reflection_api_key(
    model: str | None,
    base_url: str | None,
    api_key_env: str,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The key the reflection client will send (after routing), or None when unset.

    For whatever stores or prints text on a run's behalf: it registers the key with its
    scrubber, so an echo of the key anywhere is masked.
    """
    env = os.environ if environ is None else environ
    if model:
        api_key_env = resolve_endpoint(
            ProposerConfig(model=model, base_url=base_url, api_key_env=api_key_env), env
        ).api_key_env
    return (env.get(api_key_env) or None) if api_key_env else None


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is its raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatReply:
    """One chat completion: the text, tool calls, why it stopped, and what it cost."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: ModelUsage

    def assistant_message(self) -> dict[str, Any]:
        """The reply as an assistant message to send back in the next request."""
        # With tool calls an empty content must be null; without, some servers reject null.
        content = self.content or (None if self.tool_calls else "")
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


class ModelClient:
    """Chat completions against one endpoint, with usage and cost per call."""

    def __init__(
        self,
        config: ProposerConfig,
        *,
        http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.endpoint = resolve_endpoint(config, env)
        self._route = self.endpoint.route
        key = env.get(self.endpoint.api_key_env) if self.endpoint.api_key_env else None
        if not key and self._route.client != "litellm":  # LiteLLM reads its own credentials
            if not self.endpoint.local:
                where = self.endpoint.base_url or "api.openai.com"
                raise UserError(
                    f"environment variable {self.endpoint.api_key_env} is not set: it must hold "
                    f"the API key for the reflection model at {where}"
                )
            key = "sk-local-no-key"  # local servers ignore the key but the client wants one
        # Short keys too: only error messages go through it, never stored data.
        self._scrubber = Scrubber([key] if key else [], min_chars=4)
        self._config = config
        table = PriceTable(config.prices)
        # The routed name first (as the user wrote it), then the name sent on the wire.
        self._price = table.price(config.model, local=self.endpoint.local) or table.price(
            self.endpoint.model, local=self.endpoint.local
        )
        self._reasoning = bool(_REASONING.match(self.endpoint.model.rsplit("/", 1)[-1]))
        headers = {"X-Title": "gepa-runtime"} if self.endpoint.base_url == OPENROUTER_URL else None
        self._client = open_chat_completions(
            self._route,
            api_key=key,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            default_headers=headers,
            http_client=http_client,
        )

    @property
    def model(self) -> str:
        """The model name sent on the wire (routing prefix removed)."""
        return self.endpoint.model

    @property
    def cost_known(self) -> bool:
        """Whether the price table knows this model (a local endpoint's only when the user
        priced it: ``RunConfig.prices``)."""
        return self._price is not None

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """One completion. Raises ``ToolsUnsupported``, ``ProposerError`` or ``UserError``."""
        limit = max_tokens or self._config.max_tokens
        kwargs: dict[str, Any] = {"model": self.endpoint.model, "messages": list(messages)}
        if self._reasoning:
            kwargs["max_completion_tokens"] = limit * _REASONING_HEADROOM
        else:
            kwargs["max_tokens"] = limit
            kwargs["temperature"] = self._config.temperature
        if self._config.seed is not None:
            kwargs["seed"] = self._config.seed
        if tools:
            kwargs["tools"] = list(tools)
        try:
            response = await self._client.create(adapt_request(self._route, kwargs))
        except ChatStatusError as exc:
            if exc.status_code == 401:
                self._fail(
                    UserError,
                    "the reflection model endpoint rejected the key in "
                    f"{self.endpoint.api_key_env}: {exc.message}",
                    exc,
                )
            text = f"{exc.message} {exc.body}".lower()
            if tools and exc.status_code in (400, 422) and ("tool" in text or "function" in text):
                self._fail(ToolsUnsupported, f"endpoint rejected tools: {exc.message}", exc)
            self._fail(
                ProposerError,
                f"reflection model call failed with HTTP {exc.status_code}: {exc.message}",
                exc,
            )
        except ChatTimeout as exc:
            self._fail(
                ProposerError,
                f"reflection model timed out after {self._config.timeout_s:g}s "
                f"({self._config.max_retries} retries)",
                exc,
            )
        except ChatConnectionError as exc:
            self._fail(ProposerError, f"cannot reach the reflection model: {exc.message}", exc)
        except ChatAPIError as exc:  # e.g. a 200 whose body is not a completion
            self._fail(ProposerError, f"reflection model answer unusable: {exc.message}", exc)
        return self._reply(response, messages)

    def _fail(self, kind: type[Exception], message: str, cause: ChatAPIError) -> NoReturn:
        """Raise ``kind`` with ``message`` scrubbed; unchained when the cause holds the key."""
        error = kind(self._scrubber.text(message))
        cause_text = f"{cause} {getattr(cause, 'body', '')}"
        if self._scrubber.text(cause_text) != cause_text:
            raise error from None
        raise error from cause

    def _reply(self, response: Any, messages: Sequence[Mapping[str, Any]]) -> ChatReply:
        # A JSON object over httpx; an object with the same attributes from Azure or LiteLLM.
        choices = _get(response, "choices")
        if not choices:
            raise ProposerError("reflection model returned no choices")
        choice = choices[0]
        message = _get(choice, "message")
        content = _get(message, "content") or ""
        calls = tuple(
            ToolCall(_get(c, "id"), _get(f, "name"), _get(f, "arguments") or "")
            for c in (_get(message, "tool_calls") or ())
            if (f := _get(c, "function")) is not None
        )
        # Some servers omit usage or its counts (``"usage": {}``): estimate the missing ones
        # at ~4 characters per token.
        tokens_in, tokens_out, cached = reported_tokens(_get(response, "usage"))
        if tokens_in is None:
            tokens_in = sum(len(str(m.get("content") or "")) for m in messages) // 4
        if tokens_out is None:
            tokens_out = (len(content) + sum(len(c.arguments) for c in calls)) // 4
        usage = ModelUsage(
            calls=1,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cached_input_tokens=cached,
            cost_usd=cost_usd(self._price, tokens_in, tokens_out, cached) or 0.0,
        )
        return ChatReply(content, calls, _get(choice, "finish_reason") or "stop", usage)

    async def aclose(self) -> None:
        """Close the underlying HTTP connections."""
        await self._client.aclose()


def reported_tokens(usage: Any) -> tuple[int | None, int | None, int]:
    """``(prompt, completion, cached prompt)`` tokens of a completion's ``usage``, as OpenAI
    counts them (the prompt includes the cached part); ``None`` for a count not reported.

    OpenAI, OpenRouter, Gemini's and Anthropic's OpenAI-compatible endpoints report
    ``prompt_tokens`` / ``completion_tokens`` and the cached part in
    ``prompt_tokens_details.cached_tokens``; Anthropic's own usage (``input_tokens``, without
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens``), which a LiteLLM proxy may
    pass on, is folded into the same three counts.
    """
    prompt = _count(_get(usage, "prompt_tokens"))
    completion = _count(_get(usage, "completion_tokens"))
    cached = _count(_get(_get(usage, "prompt_tokens_details"), "cached_tokens")) or 0
    read = _count(_get(usage, "cache_read_input_tokens")) or 0
    if prompt is None and (native := _count(_get(usage, "input_tokens"))) is not None:
        prompt = native + read + (_count(_get(usage, "cache_creation_input_tokens")) or 0)
        cached = read
    if completion is None:
        completion = _count(_get(usage, "output_tokens"))
    return prompt, completion, max(cached, read) if prompt is not None else 0


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _get(value: Any, name: str) -> Any:
    """``value[name]`` of a JSON object, or the attribute of a reply object; None if absent."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


class UsageMeter:
    """Sums the usage of every call made for one proposal, even one that ends in an error."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.usage = ModelUsage()

    @property
    def tokens(self) -> int:
        """Input plus output tokens spent so far."""
        return self.usage.input_tokens + self.usage.output_tokens

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """``client.chat`` with the reply's usage added to ``usage``."""
        reply = await self.client.chat(messages, tools=tools, max_tokens=max_tokens)
        self.usage = self.usage + reply.usage
        return reply
