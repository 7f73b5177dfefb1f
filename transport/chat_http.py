"""OpenAI-compatible chat completions over httpx: ``POST {base_url}/chat/completions``.

The optimizer's reflection client talks to OpenAI, OpenRouter, the providers of
:data:`transport.routing.PROVIDERS`, llama.cpp, vLLM and Ollama through this one request,
without the ``openai`` package (whose thousands of type models cost the optimizer process
about half a second of CPU to import). It keeps that client's manners: the key as
``Authorization: Bearer``, ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` as its headers, the
``extra_body`` fields merged into the body, and its retries: up to ``max_retries`` more tries
after a timeout, a connection error or a 408/409/429/5xx answer (unless the server says
``x-should-retry: false``), waiting what ``retry-after-ms`` / ``Retry-After`` asks (up to two
minutes; a longer wait is not retried) or else 0.5 s doubling up to 8 s, less up to a quarter
of jitter. The answer is the completion's JSON object, as sent. A server on this machine
reached over plain ``http://`` without a proxy (llama.cpp, vLLM, Ollama, a test server) needs
no TLS: its client trusts no certificate instead of loading the CA bundle (which costs CPU
at start), so a redirect from there to ``https://`` fails rather than go unverified. It is also
reached through :class:`transport.http11.PlainHTTPTransport`, as the container client reaches a
plain-HTTP container, so a run against a local model never loads httpcore.

Errors, shaped as the ``openai`` package's so the caller maps them the same way::

    ChatAPIError                 message, body (e.g. a 200 that is not a JSON completion)
    ├── ChatStatusError          a 4xx/5xx answer: status_code, response, body ("error" part)
    └── ChatConnectionError      the server could not be reached
        └── ChatTimeout          no answer within the timeout
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import ssl
import time
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from transport.http11 import PlainHTTPTransport
from transport.routing import is_local_url

__all__ = [
    "OPENAI_URL",
    "ChatAPIError",
    "ChatConnectionError",
    "ChatStatusError",
    "ChatTimeout",
    "HttpChatCompletions",
    "retry_after",
    "retry_delay",
    "should_retry",
]

OPENAI_URL = "https://api.openai.com/v1"
_FIRST_DELAY = 0.5
_MAX_DELAY = 8.0
_MAX_RETRY_AFTER = 120.0
# The openai client's pool: plenty of connections, so concurrent proposals never queue here.
_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)


class ChatAPIError(Exception):
    """A chat completion that failed; ``body`` is what the server sent, if anything."""

    def __init__(self, message: str, *, body: object | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class ChatStatusError(ChatAPIError):
    """A 4xx or 5xx answer: its status, the response, and the body's ``error`` part."""

    def __init__(self, message: str, *, response: httpx.Response, body: object | None) -> None:
        super().__init__(message, body=body)
        self.response = response
        self.status_code = response.status_code


class ChatConnectionError(ChatAPIError):
    """The request did not get an answer (refused, reset, DNS, TLS)."""

    def __init__(self, message: str = "Connection error.") -> None:
        super().__init__(message)


class ChatTimeout(ChatConnectionError):
    """No answer within the client's timeout."""

    def __init__(self) -> None:
        super().__init__("Request timed out.")


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks to wait (``retry-after-ms``, else ``Retry-After`` as seconds
    or an HTTP date), or None when it does not say."""
    try:
        return float(headers.get("retry-after-ms", "")) / 1000
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        date = email.utils.parsedate_tz(value)
        return None if date is None else float(email.utils.mktime_tz(date) - time.time())
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def should_retry(response: httpx.Response) -> bool:
    """Whether a 4xx/5xx answer is worth another try (the openai client's rule)."""
    wait = retry_after(response.headers)
    if wait is not None and math.isfinite(wait) and wait > _MAX_RETRY_AFTER:
        return False
    told = response.headers.get("x-should-retry")
    if told in ("true", "false"):
        return told == "true"
    return response.status_code in (408, 409, 429) or response.status_code >= 500


def retry_delay(retries_taken: int, headers: httpx.Headers | None, rng: random.Random) -> float:
    """Seconds to wait before the next try: the server's ask when sane, else the backoff."""
    wait = retry_after(headers) if headers is not None else None
    if wait is not None and math.isfinite(wait) and 0 < wait <= _MAX_RETRY_AFTER:
        return wait
    backoff = min(_FIRST_DELAY * 2.0 ** min(retries_taken, 1000), _MAX_DELAY)
    return max(backoff * (1 - 0.25 * rng.random()), 0.0)


class HttpChatCompletions:
    """``await create(body)`` -> the completion's JSON object; ``await aclose()`` when done."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        environ: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.url = f"{(base_url or OPENAI_URL).rstrip('/')}/chat/completions"
        self.max_retries = max_retries
        headers = {"Accept": "application/json", "User-Agent": "gepa-runtime"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        for variable, header in (
            ("OPENAI_ORG_ID", "OpenAI-Organization"),
            ("OPENAI_PROJECT_ID", "OpenAI-Project"),
        ):
            if env.get(variable):
                headers[header] = env[variable]
        self._headers = {**headers, **(default_headers or {})}
        self._owned = http_client is None
        self._http = http_client or _client(self.url, timeout)
        self._rng = rng or random.Random()

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """One chat completion of ``body`` (``extra_body`` merged in), retried as the module
        docstring says; raises the :class:`ChatAPIError` tree."""
        payload = {k: v for k, v in body.items() if k != "extra_body"}
        payload.update(body.get("extra_body") or {})
        for tries in range(self.max_retries + 1):
            last = tries == self.max_retries
            try:
                response = await self._http.post(self.url, json=payload, headers=self._headers)
            except httpx.TimeoutException:
                if last:
                    raise ChatTimeout() from None
                await asyncio.sleep(retry_delay(tries, None, self._rng))
                continue
            except httpx.TransportError as exc:
                if last:
                    raise ChatConnectionError() from exc
                await asyncio.sleep(retry_delay(tries, None, self._rng))
                continue
            if response.status_code < 400:
                return _completion(response)
            if last or not should_retry(response):
                raise _status_error(response)
            await asyncio.sleep(retry_delay(tries, response.headers, self._rng))
        raise AssertionError("unreachable: the last try returns or raises")

    async def aclose(self) -> None:
        """Close the connections (an injected ``http_client`` is its owner's to close)."""
        if self._owned:
            await self._http.aclose()


def _client(url: str, timeout: float) -> httpx.AsyncClient:
    """httpx's client for ``url``; a local plain-HTTP one over our transport (the module
    docstring), which hands anything but ``http://`` to httpx's, trusting no certificate."""
    verify = _tls(url)
    transport = (
        PlainHTTPTransport(
            limits=_LIMITS,
            fallback=lambda: httpx.AsyncHTTPTransport(verify=verify, limits=_LIMITS),
        )
        if isinstance(verify, ssl.SSLContext)
        else None
    )
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        limits=_LIMITS,
        follow_redirects=True,
        verify=verify,
        transport=transport,
    )


def _tls(url: str) -> ssl.SSLContext | bool:
    """httpx's default (the CA bundle) unless ``url`` cannot need TLS (the module docstring)."""
    plain = urlsplit(url).scheme == "http" and is_local_url(url)
    if plain and not any(scheme != "no" for scheme in urllib.request.getproxies()):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and trusts nothing
    return True


def _completion(response: httpx.Response) -> dict[str, Any]:
    try:
        data = json.loads(response.content)
    except ValueError:
        raise ChatAPIError(
            f"the answer is not JSON: {response.text[:200]!r}", body=response.text
        ) from None
    if not isinstance(data, dict):
        raise ChatAPIError(f"the answer is not a JSON object: {data!r:.200}", body=data)
    if "choices" not in data and isinstance(data.get("error"), Mapping):
        error = data["error"]
        raise ChatAPIError(str(error.get("message") or error), body=error)
    return data


def _status_error(response: httpx.Response) -> ChatStatusError:
    """The openai client's message and body for a 4xx/5xx answer."""
    text = response.text.strip()
    body: object = text
    try:
        body = json.loads(text)
        message = f"Error code: {response.status_code} - {body}"
    except ValueError:
        message = text or f"Error code: {response.status_code}"
    data = body.get("error", body) if isinstance(body, Mapping) else body
    return ChatStatusError(message, response=response, body=data)
