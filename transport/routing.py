"""Where a model name goes: the provider prefixes LiteLLM users write, on both planes.

The optimizer sends the reflection model (``proposer.client``) and the container sends the
student model (``container.student``); one table serves both, so it lives in ``transport``,
the networking both planes import. :data:`PROVIDERS` is that table:

| prefix | endpoint (OpenAI-compatible unless said) | key variable |
|---|---|---|
| ``openai/`` or none | the base URL given, else ``OPENAI_BASE_URL``, else OpenAI | ``OPENAI_API_KEY`` |
| ``openrouter/`` | ``https://openrouter.ai/api/v1`` | ``OPENROUTER_API_KEY`` |
| ``ollama/``, ``ollama_chat/`` | ``http://localhost:11434/v1`` | none |
| ``anthropic/`` | ``https://api.anthropic.com/v1`` | ``ANTHROPIC_API_KEY`` |
| ``gemini/`` | ``https://generativelanguage.googleapis.com/v1beta/openai`` | ``GEMINI_API_KEY`` |
| ``groq/`` | ``https://api.groq.com/openai/v1`` | ``GROQ_API_KEY`` |
| ``mistral/`` | ``https://api.mistral.ai/v1`` | ``MISTRAL_API_KEY`` |
| ``deepseek/`` | ``https://api.deepseek.com`` | ``DEEPSEEK_API_KEY`` |
| ``together_ai/`` | ``https://api.together.xyz/v1`` | ``TOGETHER_API_KEY`` or ``TOGETHERAI_API_KEY`` |
| ``fireworks_ai/`` | ``https://api.fireworks.ai/inference/v1`` | ``FIREWORKS_API_KEY`` |
| ``xai/`` | ``https://api.x.ai/v1`` | ``XAI_API_KEY`` |
| ``azure/<deployment>`` | the ``openai`` package's Azure client at ``AZURE_API_BASE`` (or ``AZURE_OPENAI_ENDPOINT``), API version ``AZURE_API_VERSION`` (or ``OPENAI_API_VERSION``) | ``AZURE_API_KEY`` or ``AZURE_OPENAI_API_KEY`` |
| ``bedrock/``, ``vertex_ai/`` | a LiteLLM proxy (the base URL given, or ``LITELLM_PROXY_API_BASE``), sent as written; else in process through the ``[litellm]`` extra, with the credentials LiteLLM reads (AWS, Google) | ``LITELLM_PROXY_API_KEY`` for a proxy |

The prefix is stripped before the name goes on the wire (except for a LiteLLM proxy or
LiteLLM itself, which route by it). A base URL given for a model wins over the table: the
same provider, its key and its quirks, at that URL. Other LiteLLM prefixes (``cohere/``, ...)
are refused without a base URL, with the fix. An endpoint on this machine (127.0.0.1,
localhost) is ``local``: it may run without a key.

Each provider's request quirks (:class:`Quirks`, applied by :func:`adapt_request`): Anthropic
takes temperatures in [0, 1] and ignores ``seed``; Mistral takes temperatures in [0, 1],
``max_tokens`` only, ``random_seed`` for ``seed``, ``name`` only on tool messages and no
``strict``/``additionalProperties``/``$schema`` in tool schemas; Groq refuses ``name`` on
messages and null fields in assistant messages (content null beside tool calls); xAI
refuses ``name`` on messages.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from schemas.exceptions import UserError

__all__ = [
    "DEFAULT_KEY_ENV",
    "ENDPOINT_KINDS",
    "OLLAMA_URL",
    "OPENROUTER_KEY_ENV",
    "OPENROUTER_URL",
    "PROVIDERS",
    "ModelRoute",
    "Provider",
    "Quirks",
    "adapt_request",
    "is_local_endpoint",
    "is_local_url",
    "route_model",
]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
OPENROUTER_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"
OLLAMA_URL = "http://localhost:11434/v1"
AZURE_API_VERSION = "2024-10-21"  # the latest GA data-plane version when this was written
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
_REFUSED = {"cohere", "huggingface", "replicate", "sagemaker", "watsonx"}  # own APIs, no table row
ClientKind = Literal["openai", "azure", "litellm"]


@dataclass(frozen=True)
class Quirks:
    """What a provider's endpoint needs changed in an OpenAI-style request body."""

    temperature_max: float = 2.0
    seed_field: str | None = "seed"  # None: the endpoint ignores it, not sent
    max_tokens_only: bool = False  # refuses max_completion_tokens
    message_name: Literal["keep", "drop", "tool_only"] = "keep"
    drop_null_fields: bool = False  # assistant messages without null values
    plain_tool_schemas: bool = False  # no strict / additionalProperties / $schema


@dataclass(frozen=True)
class Provider:
    """One row of the table: where a prefix goes and how its requests are shaped."""

    base_url: str | None
    key_envs: tuple[str, ...]
    client: ClientKind = "openai"
    quirks: Quirks = field(default_factory=Quirks)


PROVIDERS: dict[str, Provider] = {
    "openai": Provider(None, (DEFAULT_KEY_ENV,)),
    "openrouter": Provider(OPENROUTER_URL, (OPENROUTER_KEY_ENV,)),
    "ollama": Provider(OLLAMA_URL, ()),
    "ollama_chat": Provider(OLLAMA_URL, ()),
    "anthropic": Provider(
        "https://api.anthropic.com/v1",
        ("ANTHROPIC_API_KEY",),
        quirks=Quirks(temperature_max=1.0, seed_field=None),
    ),
    "gemini": Provider(
        "https://generativelanguage.googleapis.com/v1beta/openai", ("GEMINI_API_KEY",)
    ),
    "groq": Provider(
        "https://api.groq.com/openai/v1",
        ("GROQ_API_KEY",),
        quirks=Quirks(message_name="drop", drop_null_fields=True),
    ),
    "mistral": Provider(
        "https://api.mistral.ai/v1",
        ("MISTRAL_API_KEY",),
        quirks=Quirks(
            temperature_max=1.0,
            seed_field="random_seed",
            max_tokens_only=True,
            message_name="tool_only",
            plain_tool_schemas=True,
        ),
    ),
    "deepseek": Provider("https://api.deepseek.com", ("DEEPSEEK_API_KEY",)),
    "together_ai": Provider(
        "https://api.together.xyz/v1", ("TOGETHER_API_KEY", "TOGETHERAI_API_KEY")
    ),
    "fireworks_ai": Provider("https://api.fireworks.ai/inference/v1", ("FIREWORKS_API_KEY",)),
    "xai": Provider("https://api.x.ai/v1", ("XAI_API_KEY",), quirks=Quirks(message_name="drop")),
    "azure": Provider(None, ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY"), client="azure"),
    "bedrock": Provider(None, (), client="litellm"),
    "vertex_ai": Provider(None, (), client="litellm"),
}


@dataclass(frozen=True)
class ModelRoute:
    """Where and as what a model is called, which variable holds its key, and how."""

    model: str
    base_url: str | None  # None: OpenAI (or LiteLLM in process)
    api_key_env: str  # "" when the client reads its own credentials (LiteLLM in process)
    local: bool
    provider: str = "openai"
    client: ClientKind = "openai"
    api_version: str | None = None  # Azure only
    quirks: Quirks = field(default_factory=Quirks)


def is_local_url(url: str | None) -> bool:
    """Whether ``url`` points at this machine (such servers need no key)."""
    host = (urlsplit(url).hostname or "").lower() if url else ""
    return host in _LOCAL_HOSTS or host.startswith("127.")


ENDPOINT_KINDS = ("auto", "local", "hosted")


def is_local_endpoint(kind: str, url: str | None) -> bool:
    """Whether a model endpoint is a local server (one on this machine, answering one request
    at a time) rather than a hosted API: as ``kind`` says, or by the URL when it is ``auto``."""
    if kind not in ENDPOINT_KINDS:
        raise UserError(f"endpoint kind {kind!r} is not one of {', '.join(ENDPOINT_KINDS)}")
    return is_local_url(url) if kind == "auto" else kind == "local"


def _first_set(names: tuple[str, ...], env: Mapping[str, str]) -> str:
    return next((n for n in names if env.get(n)), names[0])


def route_model(
    model: str,
    *,
    base_url: str | None = None,
    default_base_url: str | None = None,
    api_key_env: str = DEFAULT_KEY_ENV,
    environ: Mapping[str, str] | None = None,
) -> ModelRoute:
    """Apply the table of the module docstring to ``model``.

    ``base_url`` was given for this model and wins; ``default_base_url`` (the OpenAI
    endpoint's, e.g. ``OPENAI_BASE_URL``) applies only to names without a provider row of
    their own. ``api_key_env`` is the variable the caller was told to read: a provider's own
    variable replaces the default one (the first of its variables that is set in
    ``environ``, else its first), a variable named on purpose is kept.
    """
    env = os.environ if environ is None else environ
    prefix, _, rest = model.partition("/")
    row = PROVIDERS.get(prefix) if rest else None
    if row is None or prefix == "openai":
        if prefix in _REFUSED and rest and (base_url or default_base_url) is None:
            raise UserError(
                f"model {model!r}: LiteLLM's {prefix}/ provider has its own API, which "
                f"gepa-runtime does not speak; use openrouter/{model} (key in "
                f"{OPENROUTER_KEY_ENV}) or give the base URL of an OpenAI-compatible proxy for it"
            )
        url = base_url or default_base_url
        name = rest if prefix == "openai" and rest else model
        return ModelRoute(name, url, api_key_env, local=is_local_url(url))
    if row.client == "litellm":
        return _litellm_route(model, prefix, row, base_url, default_base_url, api_key_env, env)
    if api_key_env == DEFAULT_KEY_ENV and row.key_envs:
        api_key_env = _first_set(row.key_envs, env)
    url = base_url or row.base_url
    version = None
    if row.client == "azure":
        url = url or env.get("AZURE_API_BASE") or env.get("AZURE_OPENAI_ENDPOINT")
        if not url:
            raise UserError(
                f"model {model!r}: set AZURE_API_BASE (or AZURE_OPENAI_ENDPOINT) to your Azure "
                "OpenAI resource, e.g. https://NAME.openai.azure.com, or pass its base URL"
            )
        version = env.get("AZURE_API_VERSION") or env.get("OPENAI_API_VERSION") or AZURE_API_VERSION
    return ModelRoute(
        rest, url, api_key_env, is_local_url(url), prefix, row.client, version, row.quirks
    )


def _litellm_route(
    model: str,
    prefix: str,
    row: Provider,
    base_url: str | None,
    default_base_url: str | None,
    api_key_env: str,
    env: Mapping[str, str],
) -> ModelRoute:
    """``bedrock/``, ``vertex_ai/``: a LiteLLM proxy when one is named, else LiteLLM itself."""
    proxy = base_url or env.get("LITELLM_PROXY_API_BASE") or default_base_url
    if proxy:
        if api_key_env == DEFAULT_KEY_ENV and env.get("LITELLM_PROXY_API_KEY"):
            api_key_env = "LITELLM_PROXY_API_KEY"
        return ModelRoute(model, proxy, api_key_env, is_local_url(proxy), prefix)
    return ModelRoute(model, None, "", False, prefix, "litellm", quirks=row.quirks)


def adapt_request(route: ModelRoute, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` (an OpenAI chat-completions request) as ``route``'s provider needs it.

    Pure: the caller's dicts are not changed. Values outside the provider's range are
    clamped, renamed fields keep their value, dropped fields are the ones it refuses.
    """
    quirks = route.quirks
    out = dict(body)
    if isinstance(out.get("temperature"), int | float):
        out["temperature"] = min(max(float(out["temperature"]), 0.0), quirks.temperature_max)
    if "seed" in out and quirks.seed_field != "seed":
        seed = out.pop("seed")
        if quirks.seed_field is not None:
            # openai's client refuses unknown keywords: an extra field goes in extra_body
            out["extra_body"] = {**out.get("extra_body", {}), quirks.seed_field: seed}
    if quirks.max_tokens_only and "max_completion_tokens" in out:
        out["max_tokens"] = out.pop("max_completion_tokens")
    if "messages" in out:
        out["messages"] = [_message(m, quirks) for m in out["messages"]]
    if quirks.plain_tool_schemas and out.get("tools"):
        out["tools"] = [_plain_tool(t) for t in out["tools"]]
    return out


def _message(message: Mapping[str, Any], quirks: Quirks) -> dict[str, Any]:
    out = dict(message)
    keep_name = quirks.message_name == "keep" or (
        quirks.message_name == "tool_only" and out.get("role") == "tool" and out.get("name")
    )
    if not keep_name:
        out.pop("name", None)
    if quirks.drop_null_fields and out.get("role") == "assistant":
        out = {k: v for k, v in out.items() if v is not None}
    return out


def _plain_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(tool)
    function = dict(out.get("function") or {})
    function.pop("strict", None)
    if isinstance(function.get("parameters"), Mapping):
        function["parameters"] = _plain_schema(function["parameters"])
    out["function"] = function
    return out


def _plain_schema(schema: Any) -> Any:
    if isinstance(schema, Mapping):
        return {
            k: _plain_schema(v)
            for k, v in schema.items()
            if k not in ("$schema", "$id") and not (k == "additionalProperties" and v is False)
        }
    if isinstance(schema, list):
        return [_plain_schema(v) for v in schema]
    return schema
