"""Where a model name goes: the provider prefixes LiteLLM users write, on both planes.

The optimizer sends the reflection model (``proposer.client``) and the container sends the
student model (``container.chat`` and the examples); one rule serves both, so it lives in
``schemas``, the one package both planes import.

- ``openrouter/<model>``: OpenRouter (``https://openrouter.ai/api/v1``), sent as ``<model>``,
  key from ``OPENROUTER_API_KEY``.
- ``openai/<model>``: sent as ``<model>`` to the base URL given (LiteLLM's ``api_base``: a
  vLLM, Ollama or llama.cpp server), else to OpenAI.
- ``ollama/<model>``, ``ollama_chat/<model>``: a local Ollama's OpenAI-compatible endpoint
  (``http://localhost:11434/v1`` unless a base URL is given).
- Any other name goes as written to the base URL given, else to OpenAI. Other LiteLLM
  providers (``anthropic/``, ``gemini/``, ...) speak their own APIs: without a base URL they
  are refused with the fix (OpenRouter) instead of failing later as an unknown OpenAI model.

An endpoint on this machine (127.0.0.1, localhost) is ``local``: it may run without a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from schemas.exceptions import UserError

__all__ = [
    "DEFAULT_KEY_ENV",
    "ENDPOINT_KINDS",
    "OLLAMA_URL",
    "OPENROUTER_KEY_ENV",
    "OPENROUTER_URL",
    "ModelRoute",
    "is_local_endpoint",
    "is_local_url",
    "route_model",
]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
OPENROUTER_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"
OLLAMA_URL = "http://localhost:11434/v1"
_OWN_ENDPOINTS = ("openrouter", "ollama", "ollama_chat")  # prefixes with a URL of their own
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
# LiteLLM providers with APIs of their own: reachable here only through OpenRouter or a proxy.
_FOREIGN = {
    "anthropic", "azure", "bedrock", "cohere", "deepseek", "fireworks_ai", "gemini", "groq",
    "mistral", "together_ai", "vertex_ai", "xai",
}  # fmt: skip


@dataclass(frozen=True)
class ModelRoute:
    """Where and as what a model is called, and which variable holds its key."""

    model: str
    base_url: str | None  # None: OpenAI
    api_key_env: str
    local: bool


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


def route_model(
    model: str,
    *,
    base_url: str | None = None,
    default_base_url: str | None = None,
    api_key_env: str = DEFAULT_KEY_ENV,
) -> ModelRoute:
    """Apply the prefix rules of the module docstring to ``model``.

    ``base_url`` was given for this model and wins; ``default_base_url`` (the OpenAI
    endpoint's, e.g. ``OPENAI_BASE_URL``) applies only to a model whose prefix has no
    endpoint of its own (not ``openrouter/``, ``ollama/``). ``api_key_env`` is the variable
    the caller was told to read; an ``openrouter/`` model switches the default one to
    ``OPENROUTER_API_KEY`` (OpenRouter has its own key).
    """
    prefix, _, rest = model.partition("/")
    if base_url is None and not (prefix in _OWN_ENDPOINTS and rest):
        base_url = default_base_url
    if prefix == "openrouter" and rest:
        base_url = base_url or OPENROUTER_URL
        if api_key_env == DEFAULT_KEY_ENV:
            api_key_env = OPENROUTER_KEY_ENV
        model = rest
    elif prefix == "openai" and rest:
        model = rest
    elif prefix in ("ollama", "ollama_chat") and rest:
        base_url, model = base_url or OLLAMA_URL, rest
    elif prefix in _FOREIGN and rest and base_url is None:
        raise UserError(
            f"model {model!r}: LiteLLM's {prefix}/ provider has its own API, which gepa-runtime "
            f"does not speak; use openrouter/{model} (key in {OPENROUTER_KEY_ENV}) or give the "
            "base URL of an OpenAI-compatible proxy for it"
        )
    return ModelRoute(model, base_url, api_key_env, local=is_local_url(base_url))
