"""Small pieces the tests' raw ASGI apps and HTTP-client tests share."""

from __future__ import annotations

from typing import Any

import pytest

# The proxy variables httpx reads: cleared so a request goes where the test sends it.
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


async def read_body(receive: Any) -> bytes:
    """The whole request body of an ASGI ``http`` scope."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every proxy variable for the test."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
