"""Fixtures of the proposer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import respx

from tests.proposer.fakes import BASE
from transport import chat_http


@pytest.fixture(autouse=True)
def _chat_over_httpx_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """respx fakes httpx's own transport, and the chat client reaches a local server such as
    ``BASE`` over ours (``transport.http11``); here it gets httpx's, which respx intercepts.
    ``tests/transport/test_http11.py`` covers the chat client over ours."""
    monkeypatch.setattr(chat_http, "PlainHTTPTransport", lambda *, limits, fallback: fallback())


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    """respx router for the fake endpoint at ``BASE``."""
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router
